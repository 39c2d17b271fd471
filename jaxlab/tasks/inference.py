"""What a trained run of a task is used for: its model and pure functions of its params.

Each task module builds one beside its ``Task`` from the same config (the same model, test data
and evaluation code the trainer used), and ``jaxlab.load_run`` binds it to a checkpoint's params.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping


@dataclasses.dataclass(frozen=True)
class Inference:
  """A task's model and what a user does with trained params.

  Attributes:
    model: the flax module the task trains (``model.apply({"params": params}, ...)``).
    fns: ``{name: fn(params, *args, **kwargs)}``, pure and jit-able in the arrays they take
      (e.g. ``predict``, ``rollout``, ``greedy_policy``, ``embed_images``, ``zero_shot``).
    data: fixed things the functions or a user need that are not params (the test split, the
      environment, the vocabulary), by name.
  """
  model: Any
  fns: Mapping[str, Callable[..., Any]]
  data: Mapping[str, Any] = dataclasses.field(default_factory=dict)
