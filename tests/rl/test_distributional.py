"""C51's projection, target and loss, and n-step returns, against float64 references written from
the papers (Bellemare et al. 2017, Algorithm 1; the n-step return's definition)."""

import numpy as np
import pytest
import jax
import jax.numpy as jnp

from jaxlab.errors import InputError
from jaxlab.rl.distributional import c51_loss, c51_support, c51_target, n_step_returns, project_distribution


def _algorithm_1(tz, p, z):
  """Bellemare et al. 2017, Algorithm 1, in float64 loops: each atom's mass split by floor/ceil."""
  v_min, v_max, n = z[0], z[-1], len(z)
  dz = (v_max - v_min) / (n - 1)
  m = np.zeros(n)
  for tz_j, p_j in zip(np.clip(tz, v_min, v_max), p):
    b = (tz_j - v_min) / dz
    low, up = int(np.floor(b)), int(np.ceil(b))
    if low == up:   # on an atom: all of it there (Algorithm 1 as printed would drop it)
      m[low] += p_j
    else:
      m[low] += p_j * (up - b)
      m[up] += p_j * (b - low)
  return m


def test_support_is_dopamines_linspace():
  z = c51_support(51, 10.0)
  np.testing.assert_array_equal(z, jnp.linspace(-10.0, 10.0, 51))  # Dopamine's expression, bit for bit
  assert z[0] == -10 and z[-1] == 10 and abs(float(z[25])) < 1e-6
  np.testing.assert_allclose(c51_support(5, 3.0, vmin=-1.0), [-1, 0, 1, 2, 3])


@pytest.mark.parametrize("reward, discount", [(0.37, 0.99), (-3.2, 0.5), (25.0, 0.99), (0.0, 0.0), (1.0, 1.0)])
def test_projection_equals_algorithm_1(reward, discount):
  """Inside, beyond both ends (clipped), terminal (all mass on r) and on-atom shifts."""
  z = np.linspace(-10, 10, 51)
  p = np.random.default_rng(0).dirichlet(np.ones(51))
  tz = reward + discount * z
  ours = project_distribution(jnp.asarray(tz, jnp.float32), jnp.asarray(p, jnp.float32), jnp.asarray(z, jnp.float32))
  # float32 positions: each projected mass is a sum of <= 2 shares per atom of weights ~1/51, off by
  # the rounding of tz / dz (a few ulp of 10 / 0.4): well under 1e-5 of the total mass.
  np.testing.assert_allclose(np.asarray(ours, np.float64), _algorithm_1(tz, p, z), atol=1e-5)
  np.testing.assert_allclose(float(jnp.sum(ours)), 1.0, atol=1e-5)


def test_target_takes_the_greedy_action_and_the_double_dqn_selector():
  z = c51_support(11, 5.0)
  rng = np.random.default_rng(1)
  logits = jnp.asarray(rng.normal(size=(3, 4, 11)), jnp.float32)
  reward, discount = jnp.asarray([1.0, -0.5, 2.0]), jnp.asarray([0.9, 0.0, 0.81])
  probs = np.asarray(jax.nn.softmax(logits, axis=-1), np.float64)
  greedy = (probs * np.asarray(z, np.float64)).sum(-1).argmax(-1)
  expected = np.stack([_algorithm_1(float(reward[b]) + float(discount[b]) * np.asarray(z, np.float64),
                                    probs[b, greedy[b]], np.asarray(z, np.float64)) for b in range(3)])
  np.testing.assert_allclose(c51_target(logits, reward, discount, z), expected, atol=1e-5)
  # Another network's Q-values choose the action (Double DQN): action 3 for every row.
  selector = jnp.zeros((3, 4)).at[:, 3].set(1.0)
  chosen = np.stack([_algorithm_1(float(reward[b]) + float(discount[b]) * np.asarray(z, np.float64),
                                  probs[b, 3], np.asarray(z, np.float64)) for b in range(3)])
  np.testing.assert_allclose(c51_target(logits, reward, discount, z, next_q_selector=selector), chosen, atol=1e-5)


def test_loss_is_the_chosen_actions_cross_entropy_and_its_gradient_is_softmax_minus_target():
  rng = np.random.default_rng(2)
  logits = jnp.asarray(rng.normal(size=(2, 3, 7)), jnp.float32)
  actions = jnp.asarray([2, 0])
  target = jnp.asarray(rng.dirichlet(np.ones(7), size=2), jnp.float32)
  log_p = np.asarray(jax.nn.log_softmax(np.asarray(logits, np.float64), axis=-1))
  expected = -np.stack([(np.asarray(target[b], np.float64) * log_p[b, int(actions[b])]).sum() for b in range(2)])
  np.testing.assert_allclose(c51_loss(logits, actions, target), expected, rtol=1e-5)
  grad = jax.grad(lambda l: jnp.sum(c51_loss(l, actions, target)))(logits)
  softmax = np.asarray(jax.nn.softmax(logits, axis=-1))
  for b in range(2):
    a = int(actions[b])
    np.testing.assert_allclose(grad[b, a], softmax[b, a] - np.asarray(target[b]), atol=1e-6)
    assert np.all(np.delete(np.asarray(grad[b]), a, axis=0) == 0)  # other actions get nothing


def _n_step_reference(rewards, discounts, gamma):
  g, alive = 0.0, 1.0
  for k, (r, d) in enumerate(zip(rewards, discounts)):
    g += gamma ** k * alive * r
    alive *= d
  return g, gamma ** len(rewards) * alive


@pytest.mark.parametrize("discounts", [[1, 1, 1], [1, 0, 1], [0, 1, 1], [1, 1, 0]])
def test_n_step_returns_truncate_at_the_episodes_end(discounts):
  rewards = [0.5, -1.0, 2.0]
  g, gamma_n = n_step_returns(jnp.asarray([rewards]), jnp.asarray([discounts]), 0.99)
  ref_g, ref_gamma = _n_step_reference(rewards, discounts, 0.99)
  np.testing.assert_allclose(float(g[0]), ref_g, rtol=1e-6)
  np.testing.assert_allclose(float(gamma_n[0]), ref_gamma, rtol=1e-6)


def test_one_step_is_the_dqn_target():
  g, gamma_n = n_step_returns(jnp.asarray([[1.5], [2.0]]), jnp.asarray([[1.0], [0.0]]), 0.9)
  np.testing.assert_allclose(g, [1.5, 2.0])
  np.testing.assert_allclose(gamma_n, [0.9, 0.0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_atoms=1, vmax=10.0), r"num_atoms=1; must be an int >= 2"),
    (dict(num_atoms=51, vmax=-1.0), r"vmin=1.0 must be below vmax=-1.0"),
    (dict(num_atoms=51, vmax=float("nan")), r"vmax"),
])
def test_bad_supports_are_one_line(kwargs, match):
  with pytest.raises(InputError, match=match):
    c51_support(**kwargs)
