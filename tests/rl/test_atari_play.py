"""Atari evaluation as Dopamine's Atari 100k runner: whole games in a pool of its own, reset per evaluation."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from configs import dqn_atari
from jaxlab.errors import InputError
from jaxlab.rl.atari import make_atari
from jaxlab.rl.atari_play import EVAL_EPSILON, eval_settings, make_play
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.train.state import TrainState
from jaxlab.train.loop import make_evaluate

pytest.importorskip("envpool")


def _noop_q(num_actions):
  """Q-values whose argmax is action 0 (NOOP) everywhere: a deterministic policy to replay by hand."""
  return lambda params, obs: jnp.zeros((obs.shape[0], num_actions)).at[:, 0].set(1.0)


@pytest.mark.parametrize("step_via", ["xla", "callback"])
def test_play_scores_whole_games_and_resets_the_pool_each_time(step_via):
  steps = 120
  env = make_atari("Pong", num_envs=2, seeds=(3,), sticky_action_prob=0.0, max_episode_steps=steps, step_via=step_via)
  play = jax.jit(make_play(env, _noop_q(env.num_actions), max_steps=10_000))
  first = jax.device_get(play(None, jax.random.key(0), 0.0))
  # every episode ends at envpool's limit: 2 finished, none capped, the loop stops there
  assert int(first["eval_episodes"]) == 2 and int(first["eval_capped"]) == 0 and int(first["eval_steps_run"]) == steps
  # the same games played by hand in a fresh pool with the same seeds: NOOP for 120 agent steps
  ref = make_atari("Pong", num_envs=2, seeds=(3,), sticky_action_prob=0.0, max_episode_steps=steps,
                   step_via="callback")
  total = np.zeros(2)
  for _ in range(steps):
    total += np.asarray(ref.step(jnp.zeros(2, jnp.int32)).reward)
  assert total.mean() < 0  # the opponent scores on a NOOP agent
  assert float(first["eval_return"]) == pytest.approx(total.mean())
  # a second evaluation starts fresh games (the pool was reset), not the ones left mid-episode
  second = jax.device_get(play(None, jax.random.key(1), 0.0))
  assert int(second["eval_steps_run"]) == steps and float(second["eval_return"]) == float(first["eval_return"])
  capped = jax.device_get(jax.jit(make_play(env, _noop_q(env.num_actions), max_steps=50))(None, jax.random.key(2)))
  assert int(capped["eval_episodes"]) == 0 and int(capped["eval_capped"]) == 1 and np.isnan(capped["eval_return"])


def test_vmapped_runs_share_one_pool_and_one_reset():
  env = make_atari("Pong", num_envs=2, seeds=(3, 4), sticky_action_prob=0.0, max_episode_steps=30)
  play = make_play(env, _noop_q(env.num_actions), max_steps=100)
  out = jax.device_get(jax.jit(jax.vmap(lambda k: play(None, k, 0.0)))(jax.random.split(jax.random.key(0), 2)))
  np.testing.assert_array_equal(out["eval_episodes"], [2, 2])
  np.testing.assert_array_equal(out["eval_steps_run"], [30, 30])
  with pytest.raises(Exception, match="vmapped over the 2 runs"):  # a bug: one run's call on a pool of two
    jax.block_until_ready(jax.jit(lambda k: play(None, k, 0.0))(jax.random.key(0)))


def test_the_task_evaluates_and_is_off_by_default():
  c = dqn_atari.get_config("tiny")
  off = make_task(c, task_context(c))
  assert off.evaluate is None and "play" not in off.inference.fns  # no dqn.eval_* keys: off
  with c.unlocked():
    c.dqn.eval_episodes, c.dqn.eval_steps = 3, 0
  c.network.head = "dense"
  task = make_task(c, task_context(c))
  params = jax.jit(task.init_params)(jax.random.key(0))
  state = TrainState.create(params, optax.sgd(0.0), jax.random.key(1))
  out = jax.device_get(make_evaluate(task, vmap_runs=False)(state))  # what the trainer runs at eval_every
  # tiny episodes last 25 agent steps: every eval env finishes one whole game
  assert int(out["eval_episodes"]) == 3 and int(out["eval_capped"]) == 0 and np.isfinite(out["eval_return"])
  assert int(out["eval_steps_run"]) <= 25
  assert "play" in task.inference.fns


def test_eval_settings_defaults_and_bad_values():
  d = ml_collections.ConfigDict({"gamma": 0.99})
  assert eval_settings(d, 27_000) == (0, 27_000, EVAL_EPSILON) and EVAL_EPSILON == 0.001
  d = ml_collections.ConfigDict({"eval_episodes": 100, "eval_steps": 500, "eval_epsilon": 0.05})
  assert eval_settings(d, 27_000) == (100, 500, 0.05)
  for key, value, words in (("eval_episodes", -1, "dqn.eval_episodes=-1"), ("eval_steps", 1.5, "dqn.eval_steps=1.5"),
                            ("eval_epsilon", 2.0, "dqn.eval_epsilon=2.0")):
    with pytest.raises(InputError, match=words):
      eval_settings(ml_collections.ConfigDict({key: value}), 100)
