"""AFNO2D: the flax and haiku layers run the same pure function; it matches a float64 NumPy
re-statement of the official forward pass; only non-negative X frequencies below ``modes`` are mixed."""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import erf

from jaxlab.errors import InputError
from jaxlab.pde.afno import AFNO2D, afno2d
from jaxlab.pde.afno_haiku import HkAFNO2D
from tests.support.tolerances import ops_rtol


def _numpy_afno(x, w1, b1, w2, b2, modes):
  """The official AFNO2D forward (channels-last, float64), written with explicit real/imag einsums."""
  gelu = lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2)))
  b, h, w, d = x.shape
  nb = w1.shape[1]
  spec = np.fft.rfft2(x, axes=(1, 2), norm="ortho").reshape(b, h, w // 2 + 1, nb, d // nb)
  k = spec[:, :modes, :modes]
  ein = lambda a, m: np.einsum("...bi,bio->...bo", a, m)
  o1r = gelu(ein(k.real, w1[0]) - ein(k.imag, w1[1]) + b1[0])
  o1i = gelu(ein(k.imag, w1[0]) + ein(k.real, w1[1]) + b1[1])
  o2 = np.zeros(spec.shape, np.complex128)
  o2[:, :modes, :modes] = (ein(o1r, w2[0]) - ein(o1i, w2[1]) + b2[0]) + 1j * (ein(o1i, w2[0]) + ein(o1r, w2[1]) + b2[1])
  return np.fft.irfft2(o2.reshape(b, h, w // 2 + 1, d), s=(h, w), axes=(1, 2), norm="ortho") + x


@pytest.fixture(scope="module")
def layer_and_params():
  layer = AFNO2D(width=16, n_blocks=2, modes=3)
  x = jax.random.normal(jax.random.key(0), (2, 8, 8, 16))
  params = jax.jit(layer.init)(jax.random.key(1), x)["params"]
  # scale up the (tiny) official init so the spectral branch matters
  params = jax.tree.map(lambda p: 40 * p - 0.5 * jnp.mean(40 * p), params)
  return layer, params, x


@pytest.mark.parametrize("modes", [3, 5, 100])
def test_matches_numpy_reference(layer_and_params, modes):
  _, p, x = layer_and_params
  ours = jax.jit(lambda x: afno2d(x, p["w1"], p["b1"], p["w2"], p["b2"], modes=modes))(x)
  ref = _numpy_afno(np.asarray(x, np.float64), *(np.asarray(p[k], np.float64) for k in ("w1", "b1", "w2", "b2")),
                    modes)
  assert np.max(np.abs(ours - ref)) / np.max(np.abs(ref)) < 1e-5
  assert np.max(np.abs(ref - np.asarray(x))) > 0.1   # the spectral branch is not negligible


def test_flax_and_haiku_layers_agree(layer_and_params):
  layer, p, x = layer_and_params
  hk_layer = hk.without_apply_rng(hk.transform(lambda v: HkAFNO2D(width=16, n_blocks=2, modes=3, name="afno")(v)))
  hk_params = hk_layer.init(jax.random.key(1), x)
  assert jax.tree.map(jnp.shape, hk_params["afno"]) == jax.tree.map(jnp.shape, p)
  # Both wrappers run the same primitives on the same arrays op by op: bit-equal by construction.
  np.testing.assert_array_equal(hk_layer.apply({"afno": p}, x), layer.apply({"params": p}, x))
  # both inits draw scale * U[0, 1) with scale = 1 / block^2
  assert 0 <= float(jnp.min(hk_params["afno"]["w1"])) and float(jnp.max(hk_params["afno"]["w1"])) < 1 / 64


def test_negative_x_frequencies_and_high_modes_bypass_the_mixer(layer_and_params):
  """AFNO(x) - x depends only on rfft2(x)[:modes, :modes]: adding a wave outside that corner
  (negative kx, or kx/ky >= modes) leaves it unchanged; a wave inside changes it."""
  _, p, x = layer_and_params
  mix = jax.jit(lambda v: afno2d(v, p["w1"], p["b1"], p["w2"], p["b2"], modes=3) - v)
  i = np.arange(8)
  wave = lambda kx, ky: jnp.asarray(np.cos(2 * np.pi * (kx * i[:, None] + ky * i[None, :]) / 8), jnp.float32)[
      None, :, :, None]
  base = mix(x)
  for kx, ky in [(-1, 1), (-2, 2), (3, 1), (1, 3)]:
    # Unchanged up to rounding: 8 x 8 FFTs there and back (bounded as 64-term sums) and the
    # block MLP's 16-term dots, at the scale of the input.
    scale = float(jnp.abs(x + wave(kx, ky)).max())
    np.testing.assert_allclose(mix(x + wave(kx, ky)), base, atol=ops_rtol(2 * 64 + 2 * 16) * scale,
                               err_msg=f"k=({kx},{ky})")
  assert float(jnp.max(jnp.abs(mix(x + wave(1, 1)) - base))) > 1e-2


def test_wrong_width_is_an_input_error(layer_and_params):
  layer, p, _ = layer_and_params
  with pytest.raises(InputError, match="AFNO2D input has 12 channels, expected width=16"):
    layer.apply({"params": p}, jnp.ones((1, 8, 8, 12)))
