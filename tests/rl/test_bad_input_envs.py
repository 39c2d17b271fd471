"""Bad input to the MinAtar environments and the replay buffer: each case ends in ONE clear line.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Dtypes and shapes
are static, so they are refused at trace time; concrete action values outside jit are checked
too. Inside jit an action value cannot be checked: the last two tests pin what happens instead
(an environment step gives a NaN reward, the TD loss is NaN).
"""

from __future__ import annotations

import functools
import os
import sys
from types import SimpleNamespace
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from jaxlab.rl import dqn  # noqa: E402
from jaxlab.rl.envs import ENVS, make_env  # noqa: E402
from jaxlab.rl.replay import TimeStep, make_replay  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]
N = 2  # environments


@functools.cache
def _env() -> Any:
  return make_env("breakout")  # 6 actions


def _step(actions: Any) -> Callable[[], Any]:
  def run():  # the checks run before any compute: the state's shapes suffice, and cost no reset
    env = _env()
    state = jax.eval_shape(lambda k: env.reset(k, N)[0], jax.random.key(0))
    return env.step(state, actions, jax.random.key(1))
  return run


def _timestep(n: int = N, action: Any = None, obs_shape: tuple[int, ...] = (10, 10, 4)) -> TimeStep:
  action = jnp.zeros((n,), jnp.int32) if action is None else action
  return TimeStep(jnp.zeros((n, *obs_shape), jnp.bool_), action, jnp.zeros((n,)), jnp.ones((n,)))


def _add(steps: TimeStep) -> Callable[[], Any]:
  def run():
    replay = make_replay(64, N, 4)
    state = jax.eval_shape(replay.init, jax.tree.map(lambda x: x[0], _timestep()))  # shapes suffice
    return replay.add(state, steps)
  return run


class _Own:
  """Your own environments, each breaking gymnax's contract in one way (built lazily: gymnax imports here)."""

  @staticmethod
  def make(breach: str) -> Any:
    from flax import struct
    from gymnax.environments import environment, spaces

    @struct.dataclass
    class State(environment.EnvState):
      coin: jax.Array

    class Env(environment.Environment):
      @property
      def default_params(self):
        return environment.EnvParams(max_steps_in_episode=5)

      def step_env(self, key, state, action, params):
        obs = jnp.zeros([3] if breach == "obs_shape" else [1], bool)
        reward = jnp.ones(2) if breach == "reward_shape" else jnp.float32(1.0)
        out = (obs, State(time=state.time + 1, coin=jnp.bool_(True)), reward, False, {})
        return out[:4] if breach == "four_values" else out

      def reset_env(self, key, params):
        return jnp.zeros([1], bool), State(time=0, coin=jnp.bool_(False))

      def action_space(self, params=None):
        return spaces.Discrete(0 if breach == "no_actions" else 2)
    return Env


def _own(breach: str) -> Callable[[], Any]:
  """make_env of an own environment registered for the call only (the registry's name list stays as it was)."""
  def run():
    name = f"_sweep_own_{breach}"
    ENVS.register(name)(_Own.make(breach))
    try:
      return make_env(name, where=" (env.name)")
    finally:
      del ENVS._entries[name]
  return run


