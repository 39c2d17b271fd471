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
``discount = 0`` there too. n-step runs (``horizon`` > 1, sampled as ``horizon + 1`` consecutive
slots) store ``done`` as well: a terminal step zeroes every later reward and the bootstrap, and a
row whose horizon is cut by a truncation gets weight 0 (:func:`n_step_transitions`).

Prioritised replay (``make_replay(..., prioritized=True)``; Schaul et al. 2016 as Dopamine's
``JaxFullRainbowAgent``, :mod:`jaxlab.rl.priorities`): the state is a
:class:`PrioritizedReplayState`, flashbax's buffer plus one priority per slot (flat index
``env * slots_per_env + t``). A slot's priority is 0 while its transition is incomplete (the
newest ``horizon`` slots of each row) and becomes the largest priority recorded so far when its
last successor is written, as Dopamine's replay adds a transition once its n steps are in
(full_rainbow_agent.py:460-466 @ 5873f54); writing over a slot zeroes it. So exactly the complete
transitions can be drawn. :meth:`TransitionReplay.sample_transitions` draws in proportion to the
priorities and returns the loss weights (``Transition.importance``) and the slots
(``Transition.index``); :meth:`TransitionReplay.update_priorities` sets the drawn slots' priorities
from their per-sample losses after the update.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from jaxlab import errors
from jaxlab.errors import InputError, check
from jaxlab.registry import optional_imports
from jaxlab.rl import priorities
from jaxlab.rl.distributional import n_step_returns
from jaxlab.rl.replay_sizes import checked_sizes

with optional_imports(__name__):
  import flashbax

ReplayState = flashbax.buffers.trajectory_buffer.TrajectoryBufferState


class TimeStep(NamedTuple):
  """What one environment step stores: the observation acted on and what followed.

  ``done`` (bool: the episode ended here, terminated or truncated) is optional: None stores
  nothing (the 1-step layout); n-step sequences need it to tell a truncation from a continuing
  step (:func:`~jaxlab.rl.n_step_transitions`).
  """

  obs: jax.Array       # o_t, e.g. bool [10, 10, C]
  action: jax.Array    # a_t, int32 [] (an integer dtype: a float one is refused)
  reward: jax.Array    # r_t (reward for a_t), float32 []
  discount: jax.Array  # float32 []: 0 if the episode terminated at this step, else 1
  done: Any = None     # bool []: the episode ended at this step (terminated or truncated), or None


class Transition(NamedTuple):
  """A sampled batch; leaves have leading axis ``batch_size``.

  ``weight`` (float [B], or None) marks rows to leave out of the loss with 0
  (:func:`jaxlab.rl.dqn.td_loss`): n-step rows whose horizon is cut by a truncation. A
  prioritised replay also sets ``importance`` (float32 [B], the loss weights) and ``index`` (int32
  [B], the drawn slots, for :meth:`TransitionReplay.update_priorities`); None otherwise.
  """

  obs: jax.Array
  action: jax.Array
  reward: jax.Array
  discount: jax.Array
  next_obs: jax.Array
  weight: Any = None
  importance: Any = None
  index: Any = None


class PrioritizedReplayState(NamedTuple):
  """A prioritised replay's state: flashbax's buffer and the slots' priorities."""

  buffer: Any  # flashbax's TrajectoryBufferState (ReplayState), as a uniform replay's whole state
  priorities: priorities.Priorities


