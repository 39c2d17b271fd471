"""The frame-stacking replay against a numpy reference: stacks, episode boundaries, the ring, memory."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.replay_frames import FrameStep, make_frame_replay

S = 4  # frames per stack


@functools.cache
def _jitted(replay):
  """``(add, sample)`` compiled once per replay layout (equal replays share them)."""
  return jax.jit(replay.add), jax.jit(replay.sample)


def _fill(replay, firsts):
  """Writes len(firsts) steps; frame value, action and reward of env e at step t encode (e, t)."""
  state = replay.init()
  add = _jitted(replay)[0]
  for t, first in enumerate(firsts):
    e = np.arange(replay.num_envs)
    frame = np.broadcast_to((1 + t + 100 * e)[:, None, None] % 256, (replay.num_envs, *replay.frame_shape))
    state = add(state, FrameStep(jnp.asarray(frame, jnp.uint8), jnp.asarray(t + 1000 * e, jnp.int32),
                                 jnp.full((replay.num_envs,), float(t), jnp.float32),
                                 jnp.ones((replay.num_envs,), jnp.float32), jnp.full((replay.num_envs,), first)))
  return state


def _reference_stack(frames, first, logical, k_logical):
  """The stack ending at logical position ``k_logical`` of one env, from per-logical-position arrays."""
  out = []
  for i in range(k_logical - S + 1, k_logical + 1):
    later = any(first[j] for j in range(i + 1, k_logical + 1) if j >= 0)
    out.append(frames[i] if i >= 0 and not later else np.zeros_like(frames[0]))
  return np.stack(out, axis=-1)


def _check_against_reference(replay, state, batch, num_written):
  exp = jax.device_get(state.experience)
  t = replay.slots_per_env
  oldest = int(state.index) if bool(state.full) else 0
  held = min(num_written, t)
  for row in np.flatnonzero(batch.weight):  # a weight-0 row (no valid candidate) is ignored by the loss
    env, step = divmod(int(batch.action[row]), 1000)
    order = [(oldest + u) % t for u in range(held)]           # slots by logical position
    frames = exp.frame[env][order]
    first = exp.first[env][order]
    k = order.index(step % t)
    assert not first[k + 1], f"row {row} crosses an episode boundary (step {step})"
    np.testing.assert_array_equal(batch.obs[row], _reference_stack(frames, first, None, k))
    np.testing.assert_array_equal(batch.next_obs[row], _reference_stack(frames, first, None, k + 1))
    assert float(batch.reward[row]) == step
  assert set(np.unique(batch.weight)) <= {0.0, 1.0}


def test_stacks_zero_pad_at_episode_starts_and_skip_boundary_transitions():
  replay = make_frame_replay(64, 1, 256, min_size=4, frame_shape=(2, 3))
  firsts = [t in (0, 7) for t in range(12)]   # episode A: 0..6 (6 = its reset step), B: 7..
  state = _fill(replay, firsts)
  batch = jax.device_get(_jitted(replay)[1](state, jax.random.key(0)))
  _check_against_reference(replay, state, batch, 12)
  assert np.all(batch.weight == 1)  # 10 of 11 candidates valid: 4 invalid draws in a row are rare
  drawn = set(int(a) for a in batch.action)
  assert drawn == set(range(11)) - {6}  # 0..10 can be drawn; 6 -> 7 crosses into episode B
  # e.g. the state at step 8 is [0, 0, f7, f8]: episode B's first frame and its successor
  row = list(batch.action).index(8)
  np.testing.assert_array_equal(batch.obs[row][0, 0], [0, 0, 8, 9])
  np.testing.assert_array_equal(batch.next_obs[row][0, 0], [0, 8, 9, 10])


def test_a_wrapped_ring_keeps_stack_size_minus_one_old_slots():
  replay = make_frame_replay(16, 2, 128, min_size=2, frame_shape=(1, 2))  # 8 slots per env
  firsts = [t in (0, 9) for t in range(13)]  # wrapped: slots hold steps 5..12, index 5
  state = _fill(replay, firsts)
  assert bool(state.full) and int(state.index) == 5
  assert int(replay.num_transitions(state)) == 2 * (8 - S)  # logical 3..6 per env
  batch = jax.device_get(_jitted(replay)[1](state, jax.random.key(1)))
  _check_against_reference(replay, state, batch, 13)
  assert set(int(a) % 1000 for a in batch.action[batch.weight == 1]) == {9, 10, 11}  # 8 -> 9 crosses


def test_rows_without_a_valid_candidate_weigh_zero():
  replay = make_frame_replay(64, 1, 256, min_size=4, frame_shape=(2, 3))  # as above: compiled once
  state = _fill(replay, [True] * 12)  # every step begins an episode: no transition is valid
  batch = _jitted(replay)[1](state, jax.random.key(2))
  assert float(jnp.sum(batch.weight)) == 0.0


def test_memory_per_transition_is_one_uint8_frame():
  replay = make_frame_replay(1_000, 4, 32, frame_shape=(84, 84))
  state = jax.eval_shape(replay.init)
  nbytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state.experience))
  assert nbytes == replay.capacity * replay.bytes_per_slot and replay.bytes_per_slot == 84 * 84 + 13
  assert 1_000_000 * replay.bytes_per_slot == 7_069_000_000  # docs/methods/soft_moe_rl.md: 7.07 GB per 1M transitions


def test_sampling_before_min_size_is_refused():
  replay = make_frame_replay(64, 1, 4, min_size=8, frame_shape=(1, 1))
  state = _fill(replay, [True] + [False] * 5)  # 5 transitions
  assert not bool(replay.can_sample(state))
  with pytest.raises(InputError, match="holds 5 transitions, sampling needs min_size=8"):
    replay.sample(state, jax.random.key(0))


def test_a_replay_larger_than_memory_is_refused_before_allocating(monkeypatch):
  from jaxlab.rl import replay_sizes
  monkeypatch.setattr(replay_sizes, "host_memory", lambda: (10**9, "the host's available memory (MemAvailable)"))
  # Dopamine's capacity x 10: 70.7 GB of frames; no array is made (make_frame_replay allocates nothing)
  with pytest.raises(InputError) as info:
    make_frame_replay(10_000_000, 4, 32, names={"capacity": "dqn.replay_capacity"}, devices=jax.devices("cpu")[:1])
  assert str(info.value) == ("dqn.replay_capacity=10000000 (7069 bytes per slot) needs 70.7 GB (70690000000 bytes), "
                             "but the host's available memory (MemAvailable) is 1 GB (1000000000 bytes); lower "
                             "dqn.replay_capacity")
  with pytest.raises(InputError, match=r"\(7069 bytes per slot, 3 replays per device\) needs 2.12 GB"):
    make_frame_replay(100_000, 4, 32, copies=3, devices=jax.devices("cpu")[:1])
  assert make_frame_replay(100_000, 4, 32, devices=jax.devices("cpu")[:1]).nbytes == 706_900_000  # one copy fits


class _Accelerator:
  """A device as JAX describes one, with (or without) memory stats."""
  platform, device_kind = "gpu", "NVIDIA H200"

  def __init__(self, stats):
    self.stats = stats

  def memory_stats(self):
    return self.stats


def test_an_accelerator_replay_is_checked_against_bytes_limit():
  with pytest.raises(InputError, match=r"but NVIDIA H200 memory \(memory_stats bytes_limit\) is 0.05 GB"):
    make_frame_replay(10_000, 4, 32, devices=[_Accelerator({"bytes_limit": 50_000_000})])
  make_frame_replay(10_000, 4, 32, devices=[_Accelerator(None)])  # memory unknown: not checked
