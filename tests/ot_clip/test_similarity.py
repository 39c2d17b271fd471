"""Similarity, cost and the bad-input errors every OT-CLIP entry point relies on."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.ot_clip import similarity
from tests.support.tolerances import ops_rtol


def test_similarity_is_cosine_and_cost_is_one_minus_it(rng):
  kx, ky = jax.random.split(rng)
  x, y = jax.random.normal(kx, (5, 3)), jax.random.normal(ky, (5, 3))
  xn = np.asarray(x) / np.linalg.norm(x, axis=1, keepdims=True)
  yn = np.asarray(y) / np.linalg.norm(y, axis=1, keepdims=True)
  # |cos| <= 1 from two 3-term norms and a 3-term dot (float32) against float64.
  np.testing.assert_allclose(similarity.similarity(x, y), xn @ yn.T, atol=ops_rtol(3 + 3 + 3 + 4))
  np.testing.assert_allclose(similarity.cosine_cost(x, y), 1 - xn @ yn.T, atol=ops_rtol(3 + 3 + 3 + 5))


def test_zero_row_normalises_to_zero_not_nan():
  out = similarity.l2_normalize(jnp.zeros((2, 3)))
  assert np.all(np.isfinite(out)) and np.all(out == 0)


@pytest.mark.parametrize("shape_y", [(4, 3), (5, 2)])
def test_mismatched_embeddings_error_names_both_shapes(shape_y):
  with pytest.raises(ValueError) as e:
    similarity.similarity(jnp.ones((5, 3)), jnp.ones(shape_y))
  assert "(5, 3)" in str(e.value) and str(shape_y) in str(e.value)


def test_different_batch_allowed_when_not_paired():
  assert similarity.similarity(jnp.ones((5, 3)), jnp.ones((2, 3)), same_batch=False).shape == (5, 2)


@pytest.mark.parametrize("scale", [0.0, -1.0])
def test_non_positive_logit_scale_is_rejected(scale):
  with pytest.raises(ValueError, match="logit_scale"):
    similarity.epsilon_from_logit_scale(scale)


def test_epsilon_is_inverse_logit_scale():
  np.testing.assert_allclose(similarity.epsilon_from_logit_scale(20.0), 0.05, rtol=ops_rtol(1))  # float32 1 / 20
