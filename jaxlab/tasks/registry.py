"""The shipped tasks by name, and :func:`make_task`: a config's task, built once in its context.

The shipped tasks register here lazily (``"module:function"``, imported on first use), in the
trainer's one registry (``jaxlab.train.TASKS``), so that naming them imports no method package:
every ``@TASKS.register(name)`` factory of a module of ``jaxlab.tasks`` is found in its source
(:func:`shipped_tasks`). A config file or user code registers its own with the same decorator.
"""

from __future__ import annotations

import ast
import inspect
import os
from typing import Any, Callable

from jaxlab.errors import InputError
from jaxlab.registry import optional_imports
from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Task

def shipped_tasks() -> dict[str, str]:
  """``{task name: "module:function"}`` of every ``@TASKS.register(name)`` factory in this package's modules.

  Read from the modules' source (``ast``), not by importing them: a new task module registers its
  names by being here, and naming a task imports only its own module (and its method's extras).
  """
  out = {}
  folder = os.path.dirname(os.path.abspath(__file__))
  for file in sorted(f for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_")):
    with open(os.path.join(folder, file), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in tree.body:
      for decorator in getattr(node, "decorator_list", ()):
        call = decorator if isinstance(decorator, ast.Call) else None
        if (call is not None and isinstance(call.func, ast.Attribute) and call.func.attr == "register"
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "TASKS" and call.args
            and isinstance(call.args[0], ast.Constant)):
          out[call.args[0].value] = f"{__package__}.{file[:-3]}:{node.name}"
  return out


#: The shipped tasks: ``config.task`` -> the factory's ``"module:function"``, registered lazily.
SHIPPED = shipped_tasks()
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
  with optional_imports(f"task {config.task!r}"):  # a module the task imports when built (envpool, pyarrow)
    return factory(config, ctx)
