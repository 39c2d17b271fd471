"""The Atari DQN task: a tiny run through the command line, its episode bookkeeping, a new pool's restart."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dqn_atari
from jaxlab.errors import InputError
from jaxlab.rl.atari import make_atari
from jaxlab.rl.replay_frames import make_frame_replay
from jaxlab.tasks.dqn_atari import make_env_step, resolve_step_via
from jaxlab.train.mesh import make_mesh
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from tests.support.configs import with_overrides


def _tiny(**overrides):
  return with_overrides(dqn_atari.get_config("tiny"), **overrides)


def test_tiny_cli_run_trains_on_pong(cli, tmp_path):
  # the machine's one CPU device: envpool's XLA route (step_via auto)
  p = cli.main("--config=configs/dqn_atari.py:tiny", f"--workdir={tmp_path}", timeout=600)
  assert p.returncode == 0, p.stderr[-3000:]
  assert "DQN Atari Pong, softmoe head" in p.stdout and "frames_per_sec" in p.stdout
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
  last = rows[-1]
  # 33 random pool steps of 2 envs (64 transitions + 1), then 20 updates x 4 agent steps; 4 frames each.
  assert last["step"] == 20 and last["agent_steps"] == 66 + 20 * 4 and last["frames"] == 4 * last["agent_steps"]
  assert last["episodes"] >= 4 and np.isfinite(last["episode_return"])  # 25-step episodes ended and restarted
  assert all(np.isfinite(r["loss"]) for r in rows) and last["nonfinite_skipped"] == 0


def test_prefill_bookkeeping_and_a_new_pool_restarts_the_episodes():
  config = _tiny()
  task = make_task(config, task_context(config))
  inference = task.inference
  assert task.throughput == {"agent_steps": 4, "frames": 16}
  env = inference.data["env"]
  data = jax.device_get(jax.jit(task.init_data)(None, jax.random.key(0)))
  replay_state = data.replay
  # 33 pool steps from a state made by no pool: slot 0 restarts; 25 agent steps end each episode
  # (stored as terminal: Dopamine's emulator limit), slot 25 is envpool's reset step, 26 starts anew.
  assert int(data.epoch) == env.epoch and int(replay_state.index) == 33
  np.testing.assert_array_equal(np.flatnonzero(replay_state.experience.first[0, :33]), [0, 26])
  np.testing.assert_array_equal(np.flatnonzero(replay_state.experience.discount[0, :33] == 0), [24])
  np.testing.assert_array_equal(replay_state.experience.frame[:, 0], env.initial)
  assert int(data.episodes) == 2 and np.all(data.episode_length == 33 - 26)
  assert set(np.unique(replay_state.experience.reward)) <= {-1.0, 0.0, 1.0}  # clipped for learning
  # A checkpoint restored in a new process meets a new pool (another epoch): its next step
  # restarts every episode from that pool's first frames, in a slot marked first.
  other = make_atari("Pong", num_envs=2, max_episode_steps=25)
  replay = make_frame_replay(config.dqn.replay_capacity, 2, config.batch_size, config.dqn.min_replay_history)
  step = make_env_step(other, replay, None, clip_rewards=True, time_limit_terminal=True)
  after = jax.device_get(jax.jit(lambda d, k: step(d, None, jnp.ones(()), k))(data, jax.random.key(1)))
  assert int(after.epoch) == other.epoch != env.epoch and int(after.replay.index) == 34
  assert after.replay.experience.first[:, 33].all()
  np.testing.assert_array_equal(after.replay.experience.frame[:, 33], other.initial)
  assert np.all(after.stack[..., :2] == 0) and np.all(after.episode_length == 1)
  assert int(after.episodes) == 2  # the interrupted episodes are dropped, not counted


def test_step_via_auto_picks_the_route_the_mesh_allows():
  mesh = make_mesh((("data", -1), ("model", 1)))  # all devices
  assert resolve_step_via("auto", mesh) == ("xla" if jax.device_count() == 1 else "callback")
  assert resolve_step_via("callback", mesh) == "callback"
  if jax.device_count() > 1:
    with pytest.raises(InputError, match="env.step_via='xla' runs the emulator pool's custom calls in a one-device"):
      resolve_step_via("xla", mesh)


@pytest.mark.slow
def test_eight_vmapped_seeds_step_one_pool_on_eight_devices(tmp_path):
  from jaxlab.experiment import train
  result = train(_tiny(**{"runs.seeds": 8}), str(tmp_path), progress=False)  # callback route, 8 devices
  state = jax.device_get(result.state)
  assert state.params["Dense_0"]["kernel"].shape[0] == 8
  assert result.state.data_state.replay.experience.frame.sharding.spec[0] == "data"
  assert np.all(state.data_state.episodes >= 2) and np.all(np.isfinite(result.summary["final_loss"]))
  frames = state.data_state.replay.experience.frame  # [runs, envs, slots, 84, 84]: the runs' games differ
  assert len({f.tobytes() for f in frames}) == 8
