"""Uniform transition replay for N parallel environments: a thin layer over flashbax.

Storage is flashbax's flat buffer (a trajectory buffer sampled in pairs of consecutive steps):
each environment owns a row of ``T = capacity // num_envs`` time slots and every step writes one
slot per row, so a transition ``(o_t, a_t, r_t, d_t, o_{t+1})`` is read from slots t and t+1 of
the same row. Each observation is stored once, half the memory and write traffic of an item
buffer holding ``obs`` and ``next_obs`` (MinAtar Seaquest: 1000 vs 2000 bytes a transition).

Layout ``experience[leaf]: [num_envs, T, ...]`` (flashbax ``TrajectoryBufferState``, a pytree of
arrays: ``experience``, ``current_index`` int32, ``is_full`` bool), so it checkpoints with orbax.
``add`` is a scatter of N rows at one time index and ``sample`` a gather of ``2 * batch_size``
rows: both O(batch), independent of capacity, *provided the jitted function that carries the
state donates it* (``donate_argnums``); without donation every call copies the whole buffer once
(benchmarks/rl_td_update_speed.py; docs/methods/soft_moe_rl.md, "Performance: the jitted DQN on XLA:CPU").

Episode boundaries: with auto-reset, the slot after the last step of an episode holds the first
observation of the next one. That is harmless where the episode *terminated* (``discount = 0``
ignores ``o_{t+1}``), but a *truncated* step would bootstrap from the wrong observation: run
without time limits (the MinAtar/Dopamine default of :mod:`jaxlab.rl.envs`) or store
``discount = 0`` there too.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, NamedTuple

import flashbax
import jax
import jax.numpy as jnp

from jaxlab.errors import InputError, check
from jaxlab.rl.replay_sizes import checked_sizes

ReplayState = flashbax.buffers.trajectory_buffer.TrajectoryBufferState


class TimeStep(NamedTuple):
  """What one environment step stores: the observation acted on and what followed."""

  obs: jax.Array       # o_t, e.g. bool [10, 10, C]
  action: jax.Array    # a_t, int32 [] (an integer dtype: a float one is refused)
  reward: jax.Array    # r_t (reward for a_t), float32 []
  discount: jax.Array  # float32 []: 0 if the episode terminated at this step, else 1


class Transition(NamedTuple):
  """A sampled batch; leaves have leading axis ``batch_size``."""

  obs: jax.Array
  action: jax.Array
  reward: jax.Array
  discount: jax.Array
  next_obs: jax.Array


@dataclasses.dataclass(frozen=True)
class TransitionReplay:
  """Uniform replay of transitions from ``num_envs`` environments; pure, jit/vmap/scan-able."""

  capacity: int      # time steps held in all: num_envs * (capacity // num_envs)
  num_envs: int
  batch_size: int
  min_size: int      # transitions needed before sampling (Dopamine's min_replay_history)
  _buffer: Any = dataclasses.field(repr=False, compare=False)

  @property
  def slots_per_env(self) -> int:
    return self.capacity // self.num_envs

  def init(self, example: TimeStep) -> ReplayState:
    """An empty buffer for steps shaped like ``example`` (one step of one env, no batch axis)."""
    example = jax.tree.map(jnp.asarray, example)
    _check_action_dtype(example, "example.action")
    return self._buffer.init(example)

  def add(self, state: ReplayState, steps: TimeStep) -> ReplayState:
    """Writes one step of every environment (leaves with leading axis ``num_envs``).

    Shapes and dtypes are static, so a step unlike the buffer's (another ``num_envs``, a float
    action) is refused at trace time. Action *values* are not checked (the replay does not know
    the action count): the TD loss makes an out-of-range one NaN (:func:`jaxlab.rl.dqn.td_loss`).
    """
    _check_action_dtype(steps, "steps.action")
    held = dict(jax.tree_util.tree_leaves_with_path(state.experience))
    for path, leaf in jax.tree_util.tree_leaves_with_path(steps):
      want = held.get(path)
      name = "steps" + jax.tree_util.keystr(path)
      check(want is not None, f"{name} is not in the buffer's steps (see TransitionReplay.init)")
      shape, dtype = jnp.shape(leaf), jnp.result_type(leaf)
      expected = (self.num_envs, *want.shape[2:])
      check(shape == expected and dtype == want.dtype,
            f"{name}: {dtype}{list(shape)}; the buffer takes {want.dtype}{list(expected)} "
            f"(one step of each of num_envs={self.num_envs} environments)")
    return self._buffer.add(state, steps)

  def num_transitions(self, state: ReplayState) -> jax.Array:
    """Complete transitions held (int32): ``num_envs * (filled slots per env - 1)``."""
    filled = jnp.where(state.is_full, self.slots_per_env, state.current_index)
    return self.num_envs * jnp.maximum(filled - 1, 0)

  def can_sample(self, state: ReplayState) -> jax.Array:
    """Whether the buffer holds at least ``min_size`` transitions (bool array)."""
    return self.num_transitions(state) >= self.min_size

  def sample(self, state: ReplayState, rng: jax.Array) -> Transition:
    """``batch_size`` transitions drawn uniformly, with replacement, from the filled slots.

    On a concrete (non-traced) state that holds fewer than ``min_size`` transitions this raises
    :class:`InputError`; inside jit it cannot check, so guard with :meth:`can_sample`.
    """
    held = self.num_transitions(state)
    if not isinstance(held, jax.core.Tracer):
      held = int(held)
      if held < max(self.min_size, 1):
        raise InputError(f"cannot sample: the replay holds {held} transitions, "
                         f"sampling needs min_size={max(self.min_size, 1)}")
    pair = self._buffer.sample(state, rng).experience
    first, second = pair.first, pair.second
    return Transition(obs=first.obs, action=first.action, reward=first.reward,
                      discount=first.discount, next_obs=second.obs)


def _check_action_dtype(step: Any, name: str) -> None:
  action = getattr(step, "action", None)
  if action is not None:
    dtype = jnp.result_type(action)
    check(jnp.issubdtype(dtype, jnp.integer),
          f"{name} of dtype {dtype}; must be an integer dtype (a float action would be truncated "
          "to another action when the TD loss gathers Q[a])")


def make_replay(capacity: int, num_envs: int, batch_size: int, min_size: int | None = None, *,
                names: Mapping[str, str] | None = None) -> TransitionReplay:
  """A uniform transition replay over flashbax's flat buffer (see the module docstring).

  Args:
    capacity: time steps held, all environments together (Dopamine MinAtar: 100_000); below
      2**31 (flashbax's int32 indices).
    num_envs: environments adding one step each per :meth:`TransitionReplay.add`.
    batch_size: transitions per :meth:`TransitionReplay.sample` (Dopamine: 32).
    min_size: transitions before sampling is allowed; default ``batch_size``.
    names: what error messages call each argument, e.g. ``{"capacity": "dqn.replay_capacity"}``
      for a caller that reads it from a config (default: the argument's name).
  """
  n, min_size = checked_sizes(capacity, num_envs, batch_size, min_size, names)
  per_env = capacity // num_envs
  check(per_env >= 2, f"{n['capacity']}={capacity} with {n['num_envs']}={num_envs} leaves {per_env} slots "
        f"per env; a transition needs 2, so {n['capacity']} must be >= 2 * {n['num_envs']}")
  held = num_envs * (per_env - 1)  # transitions when full
  if batch_size > held:
    raise InputError(f"{n['batch_size']}={batch_size} is larger than the replay's {held} transitions "
                     f"({n['capacity']}={capacity}, {n['num_envs']}={num_envs}); raise {n['capacity']} or lower "
                     f"{n['batch_size']}")
  if min_size > held:
    raise InputError(f"{n['min_size']}={min_size} is more than the replay can hold: {held} transitions "
                     f"({n['capacity']}={capacity}, {n['num_envs']}={num_envs})")
  # min_length only feeds flashbax's own can_sample (unused); num_envs avoids its warning.
  buffer = flashbax.make_flat_buffer(max_length=per_env * num_envs, min_length=num_envs,
                                     sample_batch_size=batch_size, add_batch_size=num_envs)
  return TransitionReplay(capacity=per_env * num_envs, num_envs=num_envs, batch_size=batch_size,
                          min_size=min_size, _buffer=buffer)
