"""Atari evaluation as Dopamine's Atari 100k runner (google/dopamine @ 5873f54): whole games in a pool of its own,
reset per evaluation, a fresh frame stack at each lost life, 0..29 NOOP steps at each game's start."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
from scipy import stats

from configs import dqn_atari
from jaxlab.errors import InputError
from jaxlab.rl.atari import make_atari
from jaxlab.experiment import task_context
from jaxlab.rl.atari_play import EVAL_EPSILON, eval_settings, make_play, noop_counts
from jaxlab.tasks import make_task
from jaxlab.train.loop import make_evaluate
from jaxlab.train.state import TrainState
from tests.support.scripted_atari import ScriptedAtari, leading_noops

pytest.importorskip("envpool")


def _fixed_q(num_actions, action=0):
  """Q-values whose argmax is ``action`` (0: NOOP) everywhere: a deterministic policy to replay by hand."""
  return lambda params, obs, key: jnp.zeros((obs.shape[0], num_actions)).at[:, action].set(1.0)


@pytest.mark.parametrize("step_via", ["xla", "callback"])
def test_play_scores_whole_games_and_resets_the_pool_each_time(step_via):
  steps = 120
  env = make_atari("Pong", num_envs=2, seeds=(3,), sticky_action_prob=0.0, max_episode_steps=steps, step_via=step_via)
  play = jax.jit(make_play(env, _fixed_q(env.num_actions), max_steps=10_000))
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
  capped = jax.device_get(jax.jit(make_play(env, _fixed_q(env.num_actions), max_steps=50))(None, jax.random.key(2)))
  assert int(capped["eval_episodes"]) == 0 and int(capped["eval_capped"]) == 1 and np.isnan(capped["eval_return"])


def test_vmapped_runs_share_one_pool_and_one_reset():
  env = make_atari("Pong", num_envs=2, seeds=(3, 4), sticky_action_prob=0.0, max_episode_steps=30)
  play = make_play(env, _fixed_q(env.num_actions), max_steps=100)
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


def _recording_q(env, seen):
  """Random Q-values (from the step's key) that also record each stack and the action they choose."""
  def q(params, obs, key):
    values = jax.random.uniform(key, (obs.shape[0], env.num_actions))
    jax.debug.callback(lambda s, a: seen.append((np.asarray(s).copy(), np.asarray(a).copy())), obs,
                       jnp.argmax(values, -1), ordered=True)
    return values
  return q


@pytest.mark.parametrize("life_loss", [True, False])
def test_a_lost_life_restarts_the_evaluation_stack(life_loss):
  """DER's evaluation games end the agent's episode at a lost life: the runner's reset_one zeroes the
  stack (atari_100k_runner.py:329-330) while the game and its score go on until game over (287-297).
  Breakout (5 lives) played by random Q-values, replayed by hand in a fresh pool with the same seed."""
  cap = 400
  env = make_atari("Breakout", num_envs=1, seeds=(5,), sticky_action_prob=0.0, max_episode_steps=cap,
                   step_via="callback")
  seen = []
  out = jax.device_get(jax.jit(make_play(env, _recording_q(env, seen), max_steps=cap,
                                         terminal_on_life_loss=life_loss))(None, jax.random.key(0), 0.0))
  ref = make_atari("Breakout", num_envs=1, seeds=(5,), sticky_action_prob=0.0, max_episode_steps=cap,
                   step_via="callback")
  frame = ref.pool.reset()[0][:, 0][0]  # play resets its pool once more before the game
  stack, lives, total, restarts = np.zeros((84, 84, 4), np.uint8), None, 0.0, 0
  stack[..., -1] = frame
  for t, (got, action) in enumerate(seen):
    np.testing.assert_array_equal(got[0], stack, err_msg=f"step {t}")
    step = jax.device_get(ref.step(jnp.asarray(action, jnp.int32)))
    total += float(step.reward[0])
    if step.terminated[0] or step.truncated[0]:
      break
    lost = lives is not None and int(step.lives[0]) < lives
    lives = int(step.lives[0])
    restarts += int(lost)
    stack = np.concatenate([np.zeros((84, 84, 3), np.uint8), step.frame[0][..., None]], -1) if lost and life_loss \
        else np.concatenate([stack[..., 1:], step.frame[0][..., None]], -1)
  assert restarts >= 2  # random play loses lives within the game
  assert int(out["eval_episodes"]) == 1 and float(out["eval_return"]) == total  # the whole game's score


def test_noop_starts_are_dopamines_0_to_29():
  """atari_100k_runner.py:204-212: num_noops = randint(0, max_noops = 30) NOOP steps at each reset, not
  scored. 3,000 scripted games of 40 steps, one per environment; the counts of the NOOPs each game
  starts with against the uniform on 0..29 (chi-square, 29 degrees of freedom, at p = 0.001)."""
  n, length = 3000, 40
  env = ScriptedAtari(n, length)
  play = make_play(env, _fixed_q(env.num_actions, action=1), max_steps=100, reset=env.reset, max_noops=30)
  out = jax.device_get(jax.jit(play)(None, jax.random.key(0), 0.0))
  k = leading_noops(env.sent())
  counts = np.bincount(k, minlength=30)
  assert len(counts) == 30 and counts[0] > 0 and counts[29] > 0  # exactly 0..29
  assert stats.chisquare(counts).statistic < stats.chi2.ppf(0.999, 29)
  # the NOOP steps are not scored: each game's score is its steps after them (reward 1 each)
  assert int(out["eval_episodes"]) == n and int(out["eval_steps_run"]) == length
  assert float(out["eval_return"]) == pytest.approx(length - k.mean(), abs=1e-3)
  np.testing.assert_array_equal(noop_counts(jax.random.key(0), 4, 0), 0)
