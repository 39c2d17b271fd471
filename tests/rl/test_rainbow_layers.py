"""Noisy linear layers and the dueling head against float64 references from their papers' equations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.rainbow_layers import NoisyDense, RainbowHead, dueling_logits


def _f(x):
  return np.sign(x) * np.sqrt(np.abs(x))


def test_noisy_dense_is_equations_8_to_11():
  """With chosen parameters the layer's output shows its noise: a zero input gives
  mu_b + sigma_b f(eps_q); unit inputs give a kernel noise that is exactly f(eps_p) f(eps_q)^T
  with the same f(eps_q) (factorised: one draw per input and one per output)."""
  p, q = 5, 4
  layer = NoisyDense(q)
  noise = {"noise": jax.random.key(7)}
  rng = np.random.default_rng(0)
  params = {"kernel_mu": rng.normal(size=(p, q)), "kernel_sigma": np.ones((p, q)),
            "bias_mu": rng.normal(size=q), "bias_sigma": np.ones(q)}
  run = lambda params, x: np.asarray(layer.apply({"params": jax.tree.map(jnp.float32, params)},
                                                 jnp.asarray(x, jnp.float32), rngs=noise), np.float64)
  f_q = run(params, np.zeros((1, p)))[0] - params["bias_mu"]
  kernel_noise = run(params, np.eye(p)) - params["kernel_mu"] - params["bias_mu"] - f_q   # [p, q]
  f_p = kernel_noise[:, 0] / f_q[0]
  np.testing.assert_allclose(kernel_noise, np.outer(f_p, f_q), rtol=1e-5, atol=1e-5)
  # f(x) = sgn(x) sqrt|x|: the draws behind f_p, f_q are f^-1 = sgn(y) y^2 -- standard normal-sized.
  assert np.all(np.abs(np.sign(f_p) * f_p ** 2) < 6) and np.all(np.abs(np.sign(f_q) * f_q ** 2) < 6)
  assert np.all(f_q != 0) and np.all(f_p != 0)
  # The plain equation with arbitrary parameters, given that noise:
  x = rng.normal(size=(3, p))
  params = {"kernel_mu": rng.normal(size=(p, q)), "kernel_sigma": rng.uniform(0, 1, (p, q)),
            "bias_mu": rng.normal(size=q), "bias_sigma": rng.uniform(0, 1, q)}
  expected = x @ (params["kernel_mu"] + params["kernel_sigma"] * np.outer(f_p, f_q)) + params["bias_mu"] \
      + params["bias_sigma"] * f_q
  np.testing.assert_allclose(run(params, x), expected, rtol=1e-4, atol=1e-4)
  # Deterministic: the means only.
  mean = NoisyDense(q, deterministic=True).apply({"params": jax.tree.map(jnp.float32, params)}, jnp.asarray(x, jnp.float32))
  np.testing.assert_allclose(mean, x @ params["kernel_mu"] + params["bias_mu"], rtol=1e-5, atol=1e-5)


def test_noisy_dense_initialisation_and_fresh_noise_per_key():
  x = jnp.ones((2, 16))
  variables = NoisyDense(8).init({"params": jax.random.key(0), "noise": jax.random.key(1)}, x)["params"]
  assert np.abs(variables["kernel_mu"]).max() <= 1 / 4 and np.abs(variables["kernel_mu"]).max() > 0.9 / 4
  np.testing.assert_allclose(variables["kernel_sigma"], 0.1 / 4)   # Dopamine's 0.1 / sqrt(fan_in)
  np.testing.assert_allclose(variables["bias_sigma"], 0.1 / 4)
  apply = lambda k: NoisyDense(8).apply({"params": variables}, x, rngs={"noise": jax.random.key(k)})
  np.testing.assert_array_equal(apply(3), apply(3))
  assert not np.allclose(apply(3), apply(4))


def test_dueling_logits_are_equation_9_per_atom():
  rng = np.random.default_rng(1)
  value, adv = rng.normal(size=(2, 3)), rng.normal(size=(2, 4, 3))
  expected = value[:, None, :] + adv - adv.mean(axis=1, keepdims=True)
  # float32 sums of 4 terms of size ~1: absolute error a few 1e-7.
  np.testing.assert_allclose(dueling_logits(jnp.asarray(value), jnp.asarray(adv)), expected, atol=2e-6)
  # The advantages' mean over actions is zero, so the mean logit per atom is the value.
  np.testing.assert_allclose(np.asarray(dueling_logits(jnp.asarray(value), jnp.asarray(adv))).mean(1), value, atol=1e-6)


@pytest.mark.parametrize("noisy, dueling, names", [
    (True, True, {"advantage", "value"}), (False, True, {"advantage", "value"}), (False, False, {"logits"}),
])
def test_rainbow_head_shapes_and_layers(noisy, dueling, names):
  head = RainbowHead(num_actions=6, num_atoms=51, noisy=noisy, dueling=dueling)
  x = jnp.ones((2, 32))
  variables = head.init({"params": jax.random.key(0), "noise": jax.random.key(1)}, x)
  assert set(variables["params"]) == names
  logits = head.apply(variables, x, rngs={"noise": jax.random.key(2)})
  assert logits.shape == (2, 6, 51)


def test_bad_head_settings_are_one_line():
  with pytest.raises(InputError, match=r"RainbowHead.num_atoms=0; must be an int >= 1"):
    RainbowHead(num_actions=4, num_atoms=0).init({"params": jax.random.key(0), "noise": jax.random.key(1)},
                                                  jnp.ones((1, 3)))
