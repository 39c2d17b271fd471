"""Atari 2600 games through envpool (or ale-py), preprocessed as Dopamine does, stepped from inside jit.

The Soft-MoE paper's domain (Obando-Ceron et al., ICML 2024) with Dopamine's Atari setup
(Machado et al., JAIR 2018), given to envpool's C++ pool (its ``envpool_assets`` package ships
the ROMs). Each envpool option beside Dopamine's code (google/dopamine @ 5873f54,
``dopamine/discrete_domains/atari_lib.py``):

* ``img_height = img_width = 84``, ``gray_scale``, ``use_inter_area_resize``: the ALE's grayscale
  palette resized with area interpolation (``AtariPreprocessing``, atari_lib.py:336-372);
* ``frame_skip = 4`` with the max of the last two frames (atari_lib.py:305-331); the skip loop
  stops at game over in both;
* ``repeat_action_probability = 0.25``: sticky actions in the emulator
  (``create_atari_environment(sticky_actions=True)``, atari_lib.py:122);
* ``episodic_life = False``, ``zero_discount_on_life_loss = False``: a lost life ends nothing in
  the pool (``terminal_on_life_loss=False``, atari_lib.py:184); each step reports the lives left
  (``AtariStep.lives``, envpool's ``info["lives"]``), from which the ``dqn_atari`` task implements
  Dopamine's ``terminal_on_life_loss=True`` itself (``env.terminal_on_life_loss``): the game goes on,
  only the agent's episode ends;
* ``reward_clip = False``: the agent clips rewards itself (Dopamine's ``Runner``), and returns are
  game scores;
* ``use_fire_reset = False``, ``noop_max = 1``: Dopamine presses nothing at reset; envpool always
  acts at least once at reset (``noop = dist(0, noop_max - 1) + 1``, envpool/atari/atari_env.h),
  so each episode starts after one NOOP emulator frame (1/60 s) that Dopamine does not take;
* ``stack_num = 1``: frames are stacked on the device (:func:`push_frame`) and in the replay
  (:mod:`jaxlab.rl.replay_frames`), zero-padded at episode starts as Dopamine's agent does;
* ``full_action_space = False``: the game's minimal action set (gymnasium's ``ALE/<Game>-v5``
  default, which Dopamine makes, atari_lib.py:121-137);
* ``max_episode_steps``: envpool ends an episode after that many agent steps and reports it as
  truncated. Dopamine's episodes end at 100,000 emulator frames = 25,000 agent steps
  (``max_num_frames_per_episode=100_000``, atari_lib.py:134), reported as game over, hence
  terminal (atari_lib.py:311-312); the ``dqn_atari`` task does the same by default.

Backends (``make_atari(backend=...)``, the config's ``env.backend``; :data:`ATARI_BACKENDS`):
``"envpool"`` (the default, above) or ``"ale_py"``, ale-py's vector environment with the same
preprocessing and no frame at reset (:mod:`jaxlab.rl.atari_ale`; its ROMs come in a 3 MB wheel,
envpool's in 61 MB plus MuJoCo assets). Both give pools with the interface used here: ``reset()``,
``step(actions)`` (observations ``[N, 1, 84, 84]``, rewards, terminated, truncated, info with
``"env_id"`` and ``"lives"``), ``xla()`` and ``action_space.n``.

Stepping: the pools are host objects. ``step_via="xla"`` calls the backend's XLA FFI targets
(``pool.xla()``: envpool's send + receive as two custom calls, ale-py's one) inside the jitted
program; XLA's SPMD partitioner refuses a side-effecting custom call without a sharding, so this
needs a program on one device. ``step_via="callback"`` calls the pool's Python ``step`` through
``jax.experimental.io_callback``, which JAX runs on one device of any mesh. Both give the same
numbers (tested).

Vmapped runs: one pool holds ``len(seeds) x num_envs`` environments; :meth:`AtariEnv.step` and
:meth:`AtariEnv.first_frames` are ``custom_vmap`` functions whose batching rule steps the whole
pool once for all runs (run ``r`` owns environments ``r * num_envs ...``), so the trainer's vmap
over runs becomes one pool step per agent step. Environment ``i`` of the run seeded ``s`` is seeded
``(s * num_envs + i) mod 2**31`` whatever the other runs are.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check, check_bool, check_choice, check_range, is_int
from jaxlab.registry import Registry, optional_imports

FRAME_SHAPE = (84, 84)
STACK_SIZE = 4                    # Dopamine's NATURE_DQN_STACK_SIZE
STICKY_ACTION_PROB = 0.25         # Machado et al. 2018; atari_lib.py:122
FRAME_SKIP = 4
DOPAMINE_EPISODE_STEPS = 25_000   # 100,000 emulator frames / frame skip 4 (atari_lib.py:134)
STEP_VIA = ("xla", "callback")
_FIXED_OPTIONS = dict(img_height=FRAME_SHAPE[0], img_width=FRAME_SHAPE[1], gray_scale=True, stack_num=1,
                      episodic_life=False, zero_discount_on_life_loss=False, reward_clip=False,
                      use_fire_reset=False, noop_max=1, use_inter_area_resize=True)


#: What needs envpool, in the one line a missing one gives (as ``ATARI_BACKENDS`` names a backend).
_ENVPOOL = "Atari backend 'envpool'"


class EnvpoolBackend:
  """envpool 1.2.5 (its ``envpool_assets`` package ships the ROMs): the ``"envpool"`` backend."""

  name = "envpool"
  reinstall = "reinstall envpool / envpool_assets"

  def games(self) -> list[str]:
    """The games this envpool install has, as Dopamine names them ("Pong", "SpaceInvaders")."""
    with optional_imports(_ENVPOOL):
      from envpool.registration import registry
    return sorted(task[:-3] for task, (module, _, _) in registry.specs.items()
                  if module == "envpool.atari" and task.endswith("-v5"))

  def rom_path(self, game: str) -> str:
    """Where envpool looks for ``game``'s ROM (the file need not exist)."""
    with optional_imports(_ENVPOOL):
      from envpool.registration import registry
    _, _, kwargs = registry.specs[f"{game}-v5"]
    return os.path.join(kwargs["base_path"], "atari", "roms", f"{kwargs['task']}.bin")

  def open(self, game: str, *, seeds: Sequence[int], frame_skip: int, sticky_action_prob: float,
           max_episode_steps: int, full_action_space: bool, num_threads: int) -> Any:
    """An envpool pool of ``len(seeds)`` environments (environment ``i`` seeded ``seeds[i]``), not yet reset."""
    with optional_imports(_ENVPOOL):
      import envpool
    return envpool.make(f"{game}-v5", env_type="gymnasium", num_envs=len(seeds), batch_size=len(seeds),
                        seed=list(seeds), num_threads=num_threads, frame_skip=frame_skip,
                        repeat_action_probability=float(sticky_action_prob), max_episode_steps=max_episode_steps,
                        full_action_space=full_action_space, **_FIXED_OPTIONS)


