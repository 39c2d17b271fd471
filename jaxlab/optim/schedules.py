"""Learning-rate schedules by name; the trainer passes the result as ``learning_rate``."""

from __future__ import annotations

from typing import Any

import optax

from jaxlab.registry import Registry

SCHEDULES: Registry = Registry("schedule")


@SCHEDULES.register("constant")
def constant(learning_rate: float, num_steps: int) -> Any:
  del num_steps
  return learning_rate


@SCHEDULES.register("cosine")
def cosine(learning_rate: float, num_steps: int, alpha: float = 0.0) -> optax.Schedule:
  return optax.cosine_decay_schedule(learning_rate, decay_steps=num_steps, alpha=alpha)


@SCHEDULES.register("warmup_cosine")
def warmup_cosine(learning_rate: float, num_steps: int, warmup_steps: int = 100,
                  end_value: float = 0.0) -> optax.Schedule:
  return optax.warmup_cosine_decay_schedule(0.0, learning_rate, min(warmup_steps, num_steps),
                                            num_steps, end_value=end_value)


def optimizer_from_config(opt_config: Any, num_steps: int) -> optax.GradientTransformation:
  """``{"name": ..., "learning_rate": ..., "schedule": "cosine", **kwargs}`` -> optax transform."""
  from jaxlab.optim.registry import make_optimizer
  kwargs = dict(opt_config)
  name = kwargs.pop("name")
  schedule = kwargs.pop("schedule", "constant")
  schedule_kwargs = dict(kwargs.pop("schedule_kwargs", {}) or {})
  if "learning_rate" in kwargs:
    if kwargs["learning_rate"] < 0:
      raise ValueError(f"optimizer.learning_rate must be >= 0, got {kwargs['learning_rate']}")
    kwargs["learning_rate"] = SCHEDULES.get(schedule)(kwargs["learning_rate"], num_steps, **schedule_kwargs)
  return make_optimizer(name, **kwargs)
