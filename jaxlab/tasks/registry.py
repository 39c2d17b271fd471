"""The shipped tasks by name, and :func:`make_task`: a config's task, built once in its context.

The shipped tasks register here lazily (``"module:function"``, imported on first use), in the
trainer's one registry (``jaxlab.train.TASKS``), so that naming them imports no method package;
a config file or user code registers its own with ``@TASKS.register(name)``.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from jaxlab.errors import InputError
from jaxlab.registry import missing_extra_error
from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Task

#: The shipped tasks: ``config.task`` -> the factory's ``"module:function"``.
SHIPPED = {
    "digits_classification": "jaxlab.tasks.classification:digits_classification",
    "digits_two_tower": "jaxlab.tasks.two_tower:digits_two_tower",
    "clip_files": "jaxlab.tasks.clip_files:clip_files",
    "dqn_atari": "jaxlab.tasks.dqn_atari:dqn_atari",
    "dqn_minatar": "jaxlab.tasks.dqn_minatar:dqn_minatar",
    "pde_operator": "jaxlab.tasks.pde_operator:pde_operator",
}
for _name, _target in SHIPPED.items():
  TASKS.register_lazy(_name, _target)


def _check_signature(name: str, factory: Callable[..., Task]) -> None:
  """A factory that cannot take ``(config, ctx)`` (the older ``(config)`` form): one line naming the form."""
  try:
    inspect.signature(factory).bind(None, None)
  except TypeError:
    raise InputError(f"task {name!r}: its factory {getattr(factory, '__qualname__', factory)!r} does not take "
                     "(config, ctx); a task factory is def factory(config, ctx) -> Task (ctx: the "
                     "jaxlab.train.TaskContext the trainer resolved: mesh, runs, devices)") from None
  except ValueError:  # a builtin or C callable without a signature: called as it is
    pass


def make_task(config: Any, ctx: TaskContext) -> Task:
  """The task ``config.task`` names (a name in ``TASKS``), built once from ``config`` and ``ctx``.

  Args:
    config: an experiment config.
    ctx: what the config layer resolved (mesh, runs, devices): ``jaxlab.experiment.task_context``.

  Returns:
    The :class:`~jaxlab.train.task.Task`, with its ``Inference`` where the task has one.

  Raises:
    InputError: an unknown task name, a factory of another signature, a missing optional extra
      (one line naming the ``pip install``), or the task's own checks of its config keys.
  """
  factory = TASKS.get(config.task)
  _check_signature(config.task, factory)
  try:
    return factory(config, ctx)
  except ModuleNotFoundError as e:  # a module the task imports when built (envpool, pyarrow)
    error = missing_extra_error(e, f"task {config.task!r}")
    if error is None:
      raise
    raise error from None