#: The emulator backends by name (``make_atari(backend=...)``, ``env.backend``): classes whose
#: instances list the games (``games()``), find a ROM (``rom_path(game)``) and open a pool
#: (``open(game, seeds=..., ...)``, see :class:`jaxlab.rl.atari.EnvpoolBackend`). "ale_py" is
#: :class:`jaxlab.rl.atari_ale.AleBackend`, imported on first use.
ATARI_BACKENDS: Registry = Registry("Atari backend")
ATARI_BACKENDS.register("envpool")(EnvpoolBackend)
ATARI_BACKENDS.register_lazy("ale_py", "jaxlab.rl.atari_ale:AleBackend")


def get_backend(name: Any = "envpool", key: str = "backend") -> Any:
  """The backend ``name`` (an instance of its :data:`ATARI_BACKENDS` class); ``key`` names the setting.

  Raises:
    InputError: an unknown name, or a backend whose package is not installed (one line naming it).
  """
  check_choice(name, key, tuple(ATARI_BACKENDS.names()))
  return ATARI_BACKENDS.get(name)()


def available_games(backend: str = "envpool") -> list[str]:
  """Atari games the backend has ROMs for, as Dopamine names them ("Pong", "SpaceInvaders")."""
  return get_backend(backend).games()


def rom_path(game: str, backend: str = "envpool") -> str:
  """Where the backend looks for ``game``'s ROM (the file need not exist)."""
  return get_backend(backend).rom_path(game)


