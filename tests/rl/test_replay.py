"""Transition replay over flashbax: shapes, valid-slot sampling, wraparound, errors, checkpoints."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.replay import ReplayState, TimeStep, make_replay
from tests.support.tolerances import EPS32


def _step(t: int, num_envs: int) -> TimeStep:
  """Step t of every env; env e's action is 100 * e + t and its observation encodes it too."""
  code = 100 * jnp.arange(num_envs) + t
  obs = (code[:, None] >> jnp.arange(12)) & 1  # 12 bits of the code, as bool
  return TimeStep(obs=obs.astype(jnp.bool_), action=code.astype(jnp.int32),
                  reward=code.astype(jnp.float32) / 10, discount=jnp.ones([num_envs]))


def _decode(obs: jax.Array) -> np.ndarray:
  return (np.asarray(obs).astype(np.int64) << np.arange(12)).sum(-1)


def _many(replay, state, seed: int, batches: int):
  """``batches`` independent samples, concatenated (a batch may not exceed the capacity)."""
  keys = jax.random.split(jax.random.key(seed), batches)
  out = jax.jit(jax.vmap(replay.sample, (None, 0)))(state, keys)
  return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), out)


def _filled(replay, steps: int, start: int = 0):
  state = replay.init(jax.tree.map(lambda x: x[0], _step(0, replay.num_envs)))
  add = jax.jit(replay.add)
  for t in range(start, start + steps):
    state = add(state, _step(t, replay.num_envs))
  return state


def test_add_and_sample_shapes_and_dtypes():
  replay = make_replay(capacity=64, num_envs=4, batch_size=8)
  state = _filled(replay, 5)
  batch = jax.jit(replay.sample)(state, jax.random.key(0))
  chex.assert_shape([batch.obs, batch.next_obs], (8, 12))
  chex.assert_shape([batch.action, batch.reward, batch.discount], (8,))
  assert batch.obs.dtype == jnp.bool_ and batch.action.dtype == jnp.int32
  assert batch.reward.dtype == jnp.float32 and batch.discount.dtype == jnp.float32
  chex.assert_shape(state.experience.obs, (4, 16, 12))  # [num_envs, capacity // num_envs, ...]
  assert int(replay.num_transitions(state)) == 4 * 4


def test_samples_only_filled_slots_and_pairs_consecutive_steps_of_one_env():
  replay = make_replay(capacity=300, num_envs=3, batch_size=64)
  state = _filled(replay, 10)
  batch = _many(replay, state, 1, 8)
  action = np.asarray(batch.action)
  env, t = action // 100, action % 100
  assert set(t) == set(range(9))  # first elements t = 0..8 (t = 9 has no successor yet)
  assert set(env) == {0, 1, 2}
  np.testing.assert_array_equal(_decode(batch.obs), action)
  np.testing.assert_array_equal(_decode(batch.next_obs), action + 1)  # same env, next step
  np.testing.assert_allclose(batch.reward, action / 10, rtol=4 * EPS32)  # float32 a / 10 vs float64


def test_wraparound_at_capacity_keeps_the_newest_steps():
  replay = make_replay(capacity=10, num_envs=2, batch_size=8)  # 5 slots per env
  state = _filled(replay, 12)  # steps 7..11 survive
  assert bool(state.is_full) and int(replay.num_transitions(state)) == 2 * 4
  batch = _many(replay, state, 2, 32)
  assert set(np.asarray(batch.action) % 100) == {7, 8, 9, 10}
  np.testing.assert_array_equal(_decode(batch.next_obs), np.asarray(batch.action) + 1)


def test_sampling_is_uniform_over_transitions():
  replay = make_replay(capacity=40, num_envs=2, batch_size=32)
  state = _filled(replay, 25)  # 20 slots per env, steps 5..24: 19 transitions per env
  action = np.asarray(_many(replay, state, 4, 250).action)
  _, counts = np.unique(action, return_counts=True)
  assert len(counts) == 38
  assert counts.min() > 0.6 * 8000 / 38 and counts.max() < 1.4 * 8000 / 38


def test_sample_is_deterministic_given_rng():
  replay = make_replay(capacity=100, num_envs=2, batch_size=16)
  state = _filled(replay, 20)
  sample = jax.jit(replay.sample)
  chex.assert_trees_all_equal(sample(state, jax.random.key(5)), sample(state, jax.random.key(5)))
  assert not np.array_equal(sample(state, jax.random.key(5)).action,
                            sample(state, jax.random.key(6)).action)


def test_capacity_smaller_than_batch_is_an_input_error():
  with pytest.raises(InputError, match=r"batch_size=32 is larger than the replay's 9 transitions "
                     r"\(capacity=10, num_envs=1\)"):
    make_replay(capacity=10, num_envs=1, batch_size=32)
  with pytest.raises(InputError, match="capacity=3 with num_envs=2"):
    make_replay(capacity=3, num_envs=2, batch_size=1)
  with pytest.raises(InputError, match="min_size=500"):
    make_replay(capacity=100, num_envs=1, batch_size=8, min_size=500)


def test_sampling_too_early_is_an_input_error_when_concrete():
  replay = make_replay(capacity=100, num_envs=2, batch_size=8, min_size=10)
  state = _filled(replay, 5)  # 2 * 4 = 8 transitions
  assert not bool(replay.can_sample(state))
  with pytest.raises(InputError, match="the replay holds 8 transitions, sampling needs "
                     "min_size=10"):
    replay.sample(state, jax.random.key(0))
  state = _filled(replay, 6)
  assert bool(replay.can_sample(state))
  replay.sample(state, jax.random.key(0))


def test_add_and_sample_inside_scan_and_vmap_over_seeds():
  replay = make_replay(capacity=32, num_envs=2, batch_size=4)

  def run(rng):
    state = replay.init(jax.tree.map(lambda x: x[0], _step(0, 2)))

    def body(state, t):
      state = replay.add(state, _step(t, 2))
      return state, replay.sample(state, jax.random.fold_in(rng, t)).action
    return jax.lax.scan(body, state, jnp.arange(40))
  states, actions = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 3))
  chex.assert_shape(actions, (3, 40, 4))
  assert (np.asarray(states.current_index) == 40 % 16).all()
  late = np.asarray(actions)[:, -1] % 100  # after 40 steps, 16 slots: steps 24..39 held
  assert late.min() >= 24 and late.max() <= 38


def test_state_round_trips_through_orbax_bit_identically(tmp_path):
  replay = make_replay(capacity=64, num_envs=4, batch_size=8)
  state = _filled(replay, 21)
  assert isinstance(state, ReplayState)
  assert all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(state))
  ckpt = ocp.StandardCheckpointer()
  ckpt.save(tmp_path / "replay", state)
  ckpt.wait_until_finished()
  restored = ckpt.restore(tmp_path / "replay", jax.tree.map(ocp.utils.to_shape_dtype_struct, state))
  chex.assert_trees_all_equal(restored, state, strict=True)
  assert jax.tree.structure(restored) == jax.tree.structure(state)
  chex.assert_trees_all_equal(replay.sample(restored, jax.random.key(0)),
                              replay.sample(state, jax.random.key(0)))
