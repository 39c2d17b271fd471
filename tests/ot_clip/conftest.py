"""Shared fixtures for the OT-CLIP tests."""

import jax
import pytest


@pytest.fixture
def pair(rng):
  """Paired [16, 8] image/text embeddings: texts are noisy copies of the images."""
  kx, ky = jax.random.split(rng)
  x = jax.random.normal(kx, (16, 8))
  return x, x + 0.8 * jax.random.normal(ky, (16, 8))