CASES: list[Case] = [
    # --- your own environment, checked where make_env first uses it; gymnax ids that need the network --
    ("own env", "reward of shape (2,)", _own("reward_shape"),
     "environment '_sweep_own_reward_shape' (env.name): step_env's reward has shape (2,); must be a scalar"),
    ("own env", "step_env returning 4 values", _own("four_values"),
     "environment '_sweep_own_four_values' (env.name): step_env returned 4 values; a gymnax step_env returns 5"),
    ("own env", "step observations of another shape than reset's", _own("obs_shape"),
     "step_env's observations are bool[3] but reset_env's are bool[1]; they must be the same"),
    ("own env", "Discrete(0) actions", _own("no_actions"),
     "environment '_sweep_own_no_actions' (env.name) has a Discrete(0) action space; DQN needs at least 1 action"),
    ("env", "a gymnax environment that downloads its data", lambda: make_env("MNISTBandit-bsuite", where=" (env.name)"),
     "environment 'MNISTBandit-bsuite' (env.name) downloads MNIST from the internet when gymnax builds it"),
    # --- make_env / reset --------------------------------------------------------------------------
    ("env", "name not a string", lambda: make_env(["breakout"]), "unknown MinAtar environment ['breakout']; valid:"),
    ("env", "sticky prob a string", lambda: make_env("breakout", sticky_action_prob="0.1"),
     "sticky_action_prob='0.1'; must be a number in [0, 1)"),
    ("env", "sticky prob NaN", lambda: make_env("breakout", sticky_action_prob=float("nan")),
     "sticky_action_prob=nan; must be a number in [0, 1)"),
    ("env", "sticky prob 1", lambda: make_env("breakout", sticky_action_prob=1.0),
     "sticky_action_prob=1.0; must be a number in [0, 1)"),
    ("env", "full_action_set a string", lambda: make_env("breakout", full_action_set="no"),
     "full_action_set='no'; must be True or False"),
    ("env", "max_episode_steps True", lambda: make_env("breakout", max_episode_steps=True),
     "max_episode_steps=True; must be None or an int in [1, 2**30]"),
    ("env", "max_episode_steps 2**40", lambda: make_env("breakout", max_episode_steps=2**40),
     "max_episode_steps=1099511627776; must be None or an int in [1, 2**30]"),
    ("env", "reset n=True", lambda: _env().reset(jax.random.key(0), True),
     "number of environments n=True; must be an int >= 1"),
    # --- step: dtype and shape (static), values (concrete) -------------------------------------------
    ("env step", "float actions", _step(jnp.array([1.7, 2.2])),
     "actions of dtype float32; must be integers in [0, 6)"),
    ("env step", "bool actions", _step(jnp.array([True, False])), "actions of dtype bool; must be integers in [0, 6)"),
    ("env step", "float actions under jit", lambda: jax.jit(lambda a: _step(a)())(jnp.array([1.0, 2.0])),
     "actions of dtype float32; must be integers in [0, 6)"),
    ("env step", "one action too many", _step(jnp.array([0, 1, 2])),
     "actions of shape (3,); must be [2], one per environment"),
    ("env step", "a scalar action", _step(1), "actions of shape (); must be [2], one per environment"),
    ("env step", "action = num_actions", _step(jnp.array([6, 0])),
     "actions in [0, 6]; must be in [0, 6) (breakout has 6 actions)"),
    ("env step", "negative action", _step(np.array([-1, 0])), "actions in [-1, 0]; must be in [0, 6)"),
    ("env step", "concrete action closed over by jit", lambda: jax.jit(_step(jnp.array([0, 7])))(),
     "actions in [0, 7]; must be in [0, 6)"),
    # --- replay ----------------------------------------------------------------------------------------
    ("replay", "num_envs=True", lambda: make_replay(64, True, 4), "num_envs=True; must be an int >= 1"),
    ("replay", "capacity 2**40", lambda: make_replay(2**40, 1, 4), "capacity=1099511627776; must be < 2**31"),
    ("replay", "min_size a float", lambda: make_replay(64, 2, 4, min_size=8.0), "min_size=8.0; must be an int >= 1"),
    ("replay", "float action in init", lambda: make_replay(64, N, 4).init(TimeStep(
        jnp.zeros((10, 10, 4), jnp.bool_), jnp.zeros(()), jnp.zeros(()), jnp.ones(()))),
     "example.action of dtype float32; must be an integer dtype"),
    ("replay", "float action in add", _add(_timestep(action=jnp.ones((N,)))),
     "steps.action of dtype float32; must be an integer dtype"),
    ("replay", "add from 3 envs", _add(_timestep(n=3)),
     "steps.obs: bool[3, 10, 10, 4]; the buffer takes bool[2, 10, 10, 4] (one step of each of num_envs=2"),
    ("replay", "add another obs shape", _add(_timestep(obs_shape=(10, 10, 6))),
     "steps.obs: bool[2, 10, 10, 6]; the buffer takes bool[2, 10, 10, 4]"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)


def test_traced_out_of_range_action_gives_a_nan_reward():
  """Inside jit the action value is unknown: the step executes it clipped and reports a NaN reward."""
  env = _env()
  first_step = jax.jit(lambda k, a: env.step(env.reset(k, N)[0], a, k))  # one compile
  new, _, reward, _, _ = first_step(jax.random.key(0), jnp.array([9, 2]))
  assert np.isnan(reward[0]) and np.isfinite(reward[1])
  assert 0 <= int(new.last_action[0]) < env.num_actions  # the state stays valid
  assert np.isnan(new.stats.episode_return[0])  # and the episode's return shows it


@pytest.mark.parametrize("action", [-1, 2])
def test_traced_out_of_range_action_makes_the_td_loss_nan(action):
  """The trainer's non-finite guard then skips the step and counts it (``nonfinite_skipped``)."""
  w = {"w": jnp.ones((2, 2))}  # 2 actions; -1 would otherwise wrap to action 1

  def loss(action):
    batch = SimpleNamespace(obs=jnp.ones((2, 2)), action=action, reward=jnp.ones(2), discount=jnp.ones(2),
                            next_obs=jnp.ones((2, 2)))
    return dqn.td_loss(lambda p, o: (o @ p["w"], {}), w, w, batch, gamma=0.99)[0]

  assert np.isnan(jax.jit(loss)(jnp.array([action, 0], jnp.int32)))
  assert np.isfinite(jax.jit(loss)(jnp.array([1, 0], jnp.int32)))
