"""Batches of N MinAtar environments (gymnax) as pure, jit-able functions over pytrees.

MinAtar (Young & Tian, 2019) as Dopamine runs it for its MinAtar DQN configs
(dopamine/labs/environments/minatar/dqn_*.gin, minatar_env.py), which is what the Soft-MoE
paper's code base (Obando-Ceron et al., ICML 2024) would use:

* all 6 actions (``minatar.Environment.num_actions() == 6``), not gymnax's minimal set;
* sticky actions with probability 0.1, MinAtar's own default
  (``minatar.Environment(sticky_action_prob=0.1)``): with that probability the previously
  *executed* action is repeated. Dopamine's extra ``StickyMinAtarEnv`` wrapper (p=0.25) is off in
  those gin files. gymnax has no sticky actions, so they are implemented here;
* no episode time limit (``Runner.max_steps_per_episode = 1e8``), except Freeway's built-in
  2500-frame limit, which MinAtar reports as a *terminal* state. gymnax instead truncates
  Breakout/Asterix/Seaquest/SpaceInvaders at 1000 steps by default; ``max_episode_steps`` opts into
  such a limit, reported as ``truncated``.

Observations are ``bool [N, 10, 10, C]`` (one byte per cell; C = 4 Breakout/Asterix, 6 Space
Invaders, 7 Freeway, 10 Seaquest). gymnax yields 0/1 float32; a bool keeps the replay buffer 4x
smaller; networks cast with ``obs.astype(jnp.float32)``.

The environment object is static configuration (hashable, closed over by jit); all state is in
:class:`VecEnvState`, a pytree of arrays with leading axis N.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import gymnax
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check, check_bool, check_int, check_range, is_int

#: MinAtar games, short name (``config.env``) -> gymnax id.
ENV_IDS = {
    "asterix": "Asterix-MinAtar",
    "breakout": "Breakout-MinAtar",
    "freeway": "Freeway-MinAtar",
    "seaquest": "Seaquest-MinAtar",
    "space_invaders": "SpaceInvaders-MinAtar",
}
MINATAR_STICKY_ACTION_PROB = 0.1  # minatar.Environment default, kept by Dopamine's gin files.
FREEWAY_TIME_LIMIT = 2500         # minatar/environments/freeway.py `time_limit` (a terminal state).
_NO_LIMIT = 2**30                 # gymnax needs some max_steps_in_episode; never reached.


class EpisodeStats(NamedTuple):
  """Per-environment episode bookkeeping, each leaf shaped [N]."""

  episode_return: jax.Array  # float32: undiscounted return of the running episode so far.
  episode_length: jax.Array  # int32: steps of the running episode so far.
  last_return: jax.Array     # float32: return of the last completed episode (0 before any).
  last_length: jax.Array     # int32: length of the last completed episode (0 before any).
  completed: jax.Array       # int32: number of episodes completed so far.


class VecEnvState(NamedTuple):
  """State of N environments: gymnax state, last executed action (sticky actions), stats."""

  env_state: Any            # the gymnax EnvState (a flax struct), leaves with leading axis N.
  last_action: jax.Array    # int32 [N]: action executed at the previous step (0 at start).
  stats: EpisodeStats


@dataclasses.dataclass(frozen=True)
class MinAtarEnv:
  """N copies of one MinAtar game; ``reset``/``step`` are pure and jit/vmap/scan-able."""

  name: str
  gymnax_env: Any = dataclasses.field(repr=False)
  gymnax_params: Any = dataclasses.field(repr=False)
  sticky_action_prob: float
  max_episode_steps: int | None

  @property
  def num_actions(self) -> int:
    return int(self.gymnax_env.num_actions)

  @property
  def episode_length(self) -> int | None:
    """The length every episode has where the game fixes it (2500 in Freeway), else None."""
    return FREEWAY_TIME_LIMIT if self.name == "freeway" else None

  @property
  def obs_shape(self) -> tuple[int, int, int]:
    """Shape of one observation, [10, 10, C]."""
    return tuple(self.gymnax_env.obs_shape)

  def reset(self, rng: jax.Array, n: int) -> tuple[VecEnvState, jax.Array]:
    """Starts ``n`` episodes. Returns the state and ``obs: bool [n, 10, 10, C]``."""
    check_int(n, "number of environments n")
    obs, env_state = jax.vmap(self.gymnax_env.reset, in_axes=(0, None))(
        jax.random.split(rng, n), self.gymnax_params)
    # One array per leaf: a jitted step that donates the state cannot donate a buffer twice.
    zf, zi = (lambda: jnp.zeros([n], jnp.float32)), (lambda: jnp.zeros([n], jnp.int32))
    stats = EpisodeStats(zf(), zi(), zf(), zi(), zi())
    return VecEnvState(env_state, zi(), stats), obs.astype(jnp.bool_)

  def step(self, state: VecEnvState, actions: jax.Array, rng: jax.Array
           ) -> tuple[VecEnvState, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
    """Steps all N environments; finished ones restart at once (auto-reset).

    Args:
      state: from :meth:`reset` or a previous :meth:`step`.
      actions: int [N] in ``[0, num_actions)``. A float or bool dtype or another shape is
        refused (an :class:`InputError` at trace time), and so is a concrete action out of
        range. Inside jit the values cannot be checked: an out-of-range action is executed
        clipped to the range and its step's ``reward`` is NaN, so the episode return (and a
        TD loss learning from it) shows the bug instead of hiding it.
      rng: one key; split per environment here.

    Returns:
      ``(state, obs, reward, done, info)``: ``obs`` bool [N, 10, 10, C] is the first observation
      of the new episode where ``done``; ``reward`` float32 [N]; ``done`` bool [N] =
      terminated | truncated; ``info`` has ``terminated``, ``truncated`` (bool [N]) and
      ``discount`` (float32 [N], 0 only where terminated: truncation still bootstraps).
    """
    n = state.last_action.shape[0]
    actions = self._checked_actions(actions, n)
    valid = (actions >= 0) & (actions < self.num_actions)
    actions = jnp.clip(actions, 0, self.num_actions - 1).astype(jnp.int32)
    k_sticky, k_env = jax.random.split(rng)
    if self.sticky_action_prob > 0:
      repeat = jax.random.uniform(k_sticky, [n]) < self.sticky_action_prob
      actions = jnp.where(repeat, state.last_action, actions)
    out = jax.vmap(self.gymnax_env.step, in_axes=(0, 0, 0, None))(
        jax.random.split(k_env, n), state.env_state, actions, self.gymnax_params)
    length = state.stats.episode_length + 1
    obs, env_state, reward, terminated, truncated = split_step_output(out, length, self.gymnax_params)
    if self.name == "freeway":  # gymnax truncates at 2500; MinAtar calls it a terminal state.
      at_limit = length >= FREEWAY_TIME_LIMIT
      terminated = terminated | at_limit
      truncated = truncated & ~at_limit
    done = terminated | truncated
    reward = jnp.where(valid, reward.astype(jnp.float32), jnp.nan)  # an out-of-range action (traced)
    stats = _update_stats(state.stats, reward, length, done)
    info = dict(terminated=terminated, truncated=truncated,
                discount=1.0 - terminated.astype(jnp.float32))
    return VecEnvState(env_state, actions, stats), obs.astype(jnp.bool_), reward, done, info

  def _checked_actions(self, actions: Any, n: int) -> jax.Array:
    """``actions`` as an integer array [n]; dtype and shape are static, so checked at trace time."""
    if not isinstance(actions, (jax.Array, np.ndarray)):
      actions = np.asarray(actions)
    check(jnp.issubdtype(actions.dtype, jnp.integer),
          f"actions of dtype {actions.dtype}; must be integers in [0, {self.num_actions}) "
          "(a float or bool action would be cast to some other action)")
    check(actions.shape == (n,), f"actions of shape {tuple(actions.shape)}; must be [{n}], one per environment")
    if not isinstance(actions, jax.core.Tracer):  # concrete (outside jit): check the values too
      values = np.asarray(actions)  # numpy: a concrete array closed over by jit is not traced
      low, high = int(values.min()), int(values.max())
      check(low >= 0 and high < self.num_actions,
            f"actions in [{low}, {high}]; must be in [0, {self.num_actions}) ({self.name} has "
            f"{self.num_actions} actions)")
    return jnp.asarray(actions)


def split_step_output(out: tuple, length: jax.Array, params: Any
                      ) -> tuple[Any, Any, jax.Array, jax.Array, jax.Array]:
  """gymnax's ``step`` output as ``(obs, state, reward, terminated, truncated)``, for both signatures.

  gymnax >= 1.0 returns ``(obs, state, reward, terminated, truncated, info)``; gymnax 0.0.x returns
  ``(obs, state, reward, done, info)`` with ``done`` = game over or ``params.max_steps_in_episode``
  reached. Both auto-reset. For 0.0.x the time limit is read back from ``length`` (steps of the
  episode including this one): a ``done`` at the limit counts as truncated, so a game that ends
  on exactly the limit's step bootstraps there (gymnax 1.0 would call it terminated too).

  Args:
    out: the (vmapped) ``gymnax_env.step`` output.
    length: int [N], the episode lengths after this step.
    params: the gymnax ``EnvParams`` the step ran with.

  Returns:
    ``(obs, env_state, reward, terminated, truncated)``, the last two bool [N].
  """
  if len(out) == 6:
    obs, env_state, reward, terminated, truncated, _ = out
    return obs, env_state, reward, terminated, truncated
  if len(out) == 5:
    obs, env_state, reward, done, _ = out
    truncated = done & (length >= params.max_steps_in_episode)
    return obs, env_state, reward, done & ~truncated, truncated
  raise TypeError(f"gymnax step returned {len(out)} values; jaxlab.rl.envs knows the 5 of gymnax 0.0.x "
                  "and the 6 of gymnax >= 1.0")


def _update_stats(stats: EpisodeStats, reward: jax.Array, length: jax.Array,
                  done: jax.Array) -> EpisodeStats:
  ret = stats.episode_return + reward
  return EpisodeStats(
      episode_return=jnp.where(done, 0.0, ret),
      episode_length=jnp.where(done, 0, length),
      last_return=jnp.where(done, ret, stats.last_return),
      last_length=jnp.where(done, length, stats.last_length),
      completed=stats.completed + done.astype(jnp.int32))


def make_env(name: str, *, sticky_action_prob: float = MINATAR_STICKY_ACTION_PROB,
             full_action_set: bool = True, max_episode_steps: int | None = None) -> MinAtarEnv:
  """A MinAtar game by short name, set up as Dopamine's MinAtar DQN runs it (see module doc).

  Args:
    name: one of ``ENV_IDS`` ("asterix", "breakout", "freeway", "seaquest", "space_invaders").
    sticky_action_prob: probability of repeating the previous executed action (MinAtar: 0.1).
    full_action_set: 6 actions as in MinAtar/Dopamine; False gives gymnax's minimal set.
    max_episode_steps: optional time limit, reported as ``truncated`` (None: no limit).
  """
  if not isinstance(name, str) or name not in ENV_IDS:
    raise InputError(f"unknown MinAtar environment {name!r}; valid: {', '.join(sorted(ENV_IDS))}")
  check_range(sticky_action_prob, "sticky_action_prob", 0, 1, high_open=True)
  check_bool(full_action_set, "full_action_set")
  check(max_episode_steps is None or (is_int(max_episode_steps) and 1 <= max_episode_steps <= _NO_LIMIT),
        f"max_episode_steps={max_episode_steps!r}; must be None or an int in [1, 2**30]")
  env, params = gymnax.make(ENV_IDS[name], use_minimal_action_set=not full_action_set)
  limit = _NO_LIMIT if max_episode_steps is None else max_episode_steps
  if name == "freeway":
    limit = min(limit, FREEWAY_TIME_LIMIT)
  params = params.replace(max_steps_in_episode=limit)
  return MinAtarEnv(name=name, gymnax_env=env, gymnax_params=params,
                    sticky_action_prob=float(sticky_action_prob),
                    max_episode_steps=max_episode_steps)