@dataclasses.dataclass(frozen=True)
class TransitionReplay:
  """Uniform replay of transitions from ``num_envs`` environments; pure, jit/vmap/scan-able."""

  capacity: int      # time steps held in all: num_envs * (capacity // num_envs)
  num_envs: int
  batch_size: int
  min_size: int      # transitions needed before sampling (Dopamine's min_replay_history)
  _buffer: Any = dataclasses.field(repr=False, compare=False)
  horizon: int = 1   # n: ``sample_sequences`` reads n + 1 consecutive slots; 1 = ``sample``'s pairs
  prioritized: bool = False  # the state carries priorities (see the module docstring)

  @property
  def slots_per_env(self) -> int:
    return self.capacity // self.num_envs

  def init(self, example: TimeStep) -> ReplayState | PrioritizedReplayState:
    """An empty buffer for steps shaped like ``example`` (one step of one env, no batch axis);
    with its priorities (all 0) if the replay is prioritised."""
    example = jax.tree.map(jnp.asarray, example)
    _check_action_dtype(example, "example.action")
    buffer = self._buffer.init(example)
    if self.prioritized:
      return PrioritizedReplayState(buffer, priorities.init(self.capacity))
    return buffer

  def add(self, state: ReplayState | PrioritizedReplayState, steps: TimeStep
          ) -> ReplayState | PrioritizedReplayState:
    """Writes one step of every environment (leaves with leading axis ``num_envs``).

    Shapes and dtypes are static, so a step unlike the buffer's (another ``num_envs``, a float
    action) is refused at trace time. Action *values* are not checked (the replay does not know
    the action count): the TD loss makes an out-of-range one NaN (:func:`jaxlab.rl.dqn.td_loss`).
    """
    _check_action_dtype(steps, "steps.action")
    if isinstance(state, PrioritizedReplayState):
      return PrioritizedReplayState(self.add(state.buffer, steps), self._add_priorities(state))
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
    if self.horizon > 1:  # the plain trajectory buffer takes a time axis
      return self._buffer.add(state, jax.tree.map(lambda x: x[:, None], steps))
    return self._buffer.add(state, steps)

  def _add_priorities(self, state: PrioritizedReplayState) -> priorities.Priorities:
    """The priorities after :meth:`add` writes slot ``s`` of every row: 0 there (its old
    transition is gone, the new one incomplete), the largest recorded at ``s - horizon``, whose
    transition the write completes (if that slot holds one)."""
    t, s, h = self.slots_per_env, state.buffer.current_index, self.horizon
    rows = jnp.arange(self.num_envs, dtype=jnp.int32) * t
    completed = state.buffer.is_full | (s >= h)
    value = jnp.where(completed, state.priorities.max_priority, 0.0)
    index = jnp.concatenate([rows + s, rows + (s - h) % t])
    values = jnp.concatenate([jnp.zeros((self.num_envs,), jnp.float32),
                              jnp.broadcast_to(value, (self.num_envs,)).astype(jnp.float32)])
    return priorities.set_priorities(state.priorities, index, values)

  def num_transitions(self, state: ReplayState | PrioritizedReplayState) -> jax.Array:
    """Complete transitions held (int32): ``num_envs * (filled slots per env - horizon)``."""
    state = _buffer_of(state)
    filled = jnp.where(state.is_full, self.slots_per_env, state.current_index)
    return self.num_envs * jnp.maximum(filled - self.horizon, 0)

  def can_sample(self, state: ReplayState) -> jax.Array:
    """Whether the buffer holds at least ``min_size`` transitions (bool array)."""
    return self.num_transitions(state) >= self.min_size

  def sample(self, state: ReplayState, rng: jax.Array) -> Transition:
    """``batch_size`` transitions drawn uniformly, with replacement, from the filled slots.

    On a concrete (non-traced) state that holds fewer than ``min_size`` transitions this raises
    :class:`InputError`; inside jit it cannot check, so guard with :meth:`can_sample`.
    """
    check(self.horizon == 1, f"sample reads pairs of slots; a replay of horizon {self.horizon} samples "
          "with sample_sequences")
    state = _buffer_of(state)
    self._check_held(state)
    pair = self._buffer.sample(state, rng).experience
    first, second = pair.first, pair.second
    return Transition(obs=first.obs, action=first.action, reward=first.reward,
                      discount=first.discount, next_obs=second.obs)

  def sample_sequences(self, state: ReplayState, rng: jax.Array) -> TimeStep:
    """``batch_size`` runs of ``horizon + 1`` consecutive steps of one environment, drawn uniformly
    with replacement: leaves ``[batch_size, horizon + 1, ...]`` (:func:`n_step_transitions`)."""
    check(self.horizon > 1, "sample_sequences needs a replay of horizon > 1 (make_replay's horizon); "
          "a horizon-1 replay samples pairs with sample")
    state = _buffer_of(state)
    self._check_held(state)
    return self._buffer.sample(state, rng).experience

  def sample_transitions(self, state: ReplayState | PrioritizedReplayState, rng: jax.Array,
                         gamma: float) -> Transition:
    """``batch_size`` transitions of the replay's horizon and scheme, ready for the TD loss.

    Uniform: :meth:`sample` (horizon 1) or :func:`n_step_transitions` of
    :meth:`sample_sequences`. Prioritised: drawn i.i.d. with probability ``P(i)`` proportional to
    the slots' priorities (:func:`~jaxlab.rl.priorities.sample`), with ``importance`` =
    :func:`~jaxlab.rl.priorities.importance_weights` of ``P`` and ``index`` the slots drawn.

    Args:
      state: the replay's state.
      rng: a key.
      gamma: the per-step discount (n-step returns; unused at horizon 1).

    Returns:
      A :class:`Transition` (leaves ``[batch_size, ...]``).
    """
    if not self.prioritized:
      if self.horizon > 1:
        return n_step_transitions(self.sample_sequences(state, rng), gamma)
      return self.sample(state, rng)
    check(isinstance(state, PrioritizedReplayState), "a prioritised replay's state is a PrioritizedReplayState "
          "(TransitionReplay.init)")
    self._check_held(state.buffer)
    index, probability = priorities.sample(state.priorities, rng, self.batch_size)
    t = self.slots_per_env
    env, slot = index // t, index % t
    slots = (slot[:, None] + jnp.arange(self.horizon + 1)[None, :]) % t
    steps = jax.tree.map(lambda x: x[env[:, None], slots], state.buffer.experience)  # [B, horizon + 1, ...]
    if self.horizon > 1:
      batch = n_step_transitions(steps, gamma)
    else:
      batch = Transition(obs=steps.obs[:, 0], action=steps.action[:, 0], reward=steps.reward[:, 0],
                         discount=steps.discount[:, 0], next_obs=steps.obs[:, 1])
    return batch._replace(importance=priorities.importance_weights(probability), index=index)

  def update_priorities(self, state: PrioritizedReplayState, index: jax.Array, losses: jax.Array
                        ) -> PrioritizedReplayState:
    """The priorities of slots ``index`` (a batch's ``Transition.index``) set from their per-sample
    ``losses`` (float [B]) as :func:`~jaxlab.rl.priorities.update_from_losses` does (a non-finite
    loss keeps the old priority)."""
    check(isinstance(state, PrioritizedReplayState), "update_priorities needs a prioritised replay's state "
          "(make_replay(..., prioritized=True))")
    return state._replace(priorities=priorities.update_from_losses(state.priorities, index, losses))

  def _check_held(self, state: ReplayState) -> None:
    held = self.num_transitions(state)
    if not isinstance(held, jax.core.Tracer):
      held = int(held)
      if held < max(self.min_size, 1):
        raise InputError(f"cannot sample: the replay holds {held} transitions, "
                         f"sampling needs min_size={max(self.min_size, 1)}")


