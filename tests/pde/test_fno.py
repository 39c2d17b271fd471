"""FNO-2D: shapes, mode truncation on both axes (negative frequencies kept on X), bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.fno import FNO2d, spectral_conv2d
from tests.support.tolerances import ops_rtol


def _wave(n, kx, ky):
  i = np.arange(n)
  return np.cos(2 * np.pi * (kx * i[:, None] + ky * i[None, :]) / n).astype(np.float32)


def test_spectral_conv_with_identity_weights_is_a_low_pass_keeping_negative_x_frequencies():
  n, m, c = 16, 3, 2
  eye = np.zeros((2, m, m, c, c), np.float32)
  eye[0] = np.eye(c)
  conv = jax.jit(lambda v: spectral_conv2d(v, jnp.asarray(eye), jnp.asarray(eye)))
  # rows [:m] hold kx = 0..m-1 and rows [-m:] kx = -m..-1; a wave with ky >= 1 is stored once (at (kx, ky))
  cases = [(1, 2, True), (-2, 1, True), (-3, 1, True), (-1, 0, True), (3, 1, False), (-4, 1, False), (1, 3, False)]
  for kx, ky, kept in cases:
    v = np.stack([_wave(n, kx, ky)] * c, axis=-1)[None]
    out = np.asarray(conv(jnp.asarray(v)))
    # A 16 x 16 FFT there and back (log2(256) = 8 rounding stages each way, normwise: Higham
    # Sec. 24.1) on a unit wave: the bound is relative to the wave's 2-norm, sqrt(256) = 16.
    np.testing.assert_allclose(out, v if kept else 0 * v, atol=ops_rtol(2 * 8 + 2) * 16, err_msg=f"k=({kx},{ky})")


def test_fno_maps_dpot_layout_and_raises_input_error():
  model = FNO2d(modes=4, width=8, in_channels=3, out_channels=3, in_timesteps=5, out_timesteps=2, n_layers=2)
  x = jnp.ones((2, 16, 16, 5, 3))
  params = jax.jit(model.init)(jax.random.key(0), x)
  y = jax.jit(model.apply)(params, x)
  assert y.shape == (2, 16, 16, 2, 3) and bool(jnp.all(jnp.isfinite(y)))
  assert params["params"]["spectral_0"]["w_pos"].shape == (2, 4, 4, 8, 8)
  with pytest.raises(InputError, match="input has 4 channels; the model has in_channels=3"):
    jax.eval_shape(model.init, jax.random.key(0), jnp.ones((2, 16, 16, 5, 4)))
  with pytest.raises(InputError, match="modes=4 needs X >= 2\\*modes"):
    jax.eval_shape(model.init, jax.random.key(0), jnp.ones((2, 6, 16, 5, 3)))