def check_game(name: Any, key: str = "name", backend: str = "envpool") -> None:
  """InputError unless the backend has the game ``name`` and its ROM; ``key`` names the setting."""
  b = get_backend(backend)
  games = b.games()
  if not isinstance(name, str) or name not in games:
    close = [g for g in games if isinstance(name, str) and g.lower() == name.lower().replace("_", "")]
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InputError(f"unknown Atari game {name!r} ({key}); {hint}{b.name} has {len(games)}, e.g. "
                     f"{', '.join(games[:12])}, ... (jaxlab.rl.atari.available_games("
                     f"{'' if b.name == 'envpool' else repr(b.name)}))")
  path = b.rom_path(name)
  if not os.path.isfile(path):
    raise InputError(f"no ROM for Atari game {name!r} ({key}) in {b.name}'s assets: {path} is missing "
                     f"({b.reinstall})")


class AtariStep(NamedTuple):
  """One agent step of every environment (leading axis: environments)."""

  frame: jax.Array       # uint8 [N, 84, 84]: the new frame (an episode's first after a reset step)
  reward: jax.Array      # float32 [N]: game score of the step's emulator frames (unclipped)
  terminated: jax.Array  # bool [N]: game over
  truncated: jax.Array   # bool [N]: the episode reached max_episode_steps
  lives: jax.Array       # int32 [N]: the ALE's lives left after the step (the pool's info["lives"])


@dataclasses.dataclass(frozen=True, eq=False)
class AtariEnv:
  """``len(seeds)`` runs x ``num_envs`` environments of one game in one pool.

  Compared and hashed by identity (a pool is a live host object). Environments auto-reset as
  envpool and ale-py do (gymnasium's next-step mode): the step after a done step is a *reset step*, whose
  action is ignored and whose frame is the next episode's first (reward 0, not done).

  Attributes:
    name: the game ("Pong").
    num_envs: environments per run.
    seeds: one per run; environment ``i`` of run ``s`` is seeded ``(s * num_envs + i) mod 2**31``.
    num_actions: the minimal (or full) action set's size.
    step_via: "xla" (the backend's FFI custom calls in the program) or "callback" (``io_callback``).
    epoch: a random nonzero id of this pool: states made with another pool (a checkpoint from an
      earlier process) are recognised by it and restart their episodes.
    initial: uint8 [runs * num_envs, 84, 84], the frames the pool was reset to when made.
    pool: the backend's pool (a host object).
    backend: the :data:`ATARI_BACKENDS` name that made the pool.
  """

  name: str
  num_envs: int
  seeds: tuple[int, ...]
  num_actions: int
  step_via: str
  epoch: int
  initial: np.ndarray = dataclasses.field(repr=False)
  pool: Any = dataclasses.field(repr=False)
  backend: str = "envpool"

  @property
  def num_runs(self) -> int:
    """Vmapped runs the pool serves (``len(seeds)``)."""
    return len(self.seeds)

  @property
  def frame_shape(self) -> tuple[int, int]:
    """One preprocessed frame's shape, ``(84, 84)``."""
    return FRAME_SHAPE

  def __post_init__(self):
    n, r = self.num_envs, self.num_runs
    flat = self._xla_step() if self.step_via == "xla" else self._callback_step()
    unbatched = (f"this pool holds {r} runs x {n} environments; its functions run vmapped over the "
                 f"{r} runs (the trainer's run axis), one call steps them all")

    # custom_vmap traces the unbatched function even where it is vmapped (its output types are
    # one run's), so a pool of several runs cannot refuse an unbatched call at trace time; it
    # fails when run instead (a bug).
    def refuse(shapes):
      def fail(*_):
        raise RuntimeError(unbatched)
      return lambda *args: jax.pure_callback(fail, shapes, *args)

    one_run = step_shapes(n)

    @jax.custom_batching.custom_vmap
    def step(actions):
      actions = self._checked(actions, n)
      return flat(actions) if r == 1 else refuse(one_run)(actions)

    @step.def_vmap
    def step_runs(axis_size, in_batched, actions):
      check(axis_size == r, f"vmapped over {axis_size} runs; the pool holds {r}")
      actions = self._checked(actions, (r, n) if in_batched[0] else n)
      out = flat(jnp.broadcast_to(actions, (r, n)).reshape(r * n))
      out = jax.tree.map(lambda x: x.reshape(r, n, *x.shape[1:]), out)
      return out, jax.tree.map(lambda _: True, out)

    @jax.custom_batching.custom_vmap
    def first_frames(token):
      if r == 1:
        return jnp.asarray(self.initial)
      return refuse(jax.ShapeDtypeStruct((n, *FRAME_SHAPE), jnp.uint8))(token)

    @first_frames.def_vmap
    def first_frames_runs(axis_size, in_batched, token):
      del in_batched, token
      check(axis_size == r, f"vmapped over {axis_size} runs; the pool holds {r}")
      return jnp.asarray(self.initial).reshape(r, n, *FRAME_SHAPE), True

    object.__setattr__(self, "_step", step)
    object.__setattr__(self, "_first_frames", first_frames)

  def step(self, actions: jax.Array) -> AtariStep:
    """Steps every environment one agent step (``frame_skip`` emulator frames) with ``actions``
    (int [num_envs], in ``[0, num_actions)``; under vmap over the runs, [runs, num_envs]).

    The dtype and shape are checked at trace time, the values of concrete actions too; traced
    values cannot be checked (the pool would index its action set with them), and the ``dqn_atari``
    task makes them in range by construction.
    """
    if self.num_runs == 1 and not isinstance(actions, jax.core.Tracer):  # concrete: values can be checked
      actions = self._checked(actions, self.num_envs)
    return self._step(actions)

  def first_frames(self, token: jax.Array) -> jax.Array:
    """uint8 [num_envs, 84, 84]: the frames the pool started from.

    ``token``: any array that differs over the vmapped runs (e.g. the run's key data); only its
    vmapped axis is used. vmap batches only functions of batched values, so a token that is the
    same for every run would leave this unbatched, which a pool of several runs refuses.
    """
    return self._first_frames(token)

  def _checked(self, actions: Any, shape: Any) -> jax.Array:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dtype = jnp.result_type(actions)
    check(jnp.issubdtype(dtype, jnp.integer),
          f"actions of dtype {dtype}; must be integers in [0, {self.num_actions}) ({self.name})")
    check(jnp.shape(actions) == shape, f"actions of shape {jnp.shape(actions)}; must be {list(shape)}, "
          "one per environment")
    if not isinstance(actions, jax.core.Tracer):
      values = np.asarray(actions)
      low, high = int(values.min()), int(values.max())
      check(low >= 0 and high < self.num_actions,
            f"actions in [{low}, {high}]; must be in [0, {self.num_actions}) ({self.name} has {self.num_actions})")
    return jnp.asarray(actions, jnp.int32)

  def _xla_step(self):
    handle, _, _, xla_step = self.pool.xla()

    def flat(actions):
      _, (obs, reward, terminated, truncated, info) = xla_step(jnp.asarray(handle), actions)
      return AtariStep(obs[:, 0], reward.astype(jnp.float32), terminated.astype(jnp.bool_),
                       truncated.astype(jnp.bool_), info["lives"].astype(jnp.int32))
    return flat

  def _callback_step(self):
    from jax.experimental import io_callback
    shapes = step_shapes(self.num_runs * self.num_envs)
    pool = self.pool

    def host(actions):
      obs, reward, terminated, truncated, info = pool.step(np.asarray(actions, np.int32))
      return AtariStep(np.ascontiguousarray(obs[:, 0]), np.asarray(reward, np.float32),
                       np.asarray(terminated, np.bool_), np.asarray(truncated, np.bool_),
                       np.asarray(info["lives"], np.int32))

    return lambda actions: io_callback(host, shapes, actions, ordered=False)


