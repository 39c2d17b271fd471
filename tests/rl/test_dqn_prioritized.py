"""Prioritised replay in the TD loss: importance weights and per-sample losses (scalar and C51)
against a float64 reference of Dopamine's scheme (full_rainbow_agent.py:149-191, 376-422 @ 5873f54)."""

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl import dqn, priorities
from jaxlab.train.step import PER_SAMPLE


def _linear_q(params, obs):
  return obs @ params["w"], {}


def _logits_fn(params, obs):
  return jnp.einsum("bf,fan->ban", obs, params["w"]), {}


def _batch(**fields):
  base = dict(obs=jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), action=jnp.array([0, 1, 2]),
              reward=jnp.array([1.0, -1.0, 0.5]), discount=jnp.array([1.0, 0.0, 1.0]),
              next_obs=jnp.array([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]))
  return SimpleNamespace(**{**base, **fields})


def _reference_per_sample(w_online, w_target, batch, gamma):
  obs, nxt = np.asarray(batch.obs, np.float64), np.asarray(batch.next_obs, np.float64)
  q = obs @ w_online
  target = np.asarray(batch.reward) + gamma * np.asarray(batch.discount) * (nxt @ w_target).max(axis=1)
  return (q[np.arange(3), np.asarray(batch.action)] - target) ** 2  # Dopamine's mse_loss


def test_importance_weights_scale_each_td_loss_and_the_per_sample_losses_are_unweighted():
  online = {"w": jnp.array([[1.0, 2.0, 0.0], [3.0, -1.0, 0.5]])}
  target = {"w": jnp.array([[0.5, 0.0, 1.0], [-1.0, 2.0, 0.0]])}
  probs = np.array([0.5, 0.1, 0.02])
  w = 1.0 / np.sqrt(probs + 1e-10)
  w /= w.max()
  batch = _batch(importance=priorities.importance_weights(jnp.asarray(probs, jnp.float32)))
  loss, metrics = dqn.td_loss(_linear_q, online, target, batch, gamma=0.9, loss="mse", per_sample=True)
  ell = _reference_per_sample(np.asarray(online["w"], np.float64), np.asarray(target["w"], np.float64), batch, 0.9)
  np.testing.assert_allclose(loss, np.mean(w * ell), rtol=1e-5)  # jnp.mean(loss_multipliers * loss)
  np.testing.assert_allclose(metrics[PER_SAMPLE]["td_loss"], ell, rtol=1e-5)
  # Dopamine's new priorities from them: sqrt(loss + 1e-10)
  np.testing.assert_allclose(priorities.loss_priorities(metrics[PER_SAMPLE]["td_loss"]), np.sqrt(ell + 1e-10),
                             rtol=1e-5)


def test_importance_and_a_mask_weight_together():
  zeros = {"w": jnp.zeros((2, 3))}
  batch = _batch(discount=jnp.zeros(3), importance=jnp.array([1.0, 0.5, 0.25]), weight=jnp.array([1.0, 1.0, 0.0]))
  loss, _ = dqn.td_loss(_linear_q, zeros, zeros, batch, gamma=0.9)
  np.testing.assert_allclose(loss, (1.0 * 1.0 + 0.5 * 1.0) / 2, rtol=1e-6)  # errors -r: 1, 1, (0.25 masked)


def test_unit_importance_and_per_sample_leave_the_loss_bit_for_bit():
  online = {"w": jnp.array([[1.0, 2.0, 0.0], [3.0, -1.0, 0.5]])}
  plain, m_plain = dqn.td_loss(_linear_q, online, online, _batch(), gamma=0.9)
  ones, m_ones = dqn.td_loss(_linear_q, online, online, _batch(importance=jnp.ones(3)), gamma=0.9, per_sample=True)
  assert float(plain) == float(ones) and PER_SAMPLE not in m_plain
  assert float(m_plain["q_mean"]) == float(m_ones["q_mean"])


def test_c51_per_sample_loss_is_the_cross_entropy_and_weighted_by_importance():
  support = jnp.array([-1.0, 1.0])
  w = jnp.array([[[0.0, np.log(3.0)], [0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [np.log(4.0), 0.0], [0.0, 0.0]]])
  batch = _batch(discount=jnp.zeros(3), reward=jnp.array([0.5, -1.0, 1.0]), importance=jnp.array([1.0, 0.5, 0.2]))
  loss, metrics = dqn.td_loss(_logits_fn, {"w": w}, {"w": w}, batch, gamma=0.9, support=support, per_sample=True)
  # Terminal targets on {-1, 1}: r = 0.5 -> (1/4, 3/4); -1 -> (1, 0); 1 -> (0, 1). Predictions:
  # row 0 action 0 p = (1/4, 3/4); row 1 action 1 p = (4/5, 1/5); row 2 action 2 (obs [1, 1]) p = (1/2, 1/2).
  ce = np.array([-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), -np.log(0.8), -np.log(0.5)])
  np.testing.assert_allclose(metrics[PER_SAMPLE]["td_loss"], ce, rtol=1e-5)
  np.testing.assert_allclose(loss, np.mean(np.array([1.0, 0.5, 0.2]) * ce), rtol=1e-5)


def test_importance_of_the_wrong_shape_is_one_line():
  zeros = {"w": jnp.zeros((2, 3))}
  with pytest.raises(InputError, match=r"batch.importance of shape \(3, 1\); must be \[batch\]"):
    dqn.td_loss(_linear_q, zeros, zeros, _batch(importance=jnp.ones((3, 1))), gamma=0.9)
