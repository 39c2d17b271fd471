"""Learning-rate schedules by name; ``jaxlab.optim.config`` passes the result as the learning rate."""

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
