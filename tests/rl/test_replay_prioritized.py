"""Prioritised sampling of both replays: exactly the valid transitions carry a priority, new ones
the largest recorded, draws match the stored steps, and the uniform path is unchanged."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.rl import priorities
from jaxlab.rl.replay import TimeStep, make_replay
from jaxlab.rl.replay_frames import FrameStep, make_frame_replay

from tests.support.replay_frames import S, check_against_reference
from tests.support.replay_frames import fill as frame_fill


def _steps(replay, t, done=False):
  """Step t of every env; obs encodes (env, t) as ``t + 1000 env``."""
  e = np.arange(replay.num_envs)
  return TimeStep(jnp.asarray(t + 1000 * e, jnp.float32)[:, None], jnp.asarray(e, jnp.int32),
                  jnp.ones((replay.num_envs,), jnp.float32), jnp.ones((replay.num_envs,), jnp.float32),
                  jnp.full((replay.num_envs,), done) if replay.horizon > 1 else None)


@functools.cache
def _jitted_add(replay):
  return jax.jit(replay.add)


def _filled(replay, steps):
  example = jax.tree.map(lambda x: x[0], _steps(replay, 0))
  state, add = replay.init(example), _jitted_add(replay)
  for t in range(steps):
    state = add(state, _steps(replay, t))
  return state


@pytest.mark.parametrize("horizon,steps", [(1, 23), (3, 9), (3, 23)])  # before and after the ring wraps
def test_transition_replay_prioritises_exactly_the_complete_transitions(horizon, steps):
  replay = make_replay(20, 2, 8, min_size=4, horizon=horizon, prioritized=True)  # 10 slots per env
  state = _filled(replay, steps)
  t = replay.slots_per_env
  held = min(steps, t)
  oldest = steps % t if steps >= t else 0
  complete = {e * t + (oldest + u) % t for e in range(2) for u in range(held - horizon)}
  values = np.asarray(state.priorities.levels[0])
  assert set(np.flatnonzero(values).tolist()) == complete
  assert int(replay.num_transitions(state)) == len(complete)
  np.testing.assert_array_equal(values[sorted(complete)], 1.0)  # Dopamine's first max priority

  batch = replay.sample_transitions(state, jax.random.key(3), 0.5)
  obs, nxt = np.asarray(batch.obs[:, 0]), np.asarray(batch.next_obs[:, 0])
  env, step = np.divmod(obs.astype(int), 1000)
  np.testing.assert_array_equal(np.asarray(batch.index), env * t + step % t)
  np.testing.assert_array_equal(nxt, obs + horizon)  # horizon steps on, same env
  np.testing.assert_allclose(batch.reward, sum(0.5 ** k for k in range(horizon)))  # rewards of 1
  np.testing.assert_allclose(batch.importance, 1.0, rtol=1e-6)  # equal priorities: equal weights
  assert (batch.weight is None) == (horizon == 1)

  # After the update the drawn slots hold sqrt(loss + 1e-10); the next new transition enters at the maximum.
  losses = jnp.arange(8, dtype=jnp.float32)
  state = replay.update_priorities(state, batch.index, losses)
  got = priorities.get(state.priorities, batch.index)
  last = {int(i): float(np.sqrt(l + 1e-10)) for i, l in zip(np.asarray(batch.index), np.asarray(losses))}
  np.testing.assert_allclose(got, [last[int(i)] for i in np.asarray(batch.index)], rtol=1e-6)
  state = replay.add(state, _steps(replay, steps))
  newest = [e * t + (steps - horizon) % t for e in range(2)]
  np.testing.assert_allclose(priorities.get(state.priorities, jnp.asarray(newest)), np.sqrt(7 + 1e-10), rtol=1e-6)


@pytest.mark.parametrize("horizon", [1, 3])
def test_uniform_sample_transitions_is_the_old_sampling_bit_for_bit(horizon):
  replay = make_replay(20, 2, 8, min_size=4, horizon=horizon)
  state = _filled(replay, 13)
  key = jax.random.key(5)
  got = replay.sample_transitions(state, key, 0.9)
  if horizon == 1:
    want = replay.sample(state, key)
  else:
    from jaxlab.rl.replay import n_step_transitions
    want = n_step_transitions(replay.sample_sequences(state, key), 0.9)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_array_equal(a, b)
  assert got.importance is None and got.index is None


def _valid_slots(replay, state):
  """The slots the uniform sampler may return as valid (module docstring of replay_frames)."""
  t = replay.slots_per_env
  first = np.asarray(state.experience.first)
  oldest = int(state.index) if bool(state.full) else 0
  lowest, count = (int(x) for x in replay._candidates(state))
  return {e * t + (oldest + u) % t for e in range(replay.num_envs) for u in range(lowest, lowest + count)
          if not first[e, (oldest + u + 1) % t]}


@pytest.mark.parametrize("steps", [7, 31])  # not full; wrapped several times
def test_frame_replay_prioritises_exactly_the_valid_transitions(steps):
  replay = make_frame_replay(24, 2, 16, min_size=4, frame_shape=(2, 3), stack_size=S, prioritized=True)
  firsts = [t % 5 == 0 for t in range(steps)]  # an episode every 5 steps
  state = frame_fill(replay, firsts)
  values = np.asarray(state.priorities.levels[0])
  assert set(np.flatnonzero(values).tolist()) == _valid_slots(replay, state)

  batch = replay.sample(state, jax.random.key(1))
  np.testing.assert_array_equal(batch.weight, 1.0)
  check_against_reference(replay, state, batch, steps)  # stacks, no boundary crossed
  env, step = np.divmod(np.asarray(batch.action), 1000)
  np.testing.assert_array_equal(batch.index, env * replay.slots_per_env + step % replay.slots_per_env)
  np.testing.assert_allclose(batch.importance, 1.0, rtol=1e-6)

  state = replay.update_priorities(state, batch.index, jnp.full((16,), 8.0))
  changed = np.flatnonzero(np.asarray(state.priorities.levels[0]) != values)
  assert set(changed.tolist()) == set(np.asarray(batch.index).tolist())
  np.testing.assert_allclose(priorities.get(state.priorities, batch.index), np.sqrt(8.0), rtol=1e-6)


def test_frame_replay_draws_in_proportion_and_weights_by_probability():
  replay = make_frame_replay(40, 1, 32, min_size=4, frame_shape=(2, 3), stack_size=S, prioritized=True)
  state = frame_fill(replay, [False] * 10)  # slots 0..8 valid
  state = replay.update_priorities(state, jnp.asarray([2]), jnp.asarray([99.0]))  # priority 10 against 1s
  batch = replay.sample(state, jax.random.key(0))
  index = np.asarray(batch.index)
  assert np.mean(index == 2) > 0.35  # P(2) = 9.95 / 17.95
  top = np.sqrt(np.float32(99.0))
  probs = np.where(index == 2, top, 1.0) / (8.0 + top)
  w = 1 / np.sqrt(probs + 1e-10)
  np.testing.assert_allclose(batch.importance, w / w.max(), rtol=1e-5)


def test_uniform_frame_replay_is_unchanged():
  replay = make_frame_replay(24, 2, 16, min_size=4, frame_shape=(2, 3), stack_size=S)
  state = frame_fill(replay, [t % 5 == 0 for t in range(12)])
  assert state.priorities is None
  batch = replay.sample(state, jax.random.key(1))
  assert batch.importance is None and batch.index is None
