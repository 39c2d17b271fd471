"""Uniform replay of Atari frames for N parallel environments, stacked when sampled.

Atari replay memory is the price of the paper's setting: a 4-frame 84x84 state is 28,224 bytes,
so storing each transition's stacked ``obs`` (let alone ``obs`` and ``next_obs``) would take 28 GB
(56 GB) for Dopamine's 1M transitions. Like Dopamine's original circular buffer, this buffer
stores each uint8 frame once and rebuilds the stacks when it samples: one slot holds
``frame, action, reward, discount, first`` = 7,056 + 13 bytes, **7.07 GB per 1M transitions**
(6.58 GiB; per vmapped run).

Layout ``experience[leaf]: [num_envs, T, ...]`` with ``T = capacity // num_envs`` slots per
environment; every :meth:`FrameReplay.add` writes one slot per environment at ``index``
(a ring). Slot ``k`` of an environment holds the newest frame of the state acted on at that step,
the action, the reward and discount that followed, and ``first``: the frame began an episode.

Sampling transition ``k`` (``obs`` = stack at slot k, ``next_obs`` = stack at slot k+1):

* a stack of ``stack_size`` frames ends at its slot; frames from before the episode's first slot
  (or older than the oldest slot held) are zeros, as Dopamine's agent starts each episode from a
  zero state (``JaxDQNAgent._reset_state``, dopamine/jax/agents/dqn/dqn_agent.py:441-459) and its
  replay pads the same way (dopamine/jax/replay_memory/accumulator.py:96-142);
* a transition whose next slot is ``first`` crosses an episode boundary (with envpool's next-step
  auto-reset the slot before an episode's first frame is the reset step, whose action the emulator
  ignored): it is invalid, unless the transition itself was terminal (discount 0: its ``next_obs``
  is never used; a life lost under ``terminal_on_life_loss`` starts the next episode on the very
  next slot). Each batch row draws up to ``RETRIES`` uniform candidates and keeps the
  first valid one, so rows are uniform over valid transitions as in Dopamine's replay, which
  holds only valid ones; a row whose candidates were all invalid gets ``weight = 0``
  (:func:`jaxlab.rl.dqn.td_loss` then ignores it).

n-step transitions (:meth:`FrameReplay.sample_n_step`, Rainbow's ``update_horizon``) take the
stack at slot k, the rewards and discounts of slots k..k+n-1 and the stack at slot k+n; the return
stops at a terminal, and a window holding an episode start without a terminal before it is invalid
(:meth:`FrameReplay.n_step_valid`).

Prioritised sampling (``make_frame_replay(..., prioritized=True)``; Schaul et al. 2016 as
Dopamine's ``JaxFullRainbowAgent``, :mod:`jaxlab.rl.priorities`): the state also holds one
priority per slot (flat index ``env * slots_per_env + slot``), nonzero exactly for the transitions
the uniform sampler above may return as valid. :meth:`FrameReplay.add` gives the transition its
write completes (slot ``index - 1``, unless the new frame starts an episode) the largest priority
recorded so far, and zeroes the slot written and, once the ring is full, the ``stack_size - 1``
after it, whose stacks lost their oldest frame. :meth:`FrameReplay.sample` then draws in proportion
to the priorities (every row valid: ``weight`` 1) and returns the loss weights and the slots
drawn; :meth:`FrameReplay.update_priorities` sets their priorities from the per-sample losses.
A prioritised replay made with ``horizon`` n > 1 gives a slot its priority when the slot n
after it is written and only if its n-step window is valid (:meth:`FrameReplay.n_step_valid`), and
:meth:`FrameReplay.sample_n_step` then draws those windows by priority.

All functions are pure and jit/vmap-able; the state is a pytree of arrays, so it checkpoints with
the rest of the train state. As with :mod:`jaxlab.rl.replay`, ``add`` and ``sample`` are O(batch)
only when the jitted function carrying the state donates it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from jaxlab import errors
from jaxlab.errors import InputError, check, check_int
from jaxlab.rl import distributional, priorities
from jaxlab.rl.replay_sizes import check_fits_memory, checked_sizes

RETRIES = 4  # candidates per batch row; all 4 invalid has probability ~ (1 / episode length)^4


class FrameStep(NamedTuple):
  """What one environment step stores (leading axis ``num_envs`` when added)."""

  frame: jax.Array     # uint8 [H, W]: newest frame of the state acted on
  action: jax.Array    # int32 []
  reward: jax.Array    # float32 []: reward for the action (as the agent learns from it)
  discount: jax.Array  # float32 []: 0 where the episode terminated at this step, else 1
  first: jax.Array     # bool []: the frame is the first of an episode


class FrameReplayState(NamedTuple):
  """The buffer: ``experience`` leaves ``[num_envs, T, ...]``, the next slot, whether it wrapped,
  and (a prioritised replay only, else None) the slots' priorities."""

  experience: FrameStep
  index: jax.Array  # int32 []: the slot the next add writes
  full: jax.Array   # bool []: every slot has been written at least once
  priorities: Any = None  # jaxlab.rl.priorities.Priorities over num_envs * T slots, or None


