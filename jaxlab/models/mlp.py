"""Small supervised models used by the quickstart and the optimizer studies."""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class MLP(nn.Module):
  """ReLU MLP: ``[..., d_in] -> [..., num_outputs]`` (inputs are flattened past the batch axis).

  ``dtype``: the computation's dtype; None (default) follows the inputs and params, as flax's
  layers do (bfloat16 under the train step's ``compute_dtype="bfloat16"``, which casts both).
  """
  hidden: Sequence[int] = (64, 64)
  num_outputs: int = 10
  dtype: jnp.dtype | None = None

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = x.reshape(x.shape[0], -1)
    if self.dtype is not None:
      x = x.astype(self.dtype)
    for width in self.hidden:
      x = nn.relu(nn.Dense(width, dtype=self.dtype)(x))
    return nn.Dense(self.num_outputs, dtype=self.dtype)(x)


class SmallCNN(nn.Module):
  """Two 3x3 conv layers and a dense head for small images ``[B, H, W, C]``; ``dtype`` as :class:`MLP`'s."""
  features: Sequence[int] = (32, 64)
  hidden: int = 128
  num_outputs: int = 10
  dtype: jnp.dtype | None = None

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    if self.dtype is not None:
      x = x.astype(self.dtype)
    for f in self.features:
      x = nn.relu(nn.Conv(f, (3, 3), dtype=self.dtype)(x))
    x = x.reshape(x.shape[0], -1)
    x = nn.relu(nn.Dense(self.hidden, dtype=self.dtype)(x))
    return nn.Dense(self.num_outputs, dtype=self.dtype)(x)