def _buffer_of(state: ReplayState | PrioritizedReplayState) -> ReplayState:
  """flashbax's buffer state, of a uniform or a prioritised replay."""
  return state.buffer if isinstance(state, PrioritizedReplayState) else state


def n_step_transitions(steps: TimeStep, gamma: float) -> Transition:
  r"""n-step transitions from runs of ``n + 1`` steps (:meth:`TransitionReplay.sample_sequences`).

  ``reward`` is the n-step return and ``discount`` :math:`\prod_{k<n} d_k` (pass
  :math:`\gamma^n` as the TD loss's ``gamma``; :func:`~jaxlab.rl.n_step_returns`),
  ``next_obs`` the observation n steps on. A terminal step inside the horizon zeroes every later
  reward and the bootstrap, so the next episode's slots (auto-reset) add nothing. A *truncated*
  step before any terminal one has no successor stored (its slot holds the next episode's
  start), so such a row gets ``weight`` 0 and leaves the loss (needs ``steps.done``).

  Args:
    steps: leaves ``[B, n + 1, ...]`` with ``done``.
    gamma: the per-step discount.

  Returns:
    A :class:`Transition` with ``weight`` float32 [B].
  """
  check(steps.done is not None, "n-step transitions need steps.done (store TimeStep.done) to tell truncations")
  n = steps.reward.shape[1] - 1
  rewards, discounts = steps.reward[:, :n], steps.discount[:, :n].astype(jnp.float32)
  returns, _ = n_step_returns(rewards, discounts, gamma)
  alive = jnp.cumprod(discounts, axis=1)
  alive_before = jnp.concatenate([jnp.ones_like(alive[:, :1]), alive[:, :-1]], axis=1)
  truncated = steps.done[:, :n] & (discounts > 0)
  cut = jnp.any(truncated & (alive_before > 0), axis=1)
  return Transition(obs=steps.obs[:, 0], action=steps.action[:, 0], reward=returns, discount=alive[:, -1],
                    next_obs=steps.obs[:, n], weight=1.0 - cut.astype(jnp.float32))


