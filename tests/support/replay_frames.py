"""Frame-replay test helpers: a fill whose frames, actions and rewards encode (env, step), and the check
of a sampled batch against a numpy reference of the stacks."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.rl.replay_frames import FrameStep

S = 4  # frames per stack


@functools.cache
def jitted(replay):
  """``(add, sample)`` compiled once per replay layout (equal replays share them)."""
  return jax.jit(replay.add), jax.jit(replay.sample)


def fill(replay, firsts):
  """Writes len(firsts) steps; frame value, action and reward of env e at step t encode (e, t)."""
  state = replay.init()
  add = jitted(replay)[0]
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


def check_against_reference(replay, state, batch, num_written):
  """Each sampled row's stacks equal the reference's and cross no episode boundary; weights are 0 or 1."""
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
