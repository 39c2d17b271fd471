"""Batches of N gymnax environments as pure, jit-able functions over pytrees.

Any gymnax environment by its id (``gymnax.registered_envs``: "CartPole-v1", "Acrobot-v1",
"Catch-bsuite", ...) or one of your own (registered in :data:`ENVS`, see ``jaxlab.rl.env_names``)
runs with gymnax's own dynamics, default ``EnvParams`` and time limit
(``params.max_steps_in_episode``, reported as ``truncated``).

MinAtar games (Young & Tian, 2019), by short name ("breakout", ...) or gymnax id
("Breakout-MinAtar", ...), run as Dopamine runs them for its MinAtar DQN configs
(dopamine/labs/environments/minatar/dqn_*.gin, minatar_env.py), which is what the Soft-MoE
paper's code base (Obando-Ceron et al., ICML 2024) would use:

* all 6 actions (``minatar.Environment.num_actions() == 6``), not gymnax's minimal set;
* sticky actions with probability 0.1, MinAtar's own default
  (``minatar.Environment(sticky_action_prob=0.1)``): with that probability the previously
  *executed* action is repeated. Dopamine's extra ``StickyMinAtarEnv`` wrapper (p=0.25) is off in
  those gin files. gymnax has no sticky actions, so they are implemented here (any environment
  can have them: ``sticky_action_prob``; 0 by default outside MinAtar);
* no episode time limit (``Runner.max_steps_per_episode = 1e8``), except Freeway's built-in
  2500-frame limit, which MinAtar reports as a *terminal* state. gymnax instead truncates
  Breakout/Asterix/Seaquest/SpaceInvaders at 1000 steps by default; ``max_episode_steps`` opts into
  such a limit, reported as ``truncated``.

Observations (``obs_shape``, ``obs_dtype``): MinAtar's are ``bool [N, 10, 10, C]`` (one byte per
cell; C = 4 Breakout/Asterix, 6 Space Invaders, 7 Freeway, 10 Seaquest): gymnax yields 0/1
float32; a bool keeps the replay buffer 4x smaller. Elsewhere a vector ``[F]`` stays a vector, a
2-D grid ``[H, W]`` (Catch, DeepSea) becomes an image of one channel ``[H, W, 1]``, an image
``[H, W, C]`` stays one, and a scalar becomes ``[1]``, or, from a ``Discrete(n)`` observation
space (FrozenLake), a one-hot vector ``[n]``. Bool observations stay bool; integer and float ones
become float32 (not rescaled). Networks cast with ``obs.astype(jnp.float32)``. Any other shape, or
a pytree of observations, is refused in one line.

The environment object is static configuration (hashable, closed over by jit); all state is in
:class:`VecEnvState`, a pytree of arrays with leading axis N.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check, check_bool, check_int, check_range, is_int
from jaxlab.registry import optional_imports
from jaxlab.rl.env_names import ENV_IDS, ENVS, EnvSpec, is_builtin, resolve  # noqa: F401 (ENV_IDS, ENVS: re-exported)

MINATAR_STICKY_ACTION_PROB = 0.1  # minatar.Environment default, kept by Dopamine's gin files.
FREEWAY_TIME_LIMIT = 2500         # minatar/environments/freeway.py `time_limit` (a terminal state).
_NO_LIMIT = 2**30                 # gymnax needs some max_steps_in_episode; never reached.
# How the observations of one environment become what the network sees (see the module doc).
_LAYOUTS = ("as_is", "add_channel", "scalar", "one_hot")


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
class GymnaxEnv:
  """N copies of one gymnax environment; ``reset``/``step`` are pure and jit/vmap/scan-able.

  Built by :func:`make_env`. ``terminal_limit``: a step count at which the game itself ends its
  episodes as a terminal state (Freeway's 2500), else None. ``obs_layout`` / ``obs_dtype`` /
  ``one_hot_size`` say how gymnax's observations become ``obs_shape`` (see the module doc).
  """

  name: str
  gymnax_env: Any = dataclasses.field(repr=False)
  gymnax_params: Any = dataclasses.field(repr=False)
  sticky_action_prob: float
  max_episode_steps: int | None
  terminal_limit: int | None = None
  obs_layout: str = "as_is"
  obs_dtype: str = "bool"
  one_hot_size: int = 0
  obs_shape: tuple[int, ...] = ()  # one observation's shape, as the network sees it
  num_actions: int = 0

  @property
  def episode_length(self) -> int | None:
    """The length every episode has where the game fixes it (2500 in Freeway), else None."""
    return self.terminal_limit

  @property
  def time_limit(self) -> int | None:
    """The step at which episodes are truncated (``params.max_steps_in_episode``, bootstrapped), else None:
    MinAtar without ``max_episode_steps`` (and Freeway's 2500, a terminal state) has none.

    >>> from jaxlab.rl.envs import make_env
    >>> make_env("CartPole-v1").time_limit, make_env("breakout").time_limit, make_env("freeway").time_limit
    (500, None, None)
    """
    limit = getattr(self.gymnax_params, "max_steps_in_episode", None)
    if limit is None or int(limit) >= _NO_LIMIT or (self.terminal_limit is not None and limit >= self.terminal_limit):
      return None
    return int(limit)

  def _observation(self, obs: jax.Array) -> jax.Array:
    """gymnax's batched observations [N, ...] as ``[N, *obs_shape]`` of ``obs_dtype``."""
    if self.obs_layout == "one_hot":
      return jax.nn.one_hot(obs, self.one_hot_size, dtype=self.obs_dtype)
    if self.obs_layout == "add_channel":
      obs = obs[..., None]
    elif self.obs_layout == "scalar":
      obs = obs[:, None]
    return obs.astype(self.obs_dtype)

  def reset(self, rng: jax.Array, n: int) -> tuple[VecEnvState, jax.Array]:
    """Starts ``n`` episodes. Returns the state and ``obs [n, *obs_shape]`` (``obs_dtype``)."""
    check_int(n, "number of environments n")
    obs, env_state = jax.vmap(self.gymnax_env.reset, in_axes=(0, None))(
        jax.random.split(rng, n), self.gymnax_params)
    # One array per leaf: a jitted step that donates the state cannot donate a buffer twice.
    zf, zi = (lambda: jnp.zeros([n], jnp.float32)), (lambda: jnp.zeros([n], jnp.int32))
    stats = EpisodeStats(zf(), zi(), zf(), zi(), zi())
    return VecEnvState(env_state, zi(), stats), self._observation(obs)

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
      ``(state, obs, reward, done, info)``: ``obs [N, *obs_shape]`` is the first observation
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
    terminated, truncated = jnp.asarray(terminated).astype(jnp.bool_), jnp.asarray(truncated).astype(jnp.bool_)
    if self.terminal_limit is not None:  # Freeway: gymnax truncates at 2500; MinAtar calls it a terminal state.
      at_limit = length >= self.terminal_limit
      terminated = terminated | at_limit
      truncated = truncated & ~at_limit
    done = terminated | truncated
    reward = jnp.where(valid, reward.astype(jnp.float32), jnp.nan)  # an out-of-range action (traced)
    stats = _update_stats(state.stats, reward, length, done)
    info = dict(terminated=terminated, truncated=truncated,
                discount=1.0 - terminated.astype(jnp.float32))
    return VecEnvState(env_state, actions, stats), self._observation(obs), reward, done, info

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


#: The former name of :class:`GymnaxEnv` (it ran MinAtar games only).
MinAtarEnv = GymnaxEnv


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


def make_env(name: str, *, sticky_action_prob: float | None = None, full_action_set: bool = True,
             max_episode_steps: int | None = None, where: str = "") -> GymnaxEnv:
  """A gymnax environment by name: a MinAtar game (set up as Dopamine's MinAtar DQN runs it), any
  gymnax id, or one registered in :data:`ENVS` (see the module doc).

  Args:
    name: a MinAtar game, ``ENV_IDS``' short name ("breakout", ...) or gymnax id
      ("Breakout-MinAtar", ...); any other id of ``gymnax.registered_envs`` ("CartPole-v1", ...);
      or a name registered in :data:`ENVS`.
    sticky_action_prob: probability of repeating the previous executed action; None: the
      environment's convention (MinAtar's 0.1, else 0).
    full_action_set: MinAtar: 6 actions as in MinAtar/Dopamine; False gives gymnax's minimal set.
      Other environments have one action set (False is refused).
    max_episode_steps: a time limit, reported as ``truncated``. None: MinAtar has none (but
      Freeway's own 2500 steps), other environments keep their ``params.max_steps_in_episode``.
    where: the config key ``name`` came from, for messages (e.g. ``" (env.name)"``).

  Raises:
    InputError: an unknown name (the valid ones and the closest matches), a bad option, an
      environment whose actions are not discrete or whose observations have a shape the value
      networks do not take; one line each.
  """
  if sticky_action_prob is not None:
    check_range(sticky_action_prob, "sticky_action_prob", 0, 1, high_open=True)
  check_bool(full_action_set, "full_action_set")
  check(max_episode_steps is None or (is_int(max_episode_steps) and 1 <= max_episode_steps <= _NO_LIMIT),
        f"max_episode_steps={max_episode_steps!r}; must be None or an int in [1, 2**30]")
  spec = resolve(name, where, full_action_set=full_action_set)
  check(spec.minatar or full_action_set,
        f"full_action_set=False{where and ' (env.full_action_set)'} for {spec.name!r}: only MinAtar games have a "
        "minimal action set")
  if spec.minatar:
    return _minatar(spec, MINATAR_STICKY_ACTION_PROB if sticky_action_prob is None else sticky_action_prob,
                    max_episode_steps)
  params = spec.params
  if max_episode_steps is not None:
    check(hasattr(params, "max_steps_in_episode") and hasattr(params, "replace"),
          f"max_episode_steps={max_episode_steps} for {spec.name!r}{where}: its params have no "
          "max_steps_in_episode to set")
    params = params.replace(max_steps_in_episode=max_episode_steps)
  layout, dtype, size, shape = _observation_format(spec, params, where)
  num_actions = _discrete_actions(spec, params, where)
  if not is_builtin(spec.name):  # your own environment, first used here: its step, traced once
    _check_own_step(spec, params, where)
  return GymnaxEnv(name=spec.name, gymnax_env=spec.env, gymnax_params=params,
                   sticky_action_prob=float(sticky_action_prob or 0.0), max_episode_steps=max_episode_steps,
                   obs_layout=layout, obs_dtype=dtype, one_hot_size=size, obs_shape=shape,
                   num_actions=num_actions)


def _minatar(spec: EnvSpec, sticky_action_prob: float, max_episode_steps: int | None) -> GymnaxEnv:
  """A MinAtar game with Dopamine's conventions: bool observations, no time limit but Freeway's."""
  limit = _NO_LIMIT if max_episode_steps is None else max_episode_steps
  freeway = spec.name == "freeway"
  if freeway:
    limit = min(limit, FREEWAY_TIME_LIMIT)
  params = spec.params.replace(max_steps_in_episode=limit)
  return GymnaxEnv(name=spec.name, gymnax_env=spec.env, gymnax_params=params,
                   sticky_action_prob=float(sticky_action_prob), max_episode_steps=max_episode_steps,
                   terminal_limit=FREEWAY_TIME_LIMIT if freeway else None, obs_layout="as_is", obs_dtype="bool",
                   obs_shape=tuple(spec.env.obs_shape), num_actions=int(spec.env.num_actions))


def _discrete_actions(spec: EnvSpec, params: Any, where: str) -> int:
  """The number of actions of a ``Discrete`` action space; any other space is one line."""
  space = spec.env.action_space(params)
  n = getattr(space, "n", None)
  check(type(space).__name__ == "Discrete",
        f"environment {spec.name!r}{where} has a {type(space).__name__} action space; DQN needs discrete actions "
        "(a gymnax spaces.Discrete)")
  check(is_int(n) and n >= 1, f"environment {spec.name!r}{where} has a Discrete({n!r}) action space; DQN needs at "
        "least 1 action (action_space(params).n >= 1)")
  return int(n)


def _check_own_step(spec: EnvSpec, params: Any, where: str) -> None:
  """Your environment's ``step_env`` traced once (``jax.eval_shape``: nothing runs) against gymnax's contract:
  ``(obs, state, reward, done, info)``, ``obs`` of the shape and dtype ``reset`` gives (gymnax's auto-reset
  selects between them), a scalar ``reward`` and ``done`` per step. One line per breach, instead of an
  error from inside gymnax's ``step`` or a reward silently broadcast over the batch."""
  with optional_imports(f"{__name__}.make_env"):
    from gymnax.environments import environment  # noqa: PLC0415 (gymnax's public base class)
  what = f"environment {spec.name!r}{where}"
  key = jax.random.key(0)
  obs, state = jax.eval_shape(spec.env.reset_env, key, params)
  if type(spec.env).step_env is environment.Environment.step_env:
    return  # a class that overrides step itself: make_env's step reads it (5 or 6 values)
  out = jax.eval_shape(spec.env.step_env, key, state, jnp.zeros((), jnp.int32), params)
  got = f"{len(out)} values" if isinstance(out, tuple) else f"a {type(out).__name__}"
  check(isinstance(out, tuple) and len(out) == 5,
        f"{what}: step_env returned {got}; a gymnax step_env returns 5: (obs, state, reward, done, info)")
  step_obs, _, reward, done, _ = out
  same = jax.tree.structure(step_obs) == jax.tree.structure(obs) and all(
      (a.shape, a.dtype) == (b.shape, b.dtype) for a, b in zip(jax.tree.leaves(step_obs), jax.tree.leaves(obs)))
  shapes = lambda tree: ", ".join(f"{a.dtype}{list(a.shape)}" for a in jax.tree.leaves(tree))  # noqa: E731
  check(same, f"{what}: step_env's observations are {shapes(step_obs)} but reset_env's are {shapes(obs)}; they must "
        "be the same (gymnax's auto-reset puts a reset's observation in their place)")
  for name, value in (("reward", reward), ("done", done)):
    shape = tuple(getattr(value, "shape", ()))
    check(shape == (), f"{what}: step_env's {name} has shape {shape}; must be a scalar (one per step: the batch of "
          "environments is jaxlab's vmap)")


def _observation_format(spec: EnvSpec, params: Any, where: str) -> tuple[str, str, int, tuple[int, ...]]:
  """``(layout, dtype, one_hot_size, obs_shape)`` from one traced reset (no environment is run)."""
  obs = jax.eval_shape(spec.env.reset, jax.random.key(0), params)[0]
  what = f"environment {spec.name!r}{where}"
  if not isinstance(obs, jax.ShapeDtypeStruct):
    raise InputError(f"{what} observes a {type(obs).__name__} of arrays; the value networks take one array: "
                     "a vector [F], a grid [H, W] or an image [H, W, C]")
  dtype = "bool" if obs.dtype == jnp.bool_ else "float32"
  shape = tuple(obs.shape)
  if not shape:
    space = spec.env.observation_space(params)
    n = getattr(space, "n", None)
    if type(space).__name__ == "Discrete" and is_int(n) and jnp.issubdtype(obs.dtype, jnp.integer):
      check(n >= 1, f"{what} has a Discrete({n}) observation space; one-hot observations need n >= 1")
      return "one_hot", "float32", int(n), (int(n),)
    return "scalar", dtype, 0, (1,)
  check(len(shape) <= 3 and math.prod(shape) >= 1,
        f"{what} has observations of shape {shape}; the value networks take a vector [F], a grid [H, W] "
        "(as one channel) or an image [H, W, C]")
  if len(shape) == 2:
    return "add_channel", dtype, 0, (*shape, 1)
  return "as_is", dtype, 0, shape
