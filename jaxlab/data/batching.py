"""Deterministic, stateless batching: the batch is a pure function of (seed, step).

A resumed run therefore sees exactly the batches an uninterrupted run would, without saving
iterator state. Each process takes its own contiguous rows of the global batch.
"""

from __future__ import annotations

import jax
import numpy as np


def batch_indices(num_examples: int, global_batch_size: int, step: int, seed: int,
                  process_index: int | None = None, process_count: int | None = None) -> np.ndarray:
  """Indices of this process's rows of global batch ``step`` (reshuffled each epoch, no repeats within one)."""
  if global_batch_size > num_examples:
    raise ValueError(f"batch size {global_batch_size} exceeds the {num_examples} training examples")
  process_index = jax.process_index() if process_index is None else process_index
  process_count = jax.process_count() if process_count is None else process_count
  per_epoch = num_examples // global_batch_size  # drop the ragged tail
  epoch, i = divmod(step, per_epoch)
  perm = np.random.default_rng([seed, epoch]).permutation(num_examples)
  rows = perm[i * global_batch_size:(i + 1) * global_batch_size]
  local = global_batch_size // process_count
  return rows[process_index * local:(process_index + 1) * local]
