"""Checkpoints with orbax: save every N steps and at the end, resume from the latest.

Orbax writes each step to a temporary directory and renames it when complete, so a run killed
mid-save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp


class Checkpointer:
  """Thin wrapper over ``ocp.CheckpointManager`` for one ``TrainState`` pytree."""

  def __init__(self, directory: str, save_every: int, max_to_keep: int = 2):
    if save_every <= 0:
      raise ValueError(f"checkpoint_every must be a positive number of steps, got {save_every}")
    self.save_every = save_every
    self._manager = ocp.CheckpointManager(
        os.path.abspath(directory),
        options=ocp.CheckpointManagerOptions(save_interval_steps=save_every, max_to_keep=max_to_keep,
                                             create=True))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def restore(self, abstract_state: Any, step: int | None = None) -> Any:
    """Restores onto the shardings carried by ``abstract_state`` (``ShapeDtypeStruct``s)."""
    step = self._manager.latest_step() if step is None else step
    return self._manager.restore(step, args=ocp.args.StandardRestore(abstract_state))

  def maybe_save(self, step: int, state: Any, final: bool = False) -> bool:
    """Saves at multiples of ``save_every`` and when ``final``; returns whether it saved."""
    if not (final or step % self.save_every == 0) or step == self._manager.latest_step():
      return False
    return self._manager.save(step, args=ocp.args.StandardSave(state), force=True)

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def abstract_like(tree: Any, shardings: Any) -> Any:
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)
