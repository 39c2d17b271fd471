"""Tasks: data + model + loss + evaluation, built from a config and run by the trainer.

The protocol and the registry live in ``jaxlab.train.task``; the tasks here are registered
there lazily by name, so importing the trainer imports none of them.
"""

from jaxlab.train.task import TASKS, Task, make_task