class StackedTransition(NamedTuple):
  """A sampled batch; ``obs``/``next_obs`` are uint8 ``[B, H, W, stack_size]`` (newest last)."""

  obs: jax.Array
  action: jax.Array
  reward: jax.Array
  discount: jax.Array
  next_obs: jax.Array
  weight: jax.Array  # float32 [B]: 1, or 0 where no valid transition was drawn
  importance: Any = None  # float32 [B]: prioritised replay's loss weights (else None)
  index: Any = None       # int32 [B]: the slots drawn, for update_priorities (prioritised; else None)


@dataclasses.dataclass(frozen=True)
class FrameReplay:
  """Uniform replay of frame-stacked transitions from ``num_envs`` environments."""

  capacity: int      # slots in all: num_envs * (capacity // num_envs)
  num_envs: int
  batch_size: int
  min_size: int      # transitions needed before sampling (Dopamine's min_replay_history)
  frame_shape: tuple[int, int]
  stack_size: int
  prioritized: bool = False  # sample in proportion to priorities (see the module docstring)
  horizon: int = 1           # n of the n-step windows a prioritised replay gives priorities to

  @property
  def slots_per_env(self) -> int:
    """Ring length of each environment's row."""
    return self.capacity // self.num_envs

  @property
  def bytes_per_slot(self) -> int:
    """The bytes one slot takes (the frame, int32 action, float32 reward and discount, bool first)."""
    return self.frame_shape[0] * self.frame_shape[1] + 4 + 4 + 4 + 1

  @property
  def nbytes(self) -> int:
    """The bytes :meth:`init` allocates (besides scalars): ``capacity * bytes_per_slot``, plus the
    priority tree's float32 levels when prioritised (about 4.3 bytes per slot)."""
    extra = 0
    if self.prioritized:
      extra = 4 * sum(level.size for level in jax.eval_shape(lambda: priorities.init(self.capacity)).levels)
    return self.capacity * self.bytes_per_slot + extra

  def init(self) -> FrameReplayState:
    """An empty buffer (zeros; every priority 0 when prioritised)."""
    e, t = self.num_envs, self.slots_per_env
    experience = FrameStep(frame=jnp.zeros((e, t, *self.frame_shape), jnp.uint8),
                           action=jnp.zeros((e, t), jnp.int32), reward=jnp.zeros((e, t), jnp.float32),
                           discount=jnp.zeros((e, t), jnp.float32), first=jnp.zeros((e, t), jnp.bool_))
    pri = priorities.init(self.capacity) if self.prioritized else None
    return FrameReplayState(experience, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.bool_), pri)

  def add(self, state: FrameReplayState, steps: FrameStep) -> FrameReplayState:
    """Writes one step of every environment; shapes and dtypes are checked at trace time."""
    for name, leaf, want in zip(FrameStep._fields, steps, state.experience):
      shape, dtype = jnp.shape(leaf), jnp.result_type(leaf)
      expected = (self.num_envs, *want.shape[2:])
      check(shape == expected and dtype == want.dtype,
            f"steps.{name}: {dtype}{list(shape)}; the buffer takes {want.dtype}{list(expected)} "
            f"(one step of each of num_envs={self.num_envs} environments)")
    experience = jax.tree.map(
        lambda buf, x: jax.lax.dynamic_update_index_in_dim(buf, x, state.index, axis=1),
        state.experience, steps)
    nxt = state.index + 1
    full = state.full | (nxt == self.slots_per_env)
    pri = state.priorities
    if pri is not None:
      pri = self._add_priorities(pri, experience, state.index, state.full, full)
    return FrameReplayState(experience, nxt % self.slots_per_env, full, pri)

  def _add_priorities(self, pri: priorities.Priorities, experience: FrameStep, s: jax.Array, was_full: jax.Array,
                      full: jax.Array) -> priorities.Priorities:
    """The priorities after slot ``s`` of every row is written (see the module docstring)."""
    t, k, n = self.slots_per_env, self.stack_size, self.horizon
    rows = jnp.arange(self.num_envs, dtype=jnp.int32)[:, None] * t
    lost = rows + (s + jnp.arange(k)[None, :]) % t                # [E, k]: written, or stacks lost a frame
    keep = (jnp.arange(k)[None, :] > 0) & ~full                    # not full yet: nothing was overwritten
    lost_values = jnp.where(keep, priorities.get(pri, lost), 0.0)
    start = (s - n) % t                                            # the window this write completes
    done = rows[:, 0] + start
    window = _window_valid(experience.first[:, (start + 1 + jnp.arange(n)) % t],
                           experience.discount[:, (start + jnp.arange(n)) % t])
    done_value = jnp.where((was_full | (s >= n)) & window, pri.max_priority, 0.0)
    index = jnp.concatenate([lost.ravel(), done])
    return priorities.set_priorities(pri, index, jnp.concatenate([lost_values.ravel(), done_value]))

  def _candidates(self, state: FrameReplayState) -> tuple[jax.Array, jax.Array]:
    """``(lowest, count)``: transition ``k`` may be drawn for logical positions
    ``lowest <= u < lowest + count`` (u = slots after the oldest held), so that ``k + 1`` is written
    and, once the ring has wrapped, the stack's frames were not overwritten."""
    t = self.slots_per_env
    filled = jnp.where(state.full, t, state.index)
    lowest = jnp.where(state.full, self.stack_size - 1, 0)
    return lowest, jnp.maximum(filled - 1 - lowest, 0)

  def num_transitions(self, state: FrameReplayState) -> jax.Array:
    """Transitions that can be drawn (int32), valid or not: ``num_envs`` x positions per env."""
    return self.num_envs * self._candidates(state)[1]

  def can_sample(self, state: FrameReplayState) -> jax.Array:
    """Whether the buffer holds at least ``min_size`` transitions (bool array)."""
    return self.num_transitions(state) >= self.min_size

  def sample(self, state: FrameReplayState, rng: jax.Array) -> StackedTransition:
    """``batch_size`` transitions, uniform over the valid ones (see the module docstring), or,
    for a prioritised replay, drawn with probability ``P(i)`` proportional to their priorities,
    with ``importance`` = :func:`~jaxlab.rl.priorities.importance_weights` of ``P`` and ``index``
    the slots drawn (``weight`` 1).

    On a concrete state holding fewer than ``min_size`` transitions this raises
    :class:`InputError`; inside jit it cannot check, so guard with :meth:`can_sample`.
    """
    held = self.num_transitions(state)
    if not isinstance(held, jax.core.Tracer):
      if int(held) < max(self.min_size, 1):
        raise InputError(f"cannot sample: the replay holds {int(held)} transitions, "
                         f"sampling needs min_size={max(self.min_size, 1)}")
    t, b = self.slots_per_env, self.batch_size
    exp = state.experience
    oldest = jnp.where(state.full, state.index, 0)  # slot of logical position 0
    extra = {}
    if self.prioritized:
      check(state.priorities is not None, "a prioritised FrameReplay's state has priorities (FrameReplay.init)")
      index, probability = priorities.sample(state.priorities, rng, b)
      env, pos = index // t, (index % t - oldest) % t
      weight = jnp.ones((b,), jnp.float32)
      extra = {"importance": priorities.importance_weights(probability), "index": index}
    else:
      lowest, count = self._candidates(state)
      k_env, k_pos = jax.random.split(rng)
      env = jax.random.randint(k_env, (RETRIES, b), 0, self.num_envs)
      pos = lowest + jax.random.randint(k_pos, (RETRIES, b), 0, jnp.maximum(count, 1))
      valid = _window_valid(exp.first[env, (oldest + pos + 1) % t][..., None],  # the next slot starts no
                            exp.discount[env, (oldest + pos) % t][..., None])   # episode, or k was terminal
      pick = jnp.argmax(valid, axis=0)                         # the first valid candidate (0 if none)
      env, pos = env[pick, jnp.arange(b)], pos[pick, jnp.arange(b)]
      weight = jnp.any(valid, axis=0).astype(jnp.float32)
    # positions pos - stack_size + 1 .. pos + 1: the obs stack, and one more for next_obs
    offsets = jnp.arange(-self.stack_size + 1, 2)
    logical = pos[:, None] + offsets[None, :]                # [B, stack_size + 1]
    slots = (oldest + logical) % t
    frames = exp.frame[env[:, None], slots]                   # [B, stack_size + 1, H, W]
    first = exp.first[env[:, None], slots] & (logical >= 0)
    obs = _stack(frames[:, :-1], first[:, :-1], logical[:, :-1])
    next_obs = _stack(frames[:, 1:], first[:, 1:], logical[:, 1:])
    at = (env, (oldest + pos) % t)
    return StackedTransition(obs=obs, action=exp.action[at], reward=exp.reward[at],
                             discount=exp.discount[at], next_obs=next_obs, weight=weight, **extra)

  def update_priorities(self, state: FrameReplayState, index: jax.Array, losses: jax.Array) -> FrameReplayState:
    """The priorities of slots ``index`` (a batch's ``StackedTransition.index``) set from their
    per-sample ``losses`` (float [B]) by :func:`~jaxlab.rl.priorities.update_from_losses` (a
    non-finite loss keeps the old priority)."""
    check(state.priorities is not None, "update_priorities needs a prioritised replay's state "
          "(make_frame_replay(..., prioritized=True))")
    return state._replace(priorities=priorities.update_from_losses(state.priorities, index, losses))

  def num_n_step_transitions(self, state: FrameReplayState, horizon: int) -> jax.Array:
    """n-step transitions that can be drawn (int32), valid or not: slot ``k + horizon`` must be written."""
    return self.num_envs * self._n_step_candidates(state, horizon)[1]

  def _n_step_candidates(self, state: FrameReplayState, horizon: int) -> tuple[jax.Array, jax.Array]:
    """:meth:`_candidates` for windows of ``horizon`` steps: logical positions ``lowest <= u <
    lowest + count`` whose slot ``u + horizon`` is written."""
    t = self.slots_per_env
    filled = jnp.where(state.full, t, state.index)
    lowest = jnp.where(state.full, self.stack_size - 1, 0)
    return lowest, jnp.maximum(filled - horizon - lowest, 0)

  def n_step_valid(self, state: FrameReplayState, env: jax.Array, slot: jax.Array, horizon: int) -> jax.Array:
    """Whether the n-step windows starting at ``slot`` (physical, int [...]) of ``env`` stay in one
    episode: no slot ``k + j`` (1 <= j <= horizon) is ``first`` unless a terminal (discount 0) at one
    of the slots ``k .. k + j - 1`` ended the episode before it (the n-step return stops there).

    A truncation, envpool's reset step or a pool restart puts an episode start in the window with
    no terminal before it: such a window is invalid (it would join two episodes).

    Args:
      state: the buffer.
      env: int [...] environment rows.
      slot: int [...] slots of the windows' first transitions.
      horizon: n >= 1.

    Returns:
      bool [...].
    """
    t = self.slots_per_env
    exp = state.experience
    ahead = (slot[..., None] + jnp.arange(horizon + 1)) % t     # [..., n + 1]: slots k .. k + n
    return _window_valid(exp.first[env[..., None], ahead[..., 1:]], exp.discount[env[..., None], ahead[..., :-1]])

  def gather_n_step(self, state: FrameReplayState, env: jax.Array, slot: jax.Array, horizon: int,
                    gamma: float) -> StackedTransition:
    r"""The n-step transitions starting at ``slot`` of ``env`` (int [B] each; physical slots).

    ``obs`` is the stack at slot k, ``next_obs`` the stack at slot k + n, ``reward`` the n-step return
    :math:`\sum_{j<n} \gamma^j (\prod_{i<j} d_{k+i}) r_{k+j}` and ``discount`` :math:`\prod_{j<n}
    d_{k+j}` (0 once a terminal is inside the window: later rewards are ignored; pass
    :math:`\gamma^n` as the TD loss's ``gamma``), as the replay of the paper's time computes them
    (``OutOfGraphReplayBuffer.sample_transition_batch``, dopamine/replay_memory/circular_replay_buffer.py:
    605-633 @ ccd6cee, now dopamine/tf/replay_memory/; the JAX ``TransitionAccumulator`` that later
    replaced it stores extra terminal transitions at an episode's end, a known bug there).
    ``weight`` is 1 (validity is :meth:`n_step_valid`'s job). Sutton & Barto, Sec. 7.1.

    Args:
      state: the buffer.
      env: int [B].
      slot: int [B], slots whose windows were checked (:meth:`n_step_valid`).
      horizon: n >= 1.
      gamma: the per-step discount.

    Returns:
      A :class:`StackedTransition`.
    """
    t = self.slots_per_env
    exp = state.experience
    oldest = jnp.where(state.full, state.index, 0)
    pos = (slot - oldest) % t                                    # logical position of k
    offsets = jnp.arange(-self.stack_size + 1, horizon + 1)      # the obs stack .. slot k + n
    logical = pos[:, None] + offsets[None, :]
    slots = (oldest + logical) % t
    rows = env[:, None]
    s = self.stack_size
    obs_at = slots[:, :s]
    next_at = slots[:, -s:]
    obs = _stack(exp.frame[rows, obs_at], exp.first[rows, obs_at] & (logical[:, :s] >= 0), logical[:, :s])
    next_obs = _stack(exp.frame[rows, next_at], exp.first[rows, next_at] & (logical[:, -s:] >= 0), logical[:, -s:])
    window = slots[:, s - 1:s - 1 + horizon]                      # slots k .. k + n - 1
    rewards, discounts = exp.reward[rows, window], exp.discount[rows, window]
    returns, _ = distributional.n_step_returns(rewards, discounts, gamma)
    return StackedTransition(obs=obs, action=exp.action[env, slot], reward=returns,
                             discount=jnp.prod(discounts.astype(jnp.float32), axis=1), next_obs=next_obs,
                             weight=jnp.ones(env.shape, jnp.float32))

  def sample_n_step(self, state: FrameReplayState, rng: jax.Array, horizon: int, gamma: float) -> StackedTransition:
    """``batch_size`` n-step transitions, uniform over the valid windows (:meth:`n_step_valid`).

    As :meth:`sample`: each row keeps the first valid of ``RETRIES`` uniform candidates, or gets
    ``weight = 0``; ``horizon = 1`` samples what :meth:`sample` samples.

    Args:
      state: the buffer.
      rng: a key.
      horizon: n >= 1 (``dqn.update_horizon``).
      gamma: the per-step discount.

    Returns:
      A :class:`StackedTransition` (:meth:`gather_n_step`).
    """
    check_int(horizon, "horizon", 1)
    check(not self.prioritized or horizon == self.horizon,
          f"sample_n_step(horizon={horizon}) on a prioritised replay made for {self.horizon}-step windows "
          "(make_frame_replay(..., horizon=))")
    held = self.num_n_step_transitions(state, horizon)
    if not isinstance(held, jax.core.Tracer) and int(held) < max(self.min_size, 1):
      raise InputError(f"cannot sample: the replay holds {int(held)} {horizon}-step transitions, "
                       f"sampling needs min_size={max(self.min_size, 1)}")
    t, b = self.slots_per_env, self.batch_size
    if self.prioritized:  # only valid windows hold a priority: every row is valid
      index, probability = priorities.sample(state.priorities, rng, b)
      batch = self.gather_n_step(state, index // t, index % t, horizon, gamma)
      return batch._replace(importance=priorities.importance_weights(probability), index=index)
    oldest = jnp.where(state.full, state.index, 0)
    lowest, count = self._n_step_candidates(state, horizon)
    k_env, k_pos = jax.random.split(rng)
    env = jax.random.randint(k_env, (RETRIES, b), 0, self.num_envs)
    slot = (oldest + lowest + jax.random.randint(k_pos, (RETRIES, b), 0, jnp.maximum(count, 1))) % t
    valid = self.n_step_valid(state, env, slot, horizon)
    pick = jnp.argmax(valid, axis=0)
    env, slot = env[pick, jnp.arange(b)], slot[pick, jnp.arange(b)]
    batch = self.gather_n_step(state, env, slot, horizon, gamma)
    return batch._replace(weight=jnp.any(valid, axis=0).astype(jnp.float32))


def _window_valid(first_after: jax.Array, discount: jax.Array) -> jax.Array:
  """``first_after [..., n]`` (slots k+1..k+n start an episode), ``discount [..., n]`` (of slots
  k..k+n-1) -> bool [...]: every episode start in the window has a terminal before it."""
  terminal_before = jnp.cumsum((discount == 0).astype(jnp.int32), axis=-1) > 0
  return ~jnp.any(first_after & ~terminal_before, axis=-1)


def _stack(frames: jax.Array, first: jax.Array, logical: jax.Array) -> jax.Array:
  """Frames ``[B, S, H, W]`` (oldest..newest) -> ``[B, H, W, S]``, zeroing every frame older than
  the newest episode start (a ``first`` at or after it, up to the newest) or than the oldest slot."""
  # later_first[:, i] > 0: some frame j > i of the stack is an episode's first
  starts = first.astype(jnp.int32)
  later_first = jnp.flip(jnp.cumsum(jnp.flip(starts, axis=1), axis=1), axis=1) - starts
  keep = (later_first == 0) & (logical >= 0)
  frames = jnp.where(keep[:, :, None, None], frames, jnp.zeros((), frames.dtype))
  return jnp.moveaxis(frames, 1, -1)


def make_frame_replay(capacity: int, num_envs: int, batch_size: int, min_size: int | None = None, *,
                      frame_shape: Sequence[int] = (84, 84), stack_size: int = 4,
                      names: dict[str, str] | None = None, devices: Sequence[jax.Device] | None = None,
                      copies: int = 1, prioritized: bool = False, horizon: int = 1) -> FrameReplay:
  """A frame-stacking uniform replay (see the module docstring).

  Args:
    capacity: slots held, all environments together (Dopamine Atari: 1_000_000); below 2**31.
    num_envs: environments adding one step each per :meth:`FrameReplay.add`.
    batch_size: transitions per :meth:`FrameReplay.sample` (Dopamine: 32).
    min_size: transitions before sampling is allowed; default ``batch_size``.
    frame_shape: (H, W) of one frame (Dopamine: 84x84).
    stack_size: frames per state (Dopamine: 4).
    names: what error messages call each argument, e.g. ``{"capacity": "dqn.replay_capacity"}``.
    devices: where the buffer will live, for the memory check (default: JAX's first device).
    copies: buffers each of ``devices`` holds (vmapped runs), for the memory check.
    prioritized: keep a priority per slot and sample in proportion to it (see the module docstring).
    horizon: the n of the n-step windows a prioritised replay draws (:meth:`FrameReplay.sample_n_step`);
      1 for one-step transitions (:meth:`FrameReplay.sample`).

  Returns:
    The :class:`FrameReplay`.

  Raises:
    InputError: a size that is not a positive int, a buffer too small for one batch, or one
      larger than the memory of ``devices`` (the bytes needed and available; checked here,
      before :meth:`FrameReplay.init` allocates anything).
  """
  n, min_size = checked_sizes(capacity, num_envs, batch_size, min_size, names, stack_size=stack_size)
  check(len(tuple(frame_shape)) == 2 and all(isinstance(s, int) and s >= 1 for s in frame_shape),
        f"frame_shape={frame_shape!r}; must be (height, width), two ints >= 1")
  per_env = capacity // num_envs
  need = stack_size + 1  # a full ring keeps stack_size - 1 old slots for stacking, and one next slot
  check(per_env >= need, f"{n['capacity']}={capacity} with {n['num_envs']}={num_envs} leaves {per_env} slots "
        f"per env; stacks of {stack_size} frames need >= {need}, so {n['capacity']} must be >= {need} * "
        f"{n['num_envs']}")
  held = num_envs * (per_env - stack_size)  # transitions that can be drawn when full
  if min_size > held:
    raise InputError(f"{n['min_size']}={min_size} is more than the replay can hold: {held} transitions "
                     f"({n['capacity']}={capacity}, {n['num_envs']}={num_envs}, {stack_size}-frame stacks)")
  errors.check_bool(prioritized, "prioritized")
  horizon = check_int(horizon, n.get("horizon", "horizon"), 1)
  check(per_env >= need + horizon - 1, f"{n['capacity']}={capacity} with {n['num_envs']}={num_envs} leaves {per_env} "
        f"slots per env; {horizon}-step windows of {stack_size}-frame stacks need >= {need + horizon - 1}")
  windows = num_envs * (per_env - stack_size + 1 - horizon)  # what a full replay holds to draw from
  if prioritized and batch_size > windows:  # as the transition replay: a batch never exceeds what is held
    raise InputError(f"{n['batch_size']}={batch_size} is larger than the prioritised replay's {windows} "
                     f"{horizon}-step transitions ({n['capacity']}={capacity}, {n['num_envs']}={num_envs}, "
                     f"{stack_size}-frame stacks); raise {n['capacity']} or lower {n['batch_size']}")
  replay = FrameReplay(capacity=per_env * num_envs, num_envs=num_envs, batch_size=batch_size, min_size=min_size,
                       frame_shape=tuple(frame_shape), stack_size=stack_size, prioritized=prioritized,
                       horizon=horizon)
  copies = check_int(copies, "copies")
  runs = f", {copies} replays per device" if copies > 1 else ""
  what = f"{n['capacity']}={capacity} ({replay.bytes_per_slot} bytes per slot{runs})"
  check_fits_memory(replay.nbytes * copies, what, f"lower {n['capacity']}", devices)
  return replay
