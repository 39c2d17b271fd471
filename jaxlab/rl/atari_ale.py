"""The ``"ale_py"`` Atari backend: ale-py's vector environment, preprocessed as Dopamine does.

``make_atari(..., backend="ale_py")`` (the config's ``env.backend = "ale_py"``) runs the games in
ale-py's C++ pool (``ale_py.vector_env.AtariVectorEnv``, ale-py >= 0.12; Farama-Foundation/
Arcade-Learning-Environment ``src/ale/vector``, a port of envpool's Atari pool), whose wheel carries
the ROMs in 3 MB; envpool's is 61 MB and brings MuJoCo assets. Each option beside Dopamine's code
(google/dopamine @ 5873f54, ``dopamine/discrete_domains/atari_lib.py``) and envpool's (the
``"envpool"`` backend, ``jaxlab.rl.atari``):

* ``img_height = img_width = 84``, ``grayscale``: the ALE's grayscale palette resized with
  ``cv::INTER_AREA`` (``preprocessed_env.cpp``, ``process_screen``), as Dopamine's
  ``cv2.resize(..., interpolation=cv2.INTER_AREA)`` (atari_lib.py:366-370);
* ``frameskip = 4``, ``maxpool``: the max of the last two frames (atari_lib.py:322-331, 359-364);
* ``repeat_action_probability``: sticky actions in the emulator (atari_lib.py:122);
* ``episodic_life = life_loss_info = False``: a lost life ends nothing in the pool; each step
  reports the lives left (``info["lives"]``), from which the ``dqn_atari`` task implements
  ``terminal_on_life_loss`` itself, as with envpool;
* ``reward_clipping = False``: raw game scores (the agent clips, Dopamine's ``Runner``);
* ``use_fire_reset = False``, ``noop_max = 0``: nothing is pressed at reset, as Dopamine
  (atari_lib.py:253-264). envpool always takes one NOOP emulator frame there;
* ``stack_num = 1``: frames are stacked on the device and in the replay, as with envpool;
* ``full_action_space``: the game's minimal action set by default (atari_lib.py:121-137);
* ``max_num_frames_per_episode = max_episode_steps * frameskip``: ale-py counts emulator frames,
  envpool agent steps; both report the end as truncated.

Measured against envpool (``tests/rl/test_atari_ale.py``: Breakout and Boxing, sticky actions 0.25
and 0, random actions): with the reset frames made equal (ale-py's ``noop_max = 2`` draws 0 or 1 NOOP
frames; the environments that drew 1 match envpool's one) frames, rewards, terminations,
truncations and lives are bit-identical at every step of an episode. Two differences, by design:

1. the reset: no frame here, one NOOP frame in envpool (Dopamine takes none);
2. the step that ends an episode (game over or the time limit): ale-py leaves the skip loop before
   reading the screen of the frame that ended it, envpool and Dopamine (atari_lib.py:319-327) read
   it first, so that step's frame differs (measured: up to 54 of 7,056 pixels on Breakout, 227 on
   Boxing). Dopamine calls it an observation that "should be ignored" (atari_lib.py:289-290):
   the transition is terminal and its next state meets a zero discount. Only
   ``env.time_limit_is_terminal = False`` bootstraps from it.

The pool behind :class:`AlePool` answers the calls :class:`jaxlab.rl.AtariEnv` and
:mod:`jaxlab.rl.atari_play` make of envpool's: ``reset()``, ``step(actions)``, ``xla()`` (ale-py's
FFI targets, CPU and CUDA) and ``action_space.n``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from jaxlab.registry import optional_imports
from jaxlab.rl.atari import FRAME_SHAPE

with optional_imports(__name__):
  from ale_py import roms
  from ale_py.vector_env import AtariVectorEnv


def game_name(rom_id: str) -> str:
  """The name Dopamine and gymnasium give ale-py's ROM ``rom_id``: "space_invaders" -> "SpaceInvaders"."""
  return "".join(part.capitalize() for part in rom_id.split("_"))


def rom_ids() -> dict[str, str]:
  """Game name ("Pong") -> ale-py's ROM id ("pong"), for every ROM the ale-py wheel ships."""
  return {game_name(r): r for r in roms.get_all_rom_ids()}