def step_shapes(n: int) -> AtariStep:
  """The types of :meth:`AtariEnv.step`'s output for ``n`` environments."""
  sds = jax.ShapeDtypeStruct
  return AtariStep(sds((n, *FRAME_SHAPE), jnp.uint8), sds((n,), jnp.float32), sds((n,), jnp.bool_),
                   sds((n,), jnp.bool_), sds((n,), jnp.int32))


def env_seeds(seeds: Sequence[int], num_envs: int) -> list[int]:
  """The pool's per-environment seeds: run ``s``'s environment ``i`` gets ``(s * num_envs + i) mod 2**31``."""
  return [(int(s) * num_envs + i) % 2**31 for s in seeds for i in range(num_envs)]


def push_frame(stack: jax.Array, frame: jax.Array, first: jax.Array) -> jax.Array:
  """The agent's state after ``frame`` arrives: ``stack [..., H, W, S]`` shifted left by one with
  ``frame [..., H, W]`` newest, or ``[0, ..., 0, frame]`` where ``first`` (an episode's first frame),
  as Dopamine's ``_reset_state`` + ``_record_observation`` (dqn_agent.py:441-459)."""
  shifted = jnp.concatenate([stack[..., 1:], frame[..., None]], axis=-1)
  fresh = jnp.concatenate([jnp.zeros_like(stack[..., 1:]), frame[..., None]], axis=-1)
  return jnp.where(first[..., None, None, None], fresh, shifted)


