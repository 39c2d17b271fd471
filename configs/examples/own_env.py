"""Your own gymnax environment, registered and trained by DQN from one config file: a corridor of
7 cells; reward 1 for reaching the right end; the observation is the one-hot position (a vector,
so the Q-network is an MLP with a Soft-MoE head over per-feature tokens).

  python -m jaxlab.main --config=configs/examples/own_env.py:tiny --workdir=runs/corridor
"""

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxlab.config_files import load_config_module
from jaxlab.rl.envs import ENVS


@struct.dataclass
class State(environment.EnvState):
  pos: jax.Array


@ENVS.register("corridor")
class Corridor(environment.Environment):
  """Step left (0) or right (1); the episode ends at either end, or after 20 steps (truncated)."""

  @property
  def default_params(self):
    return environment.EnvParams(max_steps_in_episode=20)

  def step_env(self, key, state, action, params):
    state = State(time=state.time + 1, pos=jnp.clip(state.pos + 2 * action - 1, 0, 6))
    reward = (state.pos == 6).astype(jnp.float32)
    return jax.nn.one_hot(state.pos, 7), state, reward, (state.pos == 0) | (state.pos == 6), {}

  def reset_env(self, key, params):
    state = State(time=0, pos=jnp.int32(3))
    return jax.nn.one_hot(state.pos, 7), state

  def action_space(self, params=None):
    return spaces.Discrete(2)


def get_config(arg=None):
  """``arg``: None (20k frames) or "tiny" (a few hundred, for tests)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"own_env.py takes no argument or 'tiny', got {arg!r}")
  c = load_config_module("dqn_minatar").get_config("tiny" if arg == "tiny" else None)
  c.name, c.env.name = "corridor", "corridor"
  c.network.update({"mlp_features": (32,), "num_experts": 4, "expert_hidden": 32, "embedding_size": 8})
  if arg != "tiny":
    c.dqn.update({"epsilon_decay_frames": 5000, "target_update_period": 400, "eval_steps": 100})
    c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = 5000, 500, 2500, 2500
  return c
