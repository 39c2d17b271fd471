"""Batched MinAtar environments: shapes, auto-reset, episode bookkeeping, sticky actions, limits."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.envs import ENV_IDS, FREEWAY_TIME_LIMIT, make_env

CHANNELS = {"asterix": 4, "breakout": 4, "freeway": 7, "seaquest": 10, "space_invaders": 6}


def _rollout(env, n: int, steps: int, actions_fn, seed: int = 0):
  """Jitted scan of `steps` steps; returns final state and per-step (obs, reward, done, info)."""
  def run(rng):
    k_reset, k_steps = jax.random.split(rng)
    state, obs = env.reset(k_reset, n)

    def body(state, xs):
      t, key = xs
      state, obs, reward, done, info = env.step(state, actions_fn(t, n), key)
      return state, (obs, reward, done, info, state.stats)
    return jax.lax.scan(body, state, (jnp.arange(steps), jax.random.split(k_steps, steps)))
  return jax.jit(run)(jax.random.key(seed))


# Each game compiles for 5-10 s; Freeway's shapes are also checked by its time-limit test.
@pytest.mark.parametrize("name", [n if n in ("breakout", "space_invaders")
                                  else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(ENV_IDS)])
def test_reset_and_step_shapes_and_dtypes(name):
  env = make_env(name)
  assert env.num_actions == 6 and env.obs_shape == (10, 10, CHANNELS[name])
  state, obs = jax.jit(env.reset, static_argnums=1)(jax.random.key(0), 3)
  chex.assert_shape(obs, (3, 10, 10, CHANNELS[name]))
  assert obs.dtype == jnp.bool_ and bool(obs.any())
  state, obs2, reward, done, info = jax.jit(env.step)(state, jnp.array([0, 1, 5]),
                                                      jax.random.key(1))
  chex.assert_shape(obs2, obs.shape)
  assert obs2.dtype == jnp.bool_
  chex.assert_shape([reward, done, info["terminated"], info["truncated"], info["discount"]], (3,))
  assert reward.dtype == jnp.float32 and done.dtype == jnp.bool_
  assert info["discount"].dtype == jnp.float32
  chex.assert_tree_shape_prefix(state, (3,))
  assert state.last_action.dtype == jnp.int32


def test_unknown_env_name_lists_valid_names():
  with pytest.raises(InputError, match="unknown MinAtar environment 'pong'; valid: asterix, "
                     "breakout, freeway, seaquest, space_invaders"):
    make_env("pong")


@pytest.mark.parametrize("kwargs", [dict(sticky_action_prob=1.0), dict(max_episode_steps=0)])
def test_bad_options_raise(kwargs):
  with pytest.raises(InputError):
    make_env("breakout", **kwargs)


def test_auto_reset_and_episode_bookkeeping():
  """Breakout with a fixed paddle: short episodes whose returns we re-add from the trace."""
  env = make_env("breakout", sticky_action_prob=0.0)
  n, steps = 4, 300
  final, (obs, reward, done, info, stats) = _rollout(
      env, n, steps, lambda t, n: jnp.zeros([n], jnp.int32))
  reward, done, obs = np.asarray(reward), np.asarray(done), np.asarray(obs)
  assert done.sum(0).min() >= 2, "every env should finish several episodes in 300 steps"
  assert not np.asarray(info["truncated"]).any()  # no time limit by default
  np.testing.assert_array_equal(np.asarray(info["terminated"]), done)
  np.testing.assert_array_equal(np.asarray(info["discount"]), 1.0 - done)
  for e in range(n):
    ends = np.flatnonzero(done[:, e])
    starts = np.r_[0, ends[:-1] + 1]
    returns = [reward[a:b + 1, e].sum() for a, b in zip(starts, ends)]
    lengths = np.diff(np.r_[-1, ends])
    np.testing.assert_allclose(np.asarray(stats.last_return)[ends, e], returns)
    np.testing.assert_array_equal(np.asarray(stats.last_length)[ends, e], lengths)
    np.testing.assert_array_equal(np.asarray(stats.completed)[ends, e], np.arange(1, len(ends) + 1))
    # After a done the running counters restart and the observation is a fresh board:
    # all 30 bricks in rows 1-3 (channel 3) and the paddle back at column 4.
    assert (np.asarray(stats.episode_return)[ends, e] == 0).all()
    assert (np.asarray(stats.episode_length)[ends, e] == 0).all()
    assert obs[ends, e][..., 1:4, :, 3].all() and obs[ends, e][..., 3].sum(axis=(1, 2)).max() == 30
    assert obs[ends, e][:, 9, 4, 0].all()
  assert int(final.stats.completed.sum()) == done.sum()


def test_episode_return_running_sum_between_dones():
  env = make_env("breakout", sticky_action_prob=0.0)
  final, (_, reward, done, _, stats) = _rollout(env, 2, 60, lambda t, n: jnp.full([n], 3))
  np.testing.assert_array_equal(final.last_action, 3)  # no sticky actions: executed as given
  reward, done = np.asarray(reward), np.asarray(done)
  running = np.zeros(2)
  for t in range(60):
    running = np.where(done[t], 0.0, running + reward[t])
    np.testing.assert_allclose(np.asarray(stats.episode_return)[t], running)


def test_freeway_time_limit_is_a_terminal_state():
  env = make_env("freeway", sticky_action_prob=0.0)
  _, (obs, _, done, info, stats) = _rollout(env, 1, FREEWAY_TIME_LIMIT + 5,
                                          lambda t, n: jnp.full([n], 2))
  chex.assert_shape(obs, (FREEWAY_TIME_LIMIT + 5, 1, 10, 10, 7))
  assert obs.dtype == jnp.bool_
  ends = np.flatnonzero(np.asarray(done)[:, 0])
  np.testing.assert_array_equal(ends, [FREEWAY_TIME_LIMIT - 1])
  assert bool(info["terminated"][FREEWAY_TIME_LIMIT - 1, 0])
  assert not bool(info["truncated"][FREEWAY_TIME_LIMIT - 1, 0])
  assert int(stats.last_length[FREEWAY_TIME_LIMIT - 1, 0]) == FREEWAY_TIME_LIMIT


def test_max_episode_steps_truncates_and_keeps_bootstrapping():
  # Breakout's ball needs 6 steps to fall from row 3 to the paddle row: a 3-step limit truncates.
  env = make_env("breakout", max_episode_steps=3)
  _, (_, _, done, info, stats) = _rollout(env, 2, 7, lambda t, n: jnp.zeros([n], jnp.int32))
  expected = np.zeros([7, 2], bool)
  expected[[2, 5]] = True
  np.testing.assert_array_equal(np.asarray(done), expected)
  np.testing.assert_array_equal(np.asarray(info["truncated"]), expected)
  assert not np.asarray(info["terminated"]).any()
  assert (np.asarray(info["discount"]) == 1.0).all()
  assert (np.asarray(stats.last_length)[[2, 5]] == 3).all()


def test_sticky_actions_repeat_the_previous_executed_action():
  prob = 0.5
  env = make_env("breakout", sticky_action_prob=prob)
  n = 1024
  step = jax.jit(env.step)
  state, _ = env.reset(jax.random.key(0), n)
  state = step(state, jnp.full([n], 3), jax.random.key(1))[0]
  first = np.asarray(state.last_action)  # 0 (the initial previous action) where repeated
  assert set(np.unique(first)) <= {0, 3}
  state = step(state, jnp.full([n], 1), jax.random.key(2))[0]
  second = np.asarray(state.last_action)
  repeated = second != 1
  np.testing.assert_array_equal(second[repeated], first[repeated])
  for executed in (first != 3, repeated):
    assert abs(executed.mean() - prob) < 0.06


def test_step_is_deterministic_given_rng():
  env = make_env("breakout")
  state, _ = env.reset(jax.random.key(0), 3)
  step = jax.jit(env.step)
  out1, out2 = (step(state, jnp.array([0, 1, 2]), jax.random.key(7)) for _ in range(2))
  chex.assert_trees_all_equal(out1, out2)  # one program run twice on one machine: bit-equal


def test_state_can_be_donated():
  """No two leaves share a buffer, so a jitted step may donate the whole state."""
  env = make_env("breakout")
  state, _ = env.reset(jax.random.key(0), 2)
  step = jax.jit(env.step, donate_argnums=0)
  state = step(state, jnp.zeros([2], jnp.int32), jax.random.key(1))[0]
  step(state, jnp.zeros([2], jnp.int32), jax.random.key(2))
