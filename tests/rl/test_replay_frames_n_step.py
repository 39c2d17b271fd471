"""n-step transitions from the frame replay against a NumPy reference: returns that stop at a terminal,
windows that would join two episodes rejected, the stacks at k and k + n, the ring, and horizon 1 = sample."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.replay_frames import FrameStep, make_frame_replay

S = 4
GAMMA = 0.9


def _fill(replay, steps, seed=0):
  """``steps`` random steps; action encodes (env, step); ~1/6 terminals, ~1/8 episode starts."""
  rng = np.random.default_rng(seed)
  e = replay.num_envs
  first = rng.random((steps, e)) < 0.125
  discount = (rng.random((steps, e)) >= 1 / 6).astype(np.float32)
  reward = rng.normal(size=(steps, e)).astype(np.float32)
  state = replay.init()
  add = jax.jit(replay.add)
  for t in range(steps):
    frame = np.broadcast_to((1 + t + 100 * np.arange(e))[:, None, None] % 256, (e, *replay.frame_shape))
    state = add(state, FrameStep(jnp.asarray(frame, jnp.uint8), jnp.asarray(t + 1000 * np.arange(e), jnp.int32),
                                 jnp.asarray(reward[t]), jnp.asarray(discount[t]), jnp.asarray(first[t])))
  return state


def _stack(frames, first, k):
  out = []
  for i in range(k - S + 1, k + 1):
    later = any(first[j] for j in range(max(i + 1, 0), k + 1))
    out.append(frames[i] if i >= 0 and not later else np.zeros_like(frames[0]))
  return np.stack(out, axis=-1)


def _reference(replay, state, n):
  """{(env, step): (obs, reward, discount, next_obs)} of every valid n-step window, from logical arrays."""
  exp = jax.device_get(state.experience)
  t = replay.slots_per_env
  full = bool(state.full)
  oldest = int(state.index) if full else 0
  held = t if full else int(state.index)
  lowest = S - 1 if full else 0
  out = {}
  for env in range(replay.num_envs):
    order = [(oldest + u) % t for u in range(held)]
    leaf = {k: np.asarray(getattr(exp, k)[env])[order] for k in FrameStep._fields}
    for k in range(lowest, held - n):
      ended, ok, ret, disc = False, True, 0.0, 1.0
      for j in range(n):
        if leaf["first"][k + j] and j > 0 and not ended:
          ok = False
        if not ended:
          ret += GAMMA ** j * leaf["reward"][k + j]
          disc *= leaf["discount"][k + j]
          ended = leaf["discount"][k + j] == 0
      if leaf["first"][k + n] and not ended:
        ok = False
      if ok:
        out[(env, int(leaf["action"][k]) % 1000)] = (_stack(leaf["frame"], leaf["first"], k), ret, disc,
                                                    _stack(leaf["frame"], leaf["first"], k + n))
  return out


@pytest.mark.parametrize("n, steps", [(3, 40), (10, 90)])  # 90 steps wrap the 48-slot ring
def test_n_step_batches_equal_the_numpy_reference_and_cover_every_valid_window(n, steps):
  replay = make_frame_replay(96, 2, 64, 8, frame_shape=(3, 2), stack_size=S)
  state = _fill(replay, steps, seed=n)
  ref = _reference(replay, state, n)
  sample = jax.jit(lambda st, k: replay.sample_n_step(st, k, n, GAMMA))
  seen = set()
  for i in range(40):
    batch = jax.device_get(sample(state, jax.random.key(i)))
    for row in np.flatnonzero(batch.weight):
      env, step = divmod(int(batch.action[row]), 1000)
      assert (env, step) in ref, f"row {row}: window ({env}, {step}) joins two episodes"
      obs, ret, disc, next_obs = ref[(env, step)]
      np.testing.assert_array_equal(batch.obs[row], obs)
      np.testing.assert_array_equal(batch.next_obs[row], next_obs)
      np.testing.assert_allclose(batch.reward[row], ret, rtol=1e-5, atol=1e-6)
      assert float(batch.discount[row]) == disc
      seen.add((env, step))
  assert seen == set(ref)  # uniform over the valid windows: 2,560 draws reach all of them
  assert any(d == 0 for _, _, d, _ in ref.values()) and any(d == 1 for _, _, d, _ in ref.values())


def test_a_terminal_step_ends_the_return_and_a_truncation_is_rejected():
  replay = make_frame_replay(20, 1, 4, 1, frame_shape=(1, 1), stack_size=S)
  state, add = replay.init(), jax.jit(replay.add)
  # steps 0..9: terminal at 2, the next episode starts at 4 (3 is the reset step); truncation
  # (discount 1) at 6, the next episode starts at 8 (7 is the reset step)
  for t in range(10):
    state = add(state, FrameStep(jnp.full((1, 1, 1), t, jnp.uint8), jnp.array([t], jnp.int32),
                                 jnp.array([1.0 + t]), jnp.array([0.0 if t == 2 else 1.0]),
                                 jnp.array([t in (0, 4, 8)])))
  valid = jax.jit(lambda st: replay.n_step_valid(st, jnp.zeros(8, jnp.int32), jnp.arange(8), 3))(state)
  # windows k..k+3: k = 0, 1, 2 stop at the terminal; 3 joins the reset step and episode 4; 5, 6, 7
  # cross the truncated end; 4 (slots 5..7: no start) is fine
  np.testing.assert_array_equal(valid, [1, 1, 1, 0, 1, 0, 0, 0])
  batch = jax.jit(lambda st: replay.gather_n_step(st, jnp.zeros(3, jnp.int32), jnp.array([0, 1, 2]), 3, GAMMA))(state)
  np.testing.assert_allclose(batch.reward, [1 + GAMMA * 2 + GAMMA**2 * 3, 2 + GAMMA * 3, 3], rtol=1e-6)
  np.testing.assert_array_equal(batch.discount, [0, 0, 0])


def test_horizon_one_samples_what_sample_samples():
  replay = make_frame_replay(96, 2, 32, 8, frame_shape=(3, 2), stack_size=S)
  state = _fill(replay, 70, seed=1)
  one_step = jax.jit(replay.sample)
  n_step = jax.jit(lambda st, k: replay.sample_n_step(st, k, 1, GAMMA))
  for i in range(3):
    jax.tree.map(np.testing.assert_array_equal, one_step(state, jax.random.key(i)), n_step(state, jax.random.key(i)))


def test_sampling_too_early_names_the_count():
  replay = make_frame_replay(96, 2, 32, 8, frame_shape=(3, 2), stack_size=S)
  state = _fill(replay, 6)
  with pytest.raises(InputError, match=r"holds 6 3-step transitions, sampling needs min_size=8"):
    replay.sample_n_step(state, jax.random.key(0), 3, GAMMA)


@pytest.mark.parametrize("n, steps", [(3, 40), (10, 90)])
def test_prioritised_n_step_windows_are_exactly_the_valid_ones(n, steps):
  replay = make_frame_replay(96, 2, 64, 8, frame_shape=(3, 2), stack_size=S, prioritized=True, horizon=n)
  state = _fill(replay, steps, seed=n)
  ref = _reference(replay, state, n)
  t = replay.slots_per_env
  action = np.asarray(state.experience.action)
  held = {(e, int(action[e, s]) % 1000) for e, s in map(lambda i: divmod(int(i), t),
                                                         np.flatnonzero(np.asarray(state.priorities.levels[0])))}
  assert held == set(ref)  # a priority only where the n-step window is complete and valid
  batch = jax.device_get(jax.jit(lambda st, k: replay.sample_n_step(st, k, n, GAMMA))(state, jax.random.key(0)))
  np.testing.assert_array_equal(batch.weight, 1.0)
  for row in range(64):
    obs, ret, disc, next_obs = ref[divmod(int(batch.action[row]), 1000)]
    np.testing.assert_array_equal(batch.obs[row], obs)
    np.testing.assert_array_equal(batch.next_obs[row], next_obs)
    np.testing.assert_allclose(batch.reward[row], ret, rtol=1e-5, atol=1e-6)
    assert float(batch.discount[row]) == disc
  with pytest.raises(InputError, match=r"prioritised replay made for"):
    replay.sample_n_step(state, jax.random.key(0), n + 1, GAMMA)
