"""What the trainer needs from a method: init, loss, batches by step, evaluation."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import ml_collections

from jaxlab.registry import Registry
from jaxlab.train.state import TrainState
from jaxlab.train.step import LossFn


@dataclasses.dataclass(frozen=True)
class Task:
  """A method's plug into the one train step.

  Attributes:
    init_params: ``rng -> params``.
    loss_fn: ``(params, batch, rng, extra) -> (loss, metrics)`` on the global batch.
    global_batch_size: rows per step across all processes.
    host_batch: ``step -> this process's rows`` (numpy pytree); a pure function of ``step``
      so that resumed runs see the same data.
    evaluate: ``params -> {name: float}``, or None.
    init_extra / update_extra: extra train-state (e.g. target params) and its per-step update.
    description: one line for the summary table.
  """
  init_params: Callable[[jax.Array], Any]
  loss_fn: LossFn
  global_batch_size: int
  host_batch: Callable[[int], Any]
  evaluate: Callable[[Any], dict[str, float]] | None = None
  init_extra: Callable[[Any], Any] | None = None
  update_extra: Callable[[TrainState], Any] | None = None
  description: str = ""


TASKS: Registry = Registry("task")


def make_task(config: ml_collections.ConfigDict) -> Task:
  return TASKS.get(config.task)(config)
