"""A scripted stand-in for an envpool Atari pool (the interface the ``dqn_atari`` task and ``make_play`` use),
whose games, rewards and lives follow a script, and which records every action it is sent."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from jaxlab.rl.atari import AtariStep, step_shapes


class ScriptedAtari:
  """``num_envs`` scripted games stepped on the host, with envpool's next-step auto-reset.

  A game lasts ``length`` steps after its reset (then ``terminated``); the step after that is a
  reset step (its action ignored, reward 0, the next game's first frame). Every other step gives
  reward 1. Frames carry the steps since the reset in pixel (0, 0) and the games started in
  pixel (0, 1). ``lives`` start at 5 and fall by one every ``life_every`` steps (0: never).
  ``actions`` holds every action sent, one array per step.
  """

  def __init__(self, num_envs: int, length: int, life_every: int = 0):
    self.num_envs, self.num_actions, self.frame_shape, self.epoch = num_envs, 4, (84, 84), 1
    self.length, self.life_every = length, life_every
    self.t = np.zeros(num_envs, np.int64)
    self.games = np.zeros(num_envs, np.int64)
    self.lives = np.full(num_envs, 5, np.int32)
    self.pending = np.zeros(num_envs, bool)
    self.actions: list[np.ndarray] = []
    self.initial = self._frames()

  def _frames(self) -> np.ndarray:
    f = np.zeros((self.num_envs, 84, 84), np.uint8)
    f[:, 0, 0], f[:, 0, 1] = self.t % 256, self.games % 256
    return f

  def _host_reset(self, token) -> np.ndarray:
    del token
    self.t[:], self.lives[:], self.pending[:] = 0, 5, False
    self.games += 1
    return self._frames()

  def _host_step(self, actions) -> AtariStep:
    self.actions.append(np.asarray(actions).copy())
    reward = np.where(self.pending, 0.0, 1.0).astype(np.float32)
    self.games += self.pending
    self.lives[self.pending] = 5
    self.t = np.where(self.pending, 0, self.t + 1)
    if self.life_every:
      self.lives -= ((self.t > 0) & (self.t % self.life_every == 0)).astype(np.int32)
    terminated = (self.t >= self.length) & ~self.pending
    self.pending = terminated.copy()
    return AtariStep(self._frames(), reward, terminated, np.zeros(self.num_envs, bool), self.lives.copy())

  def reset(self, token: jax.Array) -> jax.Array:
    """``make_play``'s ``reset``: every game restarts on the host."""
    return io_callback(self._host_reset, jax.ShapeDtypeStruct((self.num_envs, 84, 84), jnp.uint8), token)

  def first_frames(self, token: jax.Array) -> jax.Array:
    del token
    return jnp.asarray(self.initial)

  def step(self, actions: jax.Array) -> AtariStep:
    return io_callback(self._host_step, step_shapes(self.num_envs), actions)

  def sent(self) -> np.ndarray:
    """int [steps, num_envs]: the actions sent so far."""
    return np.stack(self.actions)


def leading_noops(actions: np.ndarray) -> np.ndarray:
  """Per column, how many actions come before the first nonzero one (the no-ops of a game start)."""
  nonzero = actions != 0
  return np.where(nonzero.any(0), nonzero.argmax(0), len(actions))
