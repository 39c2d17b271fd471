"""The frame-stacking replay against a numpy reference: stacks, episode boundaries, the ring, memory."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.replay_frames import make_frame_replay
from tests.support.replay_frames import S, check_against_reference, fill, jitted


def test_stacks_zero_pad_at_episode_starts_and_skip_boundary_transitions():
  replay = make_frame_replay(64, 1, 256, min_size=4, frame_shape=(2, 3))
  firsts = [t in (0, 7) for t in range(12)]   # episode A: 0..6 (6 = its reset step), B: 7..
  state = fill(replay, firsts)
  batch = jax.device_get(jitted(replay)[1](state, jax.random.key(0)))
  check_against_reference(replay, state, batch, 12)
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
  state = fill(replay, firsts)
  assert bool(state.full) and int(state.index) == 5
  assert int(replay.num_transitions(state)) == 2 * (8 - S)  # logical 3..6 per env
  batch = jax.device_get(jitted(replay)[1](state, jax.random.key(1)))
  check_against_reference(replay, state, batch, 13)
  assert set(int(a) % 1000 for a in batch.action[batch.weight == 1]) == {9, 10, 11}  # 8 -> 9 crosses


def test_rows_without_a_valid_candidate_weigh_zero():
  replay = make_frame_replay(64, 1, 256, min_size=4, frame_shape=(2, 3))  # as above: compiled once
  state = fill(replay, [True] * 12)  # every step begins an episode: no transition is valid
  batch = jitted(replay)[1](state, jax.random.key(2))
  assert float(jnp.sum(batch.weight)) == 0.0


def test_memory_per_transition_is_one_uint8_frame():
  replay = make_frame_replay(1_000, 4, 32, frame_shape=(84, 84))
  state = jax.eval_shape(replay.init)
  nbytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state.experience))
  assert nbytes == replay.capacity * replay.bytes_per_slot and replay.bytes_per_slot == 84 * 84 + 13
  assert 1_000_000 * replay.bytes_per_slot == 7_069_000_000  # docs/methods/soft_moe_rl.md: 7.07 GB per 1M transitions


def test_sampling_before_min_size_is_refused():
  replay = make_frame_replay(64, 1, 4, min_size=8, frame_shape=(1, 1))
  state = fill(replay, [True] + [False] * 5)  # 5 transitions
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
