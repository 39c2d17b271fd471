"""Any gymnax environment and your own through make_env: observations, time limits, bad names."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import environment, spaces

from jaxlab.errors import InputError
from jaxlab.rl.envs import ENVS, make_env


def _run(env, n, steps, action=0):
  """A jitted rollout with a fixed action: per-step (obs, reward, done, info, stats)."""
  def go(rng):
    state, obs = env.reset(rng, n)

    def body(state, key):
      state, obs, reward, done, info = env.step(state, jnp.full([n], action, jnp.int32), key)
      return state, (obs, reward, done, info, state.stats)
    return obs, jax.lax.scan(body, state, jax.random.split(jax.random.key(1), steps))[1]
  return jax.jit(go)(jax.random.key(0))


def test_cartpole_is_a_vector_with_gymnax_params_and_no_sticky_actions():
  env = make_env("CartPole-v1")
  assert (env.obs_shape, env.obs_dtype, env.num_actions, env.sticky_action_prob) == ((4,), "float32", 2, 0.0)
  assert env.gymnax_params.max_steps_in_episode == 500 and env.episode_length is None
  obs, (obs2, reward, done, info, stats) = _run(env, 3, 40)
  assert obs.shape == (3, 4) and obs2.shape == (40, 3, 4) and obs2.dtype == jnp.float32
  # always pushing left ends every episode (the pole falls) long before the 500-step limit: terminated
  done, term = np.asarray(done), np.asarray(info["terminated"])
  assert done.any() and (done == term).all() and not np.asarray(info["truncated"]).any()
  assert (np.asarray(info["discount"])[done] == 0).all()
  first = done.argmax(axis=0)  # each env's first episode ends at step first + 1
  np.testing.assert_array_equal(np.asarray(stats.last_length)[first, np.arange(3)], first + 1)
  # CartPole pays 1 per step, so a return is its episode's length
  np.testing.assert_array_equal(np.asarray(stats.last_return), np.asarray(stats.last_length).astype(np.float32))


def test_a_time_limit_truncates_and_bootstraps():
  env = make_env("CartPole-v1", max_episode_steps=3)
  _, (_, _, done, info, stats) = _run(env, 2, 7, action=1)
  trunc = np.asarray(info["truncated"])
  assert trunc[2].all() and trunc[5].all() and np.asarray(done).sum() == 4  # steps 3 and 6 of each env
  assert (np.asarray(info["discount"]) == 1).all()  # truncation bootstraps
  assert (np.asarray(stats.last_length)[-1] == 3).all() and (np.asarray(stats.completed)[-1] == 2).all()


def test_grids_become_one_channel_images_and_discrete_scalars_one_hot():
  catch = make_env("Catch-bsuite")
  obs, (obs2, reward, done, info, _) = _run(catch, 2, 9)
  assert catch.obs_shape == (10, 5, 1) and obs.shape == (2, 10, 5, 1) and obs2.dtype == jnp.float32
  assert np.asarray(done)[-1].all() and np.isin(np.asarray(reward)[-1], [-1.0, 1.0]).all()  # ball lands at step 9
  lake = make_env("FrozenLake-misc")
  obs, _ = _run(lake, 2, 1)
  assert lake.obs_shape == (16,) and obs.shape == (2, 16) and (np.asarray(obs).sum(-1) == 1).all()


def test_minatar_ids_keep_minatar_conventions():
  env = make_env("Freeway-MinAtar")
  assert (env.name, env.obs_dtype, env.num_actions, env.sticky_action_prob, env.episode_length) == (
      "freeway", "bool", 6, 0.1, 2500)


@struct.dataclass
class _Flip(environment.EnvState):
  coin: jax.Array


class _CoinFlip(environment.Environment):
  """Guess a coin (bool observation of the last one); 5-step episodes by gymnax's time limit."""

  @property
  def default_params(self):
    return environment.EnvParams(max_steps_in_episode=5)

  def step_env(self, key, state, action, params):
    coin = jax.random.bernoulli(key)
    return coin[None], _Flip(time=state.time + 1, coin=coin), (action == coin).astype(jnp.float32), False, {}

  def reset_env(self, key, params):
    return jnp.zeros([1], bool), _Flip(time=0, coin=jnp.bool_(False))

  def action_space(self, params=None):
    return spaces.Discrete(2)


ENVS.register("test_coin_flip")(_CoinFlip)


def test_your_own_environment_by_its_registered_name():
  env = make_env("test_coin_flip")
  assert (env.obs_shape, env.obs_dtype, env.num_actions) == ((1,), "bool", 2)
  _, (obs, reward, done, info, stats) = _run(env, 4, 10)
  assert obs.dtype == jnp.bool_ and np.asarray(info["truncated"])[[4, 9]].all() and np.asarray(done).sum() == 8
  assert (np.asarray(stats.last_length)[-1] == 5).all()


class _Tensor(_CoinFlip):
  def reset_env(self, key, params):
    return jnp.zeros([2, 2, 2, 2]), _Flip(time=0, coin=jnp.bool_(False))


ENVS.register("test_tensor_obs")(_Tensor)
ENVS.register("test_not_an_env")(lambda: "nope")


@pytest.mark.parametrize("name", ["CartPole-v1", "breakout", "Breakout-MinAtar"])
def test_a_built_in_name_cannot_be_registered(name):
  with pytest.raises(InputError, match=f"environment '{name}' is a built-in name \\(MinAtar or gymnax\\); register "
                     "yours under another name"):
    ENVS.register(name)(_CoinFlip)


@pytest.mark.parametrize("name,kwargs,message", [
    ("cartpole", {}, "unknown MinAtar environment 'cartpole'; valid: asterix, breakout, freeway, seaquest, "
     "space_invaders, a gymnax id (CartPole-v1, "),
    ("cartpole", {}, "test_coin_flip, test_not_an_env, test_tensor_obs); did you mean 'CartPole-v1'?"),
    ("Pendulum-v1", {}, "environment 'Pendulum-v1' has a Box action space; DQN needs discrete actions"),
    ("test_tensor_obs", {}, "environment 'test_tensor_obs' has observations of shape (2, 2, 2, 2); the value networks "
     "take a vector [F], a grid [H, W] (as one channel) or an image [H, W, C]"),
    ("test_not_an_env", {}, "test_gymnax_envs:<lambda> returned str; it must return a "
     "gymnax.environments.environment.Environment or a tuple (env, params)"),
    ("Acrobot-v1", {"full_action_set": False}, "full_action_set=False for 'Acrobot-v1': only MinAtar games"),
])
def test_bad_names_are_one_line(name, kwargs, message):
  with pytest.raises(InputError) as e:
    make_env(name, **kwargs)
  assert message in str(e.value) and "\n" not in str(e.value)
