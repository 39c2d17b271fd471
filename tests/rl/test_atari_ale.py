"""The "ale_py" Atari backend (ale-py's vector environment) against envpool's: the same emulators and
preprocessing, frame by frame, and through the task and its evaluation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dqn_atari
from jaxlab.experiment import task_context
from jaxlab.rl.atari import EnvpoolBackend, available_games, env_seeds, make_atari
from jaxlab.rl.atari_play import make_play
from jaxlab.tasks import make_task

pytest.importorskip("envpool")
ale_vector = pytest.importorskip("ale_py.vector_env")
from jaxlab.rl.atari_ale import rom_ids, vector_env_options  # noqa: E402  (needs ale_py)

EPISODE_STEPS = 60  # agent steps: every environment's episodes end (truncated, or game over) within the run
STEPS = 150


def _aligned_pools(game, sticky, n):
  """envpool's pool and ale-py's with the same seeds and options, except that ale-py draws 0 or 1
  NOOP frames at each reset (``noop_max=2``) where envpool always takes 1."""
  options = dict(frame_skip=4, sticky_action_prob=sticky, max_episode_steps=EPISODE_STEPS, full_action_space=False,
                 num_threads=0)
  ale = ale_vector.AtariVectorEnv(rom_ids()[game], n, **(vector_env_options(**options) | {"noop_max": 2}))
  return EnvpoolBackend().open(game, seeds=list(range(n)), **options), ale


@pytest.mark.parametrize("game, sticky", [("Breakout", 0.25), ("Boxing", 0.0)])
def test_same_frames_rewards_ends_and_lives_as_envpool_where_the_reset_frames_match(game, sticky):
  """Random actions in 8 environments, each compared while every reset so far took envpool's one
  NOOP frame (ale-py's frame counter says so; a reset that took none leaves the emulator one frame,
  and the sticky-action random stream one draw, behind envpool's). Equal at every step, except the
  frame of the step that ends an episode: ale-py leaves the skip loop before reading that frame's
  screen (jaxlab.rl.atari_ale, difference 2), so a moving object's last frame is missing there."""
  n = 8
  envpool_pool, ale = _aligned_pools(game, sticky, n)
  f1, _ = envpool_pool.reset()
  f2, info = ale.reset(seed=np.arange(n))
  aligned = info["episode_frame_number"] == 1
  assert 2 <= aligned.sum() < n  # seeds 0..7 draw both counts
  np.testing.assert_array_equal(f1[aligned], f2[aligned])
  rng = np.random.default_rng(0)
  counts = dict(compared=0, ends=0, rewarded=0, lives_lost=0)
  after_end = np.zeros(n, bool)
  lives = info["lives"]
  for _ in range(STEPS):
    actions = rng.integers(0, envpool_pool.action_space.n, n).astype(np.int32)
    f1, r1, term1, trunc1, info1 = envpool_pool.step(actions)
    f2, r2, term2, trunc2, info2 = ale.step(actions)
    aligned &= ~after_end | (info2["episode_frame_number"] == 1)  # this step reset the game
    end = term1 | trunc1
    for e in np.flatnonzero(aligned):
      assert (r1[e], term1[e], trunc1[e], info1["lives"][e]) == (r2[e], term2[e], trunc2[e], info2["lives"][e])
      if end[e]:
        # one emulator frame (1/60 s) of moving objects: measured <= 54 of 7,056 pixels on Breakout, 227 on Boxing
        assert np.mean(f1[e] != f2[e]) < 0.05, np.mean(f1[e] != f2[e])
      else:
        np.testing.assert_array_equal(f1[e], f2[e])
    counts["compared"] += int(aligned.sum())
    counts["ends"] += int((aligned & end).sum())
    counts["rewarded"] += int((aligned & (r1 != 0)).sum())
    counts["lives_lost"] += int((aligned & (info1["lives"] < lives) & ~after_end).sum())
    after_end, lives = end, info1["lives"]
  # what the comparison covered: a few hundred steps, episode ends, scores, and for Breakout lost lives
  assert counts["compared"] >= 2 * EPISODE_STEPS and counts["ends"] >= 2, counts
  assert counts["rewarded"] >= 1 and (game != "Breakout" or counts["lives_lost"] >= 2), counts


def _play(env, actions):
  return jax.device_get(jax.jit(lambda a: jax.lax.scan(lambda c, x: (c, env.step(x)), 0, a)[1])(actions))


def test_the_backend_runs_dopamines_options_and_presses_nothing_at_reset():
  env = make_atari("Breakout", num_envs=2, seeds=(5,), backend="ale_py", max_episode_steps=3)
  cfg = env.pool.config
  expected = dict(img_height=84, img_width=84, grayscale=True, frameskip=4, maxpool=True, stack_num=1,
                  repeat_action_probability=0.25, episodic_life=False, life_loss_info=False, reward_clipping=False,
                  use_fire_reset=False, noop_max=0, full_action_space=False, max_num_frames_per_episode=12)
  assert {k: cfg[k] for k in expected} == expected
  assert cfg["env_seed"] == env_seeds((5,), 2) == [10, 11] and env.backend == "ale_py"
  assert env.num_actions == 4 and env.initial.shape == (2, 84, 84) and 0 < env.initial.mean() < 255
  out = _play(env, jnp.zeros((8, 2), jnp.int32))
  # truncated at agent steps 3 and 7 (12 emulator frames each); step 4 is the reset step (reward 0)
  np.testing.assert_array_equal(out.truncated[:, 0], [0, 0, 1, 0, 0, 0, 1, 0])
  assert out.frame.dtype == np.uint8 and out.reward.dtype == np.float32 and out.lives.dtype == np.int32
  np.testing.assert_array_equal(out.lives[:, 0], 5)
  # every reset takes no emulator frame (envpool's takes one NOOP)
  _, info = env.pool.reset()
  np.testing.assert_array_equal(info["episode_frame_number"], [0, 0])
  for _ in range(4):
    _, _, _, truncated, info = env.pool.step(np.zeros(2, np.int32))
  np.testing.assert_array_equal(info["episode_frame_number"], [0, 0])  # step 4: the reset step
  assert {"Pong", "Breakout", "SpaceInvaders", "MsPacman", "Qbert", "UpNDown"} <= set(available_games("ale_py"))
  assert set(available_games("envpool")) <= set(available_games("ale_py"))


def test_the_task_and_its_evaluation_run_on_the_ale_py_backend():
  c = dqn_atari.get_config("tiny")
  c.env.backend = "ale_py"
  task = make_task(c, task_context(c))
  env = task.inference.data["env"]
  assert env.backend == "ale_py"
  data = jax.device_get(jax.jit(task.init_data)(None, jax.random.key(0)))
  # the same bookkeeping as with envpool (tests/rl/test_dqn_atari.py): 25-step episodes stored as
  # terminal at their last step, slot 25 the reset step, 26 a new episode
  np.testing.assert_array_equal(np.flatnonzero(data.replay.experience.first[0, :33]), [0, 26])
  np.testing.assert_array_equal(np.flatnonzero(data.replay.experience.discount[0, :33] == 0), [24])
  np.testing.assert_array_equal(data.replay.experience.frame[:, 0], env.initial)
  eval_env = make_atari("Pong", num_envs=2, seeds=(3,), sticky_action_prob=0.0, max_episode_steps=40,
                        backend="ale_py")
  q = lambda params, obs, key: jnp.zeros((obs.shape[0], eval_env.num_actions)).at[:, 0].set(1.0)  # noqa: E731  NOOP
  play = jax.jit(make_play(eval_env, q, max_steps=1000))
  first, second = (jax.device_get(play(None, jax.random.key(k), 0.0)) for k in (0, 1))
  assert int(first["eval_episodes"]) == 2 and int(first["eval_steps_run"]) == 40
  assert float(first["eval_return"]) == float(second["eval_return"])  # each evaluation resets the pool
