"""Noisy Soft-MoE experts against Dopamine's definition (``ExpertModel(noisy=True)``, google/dopamine @ 5873f54):
a ``NoisyNetwork`` first layer initialised uniform on +-1/sqrt(d) with sigma 0.1/sqrt(d), one noise draw
that every expert and slot shares, and gradients through the Soft-MoE kernel to the means and scales."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.moe import experts as experts_lib
from jaxlab.moe.modules import SoftMoE
from tests.support.moe import soft_moe_tol
from tests.support.tolerances import assert_close_to_scale, ops_rtol


def test_init_is_dopamines_noisy_network_per_expert():
  """NoisyNetwork's mu_init / sigma_init (dopamine/jax/networks.py:496-504) with fan-in d, independent
  per expert (nn.vmap with split params rngs); the second layer Glorot as a plain expert's."""
  n, d, h = 4, 64, 512
  p = jax.device_get(jax.jit(experts_lib.init_noisy_experts, static_argnums=(1, 2, 3))(jax.random.key(0), n, d, h))
  bound = 1 / np.sqrt(d)
  for key, shape in (("w1", (n, d, h)), ("b1", (n, h))):
    w = np.asarray(p[key], np.float64)
    assert w.shape == shape and np.abs(w).max() <= bound
    # U[-b, b]: mean 0, variance b^2 / 3; with N samples the sample variance's relative standard
    # deviation is sqrt(4 / (5 N)) (the uniform's excess kurtosis -6/5): 6 of them is a bound no fair draw
    # crosses, and a Glorot or normal draw (variance 2 / (d + h) or 1 / d) misses by far more.
    rel_sd = np.sqrt(0.8 / w.size)
    assert abs(w.var() / (bound ** 2 / 3) - 1) < 6 * rel_sd and abs(w.mean()) < 6 * bound / np.sqrt(3 * w.size)
    # fair quartiles of a uniform: a quarter of the mass in each quarter of [-b, b]
    quarters = np.histogram(w, bins=4, range=(-bound, bound))[0] / w.size
    np.testing.assert_allclose(quarters, 0.25, atol=6 * np.sqrt(0.25 * 0.75 / w.size))
  np.testing.assert_array_equal(p["w1_sigma"], np.full((n, d, h), np.float32(0.1 * bound)))
  np.testing.assert_array_equal(p["b1_sigma"], np.full((n, h), np.float32(0.1 * bound)))
  assert not np.array_equal(p["w1"][0], p["w1"][1])  # own parameters per expert
  assert p["w2"].shape == (n, h, d) and np.abs(p["w2"]).max() <= np.sqrt(6 / (h + d))  # Glorot per expert
  np.testing.assert_array_equal(p["b2"], 0)


def test_one_noise_draw_is_shared_by_every_expert():
  n, d, h = 3, 5, 7
  p = jax.device_get(experts_lib.init_noisy_experts(jax.random.key(1), n, d, h))
  rng = np.random.default_rng(0)
  f_p, f_q = rng.normal(size=(d, 1)).astype(np.float32), rng.normal(size=(1, h)).astype(np.float32)
  w = jax.device_get(jax.jit(experts_lib.noisy_expert_weights)(p, f_p, f_q))
  assert set(w) == {"w1", "b1", "w2", "b2"}
  for e in range(n):  # expert e: its own mu and sigma, the one f_p f_q^T (two products and a sum, rounded)
    for key, noise in (("w1", f_p @ f_q), ("b1", f_q[0])):
      mu, scaled = p[key][e].astype(np.float64), p[f"{key}_sigma"][e] * noise.astype(np.float64)
      assert np.all(np.abs(w[key][e] - (mu + scaled)) <= ops_rtol(3) * (np.abs(mu) + np.abs(scaled))), (key, e)
  means = experts_lib.noisy_expert_weights(p, None, None)
  np.testing.assert_array_equal(means["w1"], p["w1"])
  with pytest.raises(InputError, match="noisy expert params need"):
    experts_lib.noisy_expert_weights(experts_lib.init_experts(jax.random.key(0), n, d, h), None, None)


def _layer(noisy, impl):
  return SoftMoE(num_experts=4, expert_hidden=16, noisy_experts=noisy, impl=impl)


def test_kernel_gradients_reach_means_and_scales():
  """The CPU kernel's VJP gives w1's and b1's gradients; autodiff carries them to mu and sigma: equal
  to the einsum form's autodiff (the readable definition)."""
  x = jax.random.normal(jax.random.key(2), (2, 9, 8))
  params = jax.jit(_layer(True, "einsum").init)(jax.random.key(3), x)["params"]
  noise = (jax.random.normal(jax.random.key(4), (8, 1)), jax.random.normal(jax.random.key(5), (1, 16)))

  def loss(params, impl):
    y, _ = _layer(True, impl).apply({"params": params}, x, expert_noise=noise)
    return jnp.sum(jnp.sin(y))

  grad = jax.jit(jax.grad(loss), static_argnums=1)
  g_kernel, g_einsum = (jax.device_get(grad(params, impl)["experts"]) for impl in ("cpu_kernel", "einsum"))
  assert all(float(np.abs(g).max()) > 0 for g in g_einsum.values())
  # 4x the layer's rounding bound for gradients, as the kernel-vs-einsum test of tests/moe/test_softmoe.py
  plain = {"router": params["router"], "experts": experts_lib.noisy_expert_weights(params["experts"], *noise)}
  assert_close_to_scale(g_kernel, g_einsum, 4 * soft_moe_tol(plain, x))
  # sigma's gradient is mu's times the noise that multiplied it
  np.testing.assert_allclose(g_einsum["w1_sigma"], g_einsum["w1"] * np.asarray(noise[0] * noise[1])[None],
                             atol=ops_rtol(2) * float(np.abs(g_einsum["w1_sigma"]).max()))


def test_off_is_the_plain_layer_and_noise_needs_the_option():
  x = jax.random.normal(jax.random.key(6), (2, 9, 8))
  plain = _layer(False, "auto")
  params = jax.jit(plain.init)(jax.random.key(7), x)["params"]
  assert set(params["experts"]) == {"w1", "b1", "w2", "b2"}
  with pytest.raises(InputError, match="expert_noise but noisy_experts=False"):
    plain.apply({"params": params}, x, expert_noise=(jnp.ones((8, 1)), jnp.ones((1, 16))))
  noisy = jax.jit(_layer(True, "auto").init)(jax.random.key(7), x)["params"]
  assert set(noisy["experts"]) == {"w1", "b1", "w2", "b2", "w1_sigma", "b1_sigma"}
  # without noise the noisy layer is the plain layer of its means (the same program: bit-equal)
  means = {"router": noisy["router"], "experts": {k: noisy["experts"][k] for k in ("w1", "b1", "w2", "b2")}}
  np.testing.assert_array_equal(jax.jit(lambda p: _layer(True, "auto").apply({"params": p}, x)[0])(noisy),
                                jax.jit(lambda p: plain.apply({"params": p}, x)[0])(means))
