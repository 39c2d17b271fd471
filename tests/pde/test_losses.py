"""The official relative-L2 loss (with and without mask), its gradient at zero error, and the denoising noise."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.losses import add_denoising_noise, make_loss_fn, relative_l2_loss
from tests.support.tolerances import ops_rtol


def _numpy_loss(pred, y, mask=None):
  b, c = pred.shape[0], pred.shape[-1]
  if mask is not None:
    pred, y = pred * mask, y * mask
    channels = np.count_nonzero(np.broadcast_to(mask, pred.shape).reshape(b, -1, c).sum(1), axis=-1)
  else:
    channels = np.full(b, c)
  diff = np.linalg.norm((pred - y).reshape(b, -1, c), axis=1)
  norm = np.linalg.norm(y.reshape(b, -1, c), axis=1) + 1e-8
  return np.sum(np.sum(diff / norm, axis=-1) / channels)


def test_matches_the_official_formula_with_and_without_mask():
  r = np.random.default_rng(0)
  pred, y = r.normal(size=(3, 8, 8, 2, 4)), r.normal(size=(3, 8, 8, 2, 4))
  mask = np.ones((3, 8, 8, 1, 4))
  mask[0, ..., 1] = 0       # sample 0 has 3 channels
  mask[2, :4] = 0           # sample 2 is half masked in space
  # Positive sums: 128-term squared norms, their roots and ratios, 4 channels, 3 samples (vs float64).
  tol = ops_rtol(128 + 4 + 4 + 3)
  np.testing.assert_allclose(relative_l2_loss(jnp.asarray(pred), jnp.asarray(y)), _numpy_loss(pred, y), rtol=tol)
  np.testing.assert_allclose(relative_l2_loss(jnp.asarray(pred), jnp.asarray(y), jnp.asarray(mask)),
                             _numpy_loss(pred, y, mask), rtol=tol)


def test_gradient_is_finite_at_zero_error_and_for_masked_channels():
  y = jax.random.normal(jax.random.key(0), (2, 4, 4, 1, 3))
  mask = jnp.ones((2, 4, 4, 1, 3)).at[..., 0].set(0)
  grad = jax.jit(jax.grad(relative_l2_loss))
  for m in (None, mask):
    g = grad(y, y, m)
    assert bool(jnp.all(jnp.isfinite(g)))


def test_shape_mismatch_is_an_input_error():
  with pytest.raises(InputError, match=r"pred shape \(1, 4, 4, 1, 2\) != target shape \(1, 4, 4, 2, 2\)"):
    relative_l2_loss(jnp.ones((1, 4, 4, 1, 2)), jnp.ones((1, 4, 4, 2, 2)))


def test_denoising_noise_scales_with_the_per_channel_norm():
  x = jnp.ones((2, 16, 16, 4, 2)).at[..., 1].multiply(10.0)
  noisy = add_denoising_noise(x, jax.random.key(0), 1e-2)
  std = jnp.std(noisy - x, axis=(1, 2, 3))          # expected 1e-2 * ||x|| = 1e-2 * sqrt(1024) * {1, 10}
  np.testing.assert_allclose(std, jnp.array([[0.32, 3.2], [0.32, 3.2]]), rtol=0.1)


def test_loss_fn_ignores_class_logits_and_applies_noise_only_when_asked():
  def apply_fn(variables, x):
    return x[..., :1, :] * variables["params"]["a"], jnp.zeros((x.shape[0], 3))
  batch = {"x": jnp.ones((2, 4, 4, 3, 2)), "y": 2 * jnp.ones((2, 4, 4, 1, 2))}
  loss, metrics = make_loss_fn(apply_fn)({"a": jnp.array(1.0)}, batch, jax.random.key(0), ())
  tol = ops_rtol(16 + 6)  # 16-term norms, a root each, a ratio, 2 samples
  np.testing.assert_allclose(loss, 2 * 0.5, rtol=tol)          # per sample ||x - 2|| / ||2|| = 0.5
  np.testing.assert_allclose(metrics["rel_l2_per_sample"], 0.5, rtol=tol)
  noisy, _ = make_loss_fn(apply_fn, noise_scale=0.1)({"a": jnp.array(1.0)}, batch, jax.random.key(0), ())
  assert abs(float(noisy) - 1.0) > 1e-3