def make_atari(name: str, *, num_envs: int = 1, seeds: Sequence[int] = (0,),
               sticky_action_prob: float = STICKY_ACTION_PROB, frame_skip: int = FRAME_SKIP,
               max_episode_steps: int = DOPAMINE_EPISODE_STEPS, full_action_space: bool = False,
               step_via: str = "xla", num_threads: int = 0, backend: str = "envpool",
               names: dict[str, str] | None = None) -> AtariEnv:
  """A pool of ``len(seeds) x num_envs`` Atari environments with Dopamine's preprocessing.

  The pool is reset here (host side); ``AtariEnv.initial`` holds the frames.

  Args:
    name: the game as Dopamine / the ALE name it ("Pong", "SpaceInvaders"); see
      :func:`available_games`.
    num_envs: environments per run.
    seeds: one seed per vmapped run (ints >= 0).
    sticky_action_prob: the ALE's ``repeat_action_probability`` (Dopamine: 0.25).
    frame_skip: emulator frames per agent step, max-pooling the last two (Dopamine: 4).
    max_episode_steps: agent steps after which the pool truncates an episode (Dopamine's emulator
      ends it after 100,000 frames: 25,000 steps).
    full_action_space: all 18 actions instead of the game's minimal set (Dopamine: False).
    step_via: "xla" or "callback" (module docstring).
    num_threads: the pool's worker threads (0: the backend's choice).
    backend: "envpool" or "ale_py" (:data:`ATARI_BACKENDS`; the module docstring).
    names: what error messages call each argument (e.g. ``{"name": "env.name"}``).

  Returns:
    The :class:`AtariEnv`.

  Raises:
    InputError: an unknown game, a missing ROM or a setting out of range (one line naming it).

  Examples:
    >>> env = make_atari("Pong", num_envs=2)  # doctest: +SKIP
    >>> env.step(jnp.zeros(2, jnp.int32)).frame.shape  # doctest: +SKIP
    (2, 84, 84)
  """
  n = {k: k for k in ("name", "num_envs", "seeds", "sticky_action_prob", "frame_skip", "max_episode_steps",
                      "full_action_space", "step_via", "num_threads", "backend")}
  n.update(names or {})
  source = get_backend(backend, n["backend"])
  check_game(name, n["name"], backend)
  for key, value, low in (("num_envs", num_envs, 1), ("frame_skip", frame_skip, 1),
                          ("max_episode_steps", max_episode_steps, 1), ("num_threads", num_threads, 0)):
    check(is_int(value) and low <= value < 2**31,
          f"{n[key]}={value!r}; must be an int in [{low}, 2**31)")
  check(isinstance(seeds, (tuple, list)) and len(seeds) >= 1
        and all(is_int(s) and s >= 0 for s in seeds),
        f"{n['seeds']}={seeds!r}; must be a non-empty sequence of ints >= 0 (one per run)")
  check_range(sticky_action_prob, n["sticky_action_prob"], 0, 1, meaning="Dopamine: 0.25", high_open=True)
  check_bool(full_action_space, n["full_action_space"])
  check_choice(step_via, n["step_via"], STEP_VIA)
  total = len(seeds) * num_envs
  pool = source.open(name, seeds=env_seeds(seeds, num_envs), frame_skip=frame_skip,
                     sticky_action_prob=float(sticky_action_prob), max_episode_steps=max_episode_steps,
                     full_action_space=full_action_space, num_threads=num_threads)
  obs, info = pool.reset()
  if not np.array_equal(info["env_id"], np.arange(total)):  # sync mode answers in env_id order
    raise RuntimeError(f"{backend} answered environments {info['env_id']} in another order than 0..{total - 1}")
  epoch = int.from_bytes(os.urandom(4), "little") | 1  # nonzero: 0 marks a state made by no pool
  return AtariEnv(name=name, num_envs=num_envs, seeds=tuple(int(s) for s in seeds),
                  num_actions=int(pool.action_space.n), step_via=step_via, epoch=epoch,
                  initial=np.ascontiguousarray(obs[:, 0]), pool=pool, backend=backend)
