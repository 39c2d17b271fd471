"""Atari through envpool: Dopamine's preprocessing settings, shapes, both stepping routes, runs in one pool
(the routes, the runs and the reset step also through the "ale_py" backend; its own tests: test_atari_ale.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.rl.atari import available_games, env_seeds, make_atari, push_frame

STEPS = 24


def _random_actions(num_actions, shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).integers(0, num_actions, (STEPS, *shape)), jnp.int32)


def _play(env, actions, out_sharding=None):
  """``actions [STEPS, (runs,) envs]`` through ``env.step`` in one jitted scan (vmapped over runs
  when ``actions`` has a run axis)."""
  def one(acts):
    return jax.lax.scan(lambda c, a: (c, env.step(a)), 0, acts)[1]
  fn = one if actions.ndim == 2 else (lambda acts: jax.vmap(one, in_axes=1, out_axes=1)(acts))
  return jax.device_get(jax.jit(fn, out_shardings=out_sharding)(actions))


def test_the_pool_runs_dopamines_preprocessing():
  env = make_atari("Pong", num_envs=2, seeds=(5,))
  cfg = env.pool.config
  expected = dict(img_height=84, img_width=84, gray_scale=True, frame_skip=4, stack_num=1,
                  repeat_action_probability=0.25, episodic_life=False, zero_discount_on_life_loss=False,
                  reward_clip=False, use_fire_reset=False, noop_max=1, full_action_space=False,
                  use_inter_area_resize=True, max_episode_steps=25_000, num_envs=2, batch_size=2)
  assert {k: cfg[k] for k in expected} == expected
  assert list(cfg["env_seed"]) == env_seeds((5,), 2) == [10, 11]
  assert env.num_actions == 6  # Pong's minimal action set, as gymnasium's ALE/Pong-v5
  assert env.initial.dtype == np.uint8 and env.initial.shape == (2, 84, 84)
  out = _play(env, _random_actions(6, (2,)))
  assert out.frame.dtype == np.uint8 and out.frame.shape == (STEPS, 2, 84, 84)
  assert out.reward.dtype == np.float32 and out.terminated.dtype == np.bool_ and out.truncated.shape == (STEPS, 2)
  assert 0 < out.frame.mean() < 255 and out.frame.std() > 0  # a grayscale screen, not a blank
  assert {"Pong", "Breakout", "SpaceInvaders", "MsPacman", "Qbert"} <= set(available_games())


@pytest.mark.parametrize("backend", ["envpool", "ale_py"])
def test_xla_and_callback_routes_agree_and_runs_share_one_pool(backend):
  """One pool of 2 runs x 2 envs, vmapped (both routes, the callback one in an 8-device program),
  equals two one-run pools with those seeds: the same emulators, bit for bit (ALE is deterministic
  given its seed and actions)."""
  actions = _random_actions(6, (2, 2))
  mesh = jax.make_mesh((8,), ("data",), devices=jax.devices()[:8])
  routes = {via: make_atari("Pong", num_envs=2, seeds=(3, 4), step_via=via, backend=backend)
            for via in ("xla", "callback")}
  xla = _play(routes["xla"], actions)
  callback = _play(routes["callback"], actions, NamedSharding(mesh, P()))
  for run, seed in enumerate((3, 4)):
    single = _play(make_atari("Pong", num_envs=2, seeds=(seed,), backend=backend), actions[:, run])
    for got in (xla, callback):
      jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[:, run], b), got, single)
  assert not np.array_equal(xla.frame[:, 0], xla.frame[:, 1])  # the two runs' games differ


@pytest.mark.parametrize("backend", ["envpool", "ale_py"])
def test_an_episode_end_is_followed_by_a_reset_step(backend):
  env = make_atari("Pong", num_envs=1, max_episode_steps=3, backend=backend)
  out = _play(env, _random_actions(6, (1,)))
  # truncated at agent steps 3, 7, 11, ...: step 4 is the pool's reset step (not done, reward 0)
  np.testing.assert_array_equal(out.truncated[:8, 0], [0, 0, 1, 0, 0, 0, 1, 0])
  assert not out.terminated.any() and out.reward[3, 0] == 0
  np.testing.assert_array_equal(out.frame[3, 0], env.initial[0])  # Pong restarts on the same screen


def test_push_frame_shifts_or_starts_a_zero_padded_stack():
  stack = jnp.arange(2 * 1 * 1 * 4, dtype=jnp.uint8).reshape(2, 1, 1, 4)
  frame = jnp.full((2, 1, 1), 9, jnp.uint8)
  out = push_frame(stack, frame, jnp.array([False, True]))
  np.testing.assert_array_equal(out[0, 0, 0], [1, 2, 3, 9])
  np.testing.assert_array_equal(out[1, 0, 0], [0, 0, 0, 9])