def vector_env_options(*, frame_skip: int, sticky_action_prob: float, max_episode_steps: int,
                       full_action_space: bool, num_threads: int) -> dict[str, Any]:
  """The ``AtariVectorEnv`` keyword arguments of Dopamine's preprocessing (the module docstring)."""
  return dict(img_height=FRAME_SHAPE[0], img_width=FRAME_SHAPE[1], grayscale=True, stack_num=1,
              frameskip=frame_skip, maxpool=True, noop_max=0, use_fire_reset=False, episodic_life=False,
              life_loss_info=False, reward_clipping=False, repeat_action_probability=sticky_action_prob,
              max_num_frames_per_episode=max_episode_steps * frame_skip, full_action_space=full_action_space,
              num_threads=num_threads, autoreset_mode="NextStep")


class AlePool:
  """An ``AtariVectorEnv`` behind the calls made of envpool's gymnasium pool.

  ``reset()``'s first call seeds environment ``i`` with ``seeds[i]``; later ones keep the
  emulators' random streams going, as envpool's do.

  Attributes:
    env: the ``AtariVectorEnv``.
    config: its options and seeds (as envpool's ``pool.config``).
  """

  def __init__(self, env: AtariVectorEnv, seeds: Sequence[int], config: dict[str, Any]):
    self.env = env
    self.config = {**config, "env_seed": list(seeds), "num_envs": len(seeds), "batch_size": len(seeds)}
    self._seeds: np.ndarray | None = np.asarray(seeds, np.int64)

  @property
  def action_space(self) -> Any:
    """One environment's ``Discrete`` action space (``.n``: the actions)."""
    return self.env.single_action_space

  def reset(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Resets every environment: (uint8 ``[N, 1, 84, 84]`` frames, info with "env_id" and "lives")."""
    seeds, self._seeds = self._seeds, None
    return self.env.reset(seed=seeds)

  def step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
    """One agent step of every environment: (frames, rewards, terminated, truncated, info)."""
    return self.env.step(np.asarray(actions, np.int32))

  def xla(self) -> tuple[Any, None, None, Any]:
    """``(handle, None, None, step)`` with ``step(handle, actions) -> (handle, (frames, rewards,
    terminated, truncated, info))``, ale-py's FFI step, in the place envpool's ``xla()`` has it."""
    handle, _, step = self.env.xla()
    return handle, None, None, step


class AleBackend:
  """ale-py's vector environment: the ``"ale_py"`` entry of :data:`jaxlab.rl.ATARI_BACKENDS`."""

  name = "ale_py"
  reinstall = "reinstall ale-py"

  def games(self) -> list[str]:
    """The games whose ROMs ale-py ships, as Dopamine names them ("Pong", "SpaceInvaders")."""
    return sorted(rom_ids())

  def rom_path(self, game: str) -> str:
    """Where ale-py looks for ``game``'s ROM (``$ALE_ROMS_DIR`` or its package; the file need not exist)."""
    folder = os.environ.get("ALE_ROMS_DIR") or os.path.dirname(roms.__file__)
    return os.path.join(folder, f"{rom_ids()[game]}.bin")

  def open(self, game: str, *, seeds: Sequence[int], frame_skip: int, sticky_action_prob: float,
           max_episode_steps: int, full_action_space: bool, num_threads: int) -> AlePool:
    """A pool of ``len(seeds)`` environments of ``game`` (environment ``i`` seeded ``seeds[i]`` at its
    first reset), not yet reset.

    Examples:
      >>> pool = AleBackend().open("Pong", seeds=[0, 1], frame_skip=4, sticky_action_prob=0.25,
      ...                          max_episode_steps=25_000, full_action_space=False, num_threads=0)
      >>> frames, info = pool.reset()
      >>> frames.shape, info["lives"].tolist(), int(pool.action_space.n)
      ((2, 1, 84, 84), [0, 0], 6)
    """
    options = vector_env_options(frame_skip=frame_skip, sticky_action_prob=sticky_action_prob,
                                 max_episode_steps=max_episode_steps, full_action_space=full_action_space,
                                 num_threads=num_threads)
    return AlePool(AtariVectorEnv(rom_ids()[game], len(seeds), **options), seeds, options)