def _check_action_dtype(step: Any, name: str) -> None:
  action = getattr(step, "action", None)
  if action is not None:
    dtype = jnp.result_type(action)
    check(jnp.issubdtype(dtype, jnp.integer),
          f"{name} of dtype {dtype}; must be an integer dtype (a float action would be truncated "
          "to another action when the TD loss gathers Q[a])")


def make_replay(capacity: int, num_envs: int, batch_size: int, min_size: int | None = None, *,
                names: Mapping[str, str] | None = None, horizon: int = 1,
                prioritized: bool = False) -> TransitionReplay:
  """A uniform transition replay over flashbax's flat buffer (see the module docstring).

  Args:
    capacity: time steps held, all environments together (Dopamine MinAtar: 100_000); below
      2**31 (flashbax's int32 indices).
    num_envs: environments adding one step each per :meth:`TransitionReplay.add`.
    batch_size: transitions per :meth:`TransitionReplay.sample` (Dopamine: 32).
    min_size: transitions before sampling is allowed; default ``batch_size``.
    names: what error messages call each argument, e.g. ``{"capacity": "dqn.replay_capacity"}``
      for a caller that reads it from a config (default: the argument's name).
    horizon: n, the steps of an n-step transition (``dqn.update_horizon``): 1 samples pairs of
      slots (:meth:`TransitionReplay.sample`), n > 1 runs of n + 1
      (:meth:`TransitionReplay.sample_sequences`).
    prioritized: keep a priority per slot and draw in proportion to it
      (:meth:`TransitionReplay.sample_transitions`; see the module docstring).
  """
  errors.check_bool(prioritized, "prioritized")
  n, min_size = checked_sizes(capacity, num_envs, batch_size, min_size, names)
  h_name = (names or {}).get("horizon", "horizon")
  errors.check_int(horizon, h_name, 1, "the n of n-step returns; 1 = one-step")
  per_env = capacity // num_envs
  check(per_env >= horizon + 1, f"{n['capacity']}={capacity} with {n['num_envs']}={num_envs} leaves {per_env} slots "
        f"per env; a transition needs {horizon + 1}, so {n['capacity']} must be >= {horizon + 1} * {n['num_envs']}")
  held = num_envs * (per_env - horizon)  # transitions when full
  one_step = num_envs * (per_env - 1)
  for key, size in (("batch_size", batch_size), ("min_size", min_size)):
    if size > held and size <= one_step:  # the horizon is what leaves too few
      raise InputError(f"{h_name}={horizon} leaves the replay {held} {horizon}-step transitions ({n['capacity']}="
                       f"{capacity}, {n['num_envs']}={num_envs}), fewer than {n[key]}={size}; lower {h_name} or "
                       f"raise {n['capacity']}")
  if batch_size > held:
    raise InputError(f"{n['batch_size']}={batch_size} is larger than the replay's {held} transitions "
                     f"({n['capacity']}={capacity}, {n['num_envs']}={num_envs}); raise {n['capacity']} or lower "
                     f"{n['batch_size']}")
  if min_size > held:
    raise InputError(f"{n['min_size']}={min_size} is more than the replay can hold: {held} transitions "
                     f"({n['capacity']}={capacity}, {n['num_envs']}={num_envs})")
  if horizon > 1:  # runs of horizon + 1 slots from the plain trajectory buffer (min length: its own can_sample)
    buffer = flashbax.make_trajectory_buffer(
        max_length_time_axis=per_env, min_length_time_axis=horizon + 1, sample_batch_size=batch_size,
        add_batch_size=num_envs, sample_sequence_length=horizon + 1, period=1)
    return TransitionReplay(capacity=per_env * num_envs, num_envs=num_envs, batch_size=batch_size,
                            min_size=min_size, _buffer=buffer, horizon=horizon, prioritized=prioritized)
  # min_length only feeds flashbax's own can_sample (unused); num_envs avoids its warning.
  buffer = flashbax.make_flat_buffer(max_length=per_env * num_envs, min_length=num_envs,
                                     sample_batch_size=batch_size, add_batch_size=num_envs)
  return TransitionReplay(capacity=per_env * num_envs, num_envs=num_envs, batch_size=batch_size,
                          min_size=min_size, _buffer=buffer, prioritized=prioritized)
