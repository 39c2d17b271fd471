"""Tasks: data + model + loss + evaluation + inference, built once from a config and the trainer's context.

The protocol and the registry live in ``jaxlab.train.task``; the tasks here are registered
there lazily by name, so importing the trainer imports none of them.
"""

from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Inference, Task, make_task
