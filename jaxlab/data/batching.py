"""Deterministic, stateless batching: the batch is a pure function of (seed, step).

A resumed run therefore sees exactly the batches an uninterrupted run would, without saving
iterator state. The trainer asks for the rows of the global batch its devices hold.
"""

from __future__ import annotations

import numpy as np

from jaxlab.errors import InputError


def batch_indices(num_examples: int, global_batch_size: int, step: int, seed: int) -> np.ndarray:
  """Example indices of global batch ``step`` (reshuffled each epoch, no repeats within one)."""
  if global_batch_size > num_examples:
    raise InputError(f"batch_size {global_batch_size} exceeds the {num_examples} training examples")
  per_epoch = num_examples // global_batch_size  # drop the ragged tail
  epoch, i = divmod(step, per_epoch)
  perm = np.random.default_rng([seed, epoch]).permutation(num_examples)
  return perm[i * global_batch_size:(i + 1) * global_batch_size]
