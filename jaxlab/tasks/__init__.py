"""Tasks: data + model + loss + evaluation, built from a config and run by the trainer."""

from jaxlab.tasks.base import TASKS, Task, make_task
from jaxlab.tasks import classification, two_tower  # noqa: F401  (register their tasks)
