"""The Atari task's Rainbow family: presets equal to Dopamine's gin files (google/dopamine @ 5873f54),
DER's schedule as Dopamine's Atari 100k loop counts it, terminal on life loss with a real envpool game,
no-op starts of training games, and tiny training runs of the Rainbow presets."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dqn_atari
from jaxlab.errors import InputError
from jaxlab.rl.atari import make_atari
from jaxlab.rl.replay_frames import make_frame_replay
from jaxlab.rl.dqn import agent_step_sync
from jaxlab.tasks.dqn_atari import empty_data, make_env_step
from jaxlab.experiment import task_context, train
from jaxlab.tasks import make_task
from jaxlab.train.loop import _calls, _crossed
from tests.support.scripted_atari import ScriptedAtari, leading_noops

# Every value each preset sets, as Dopamine's configs have it (docs/methods/soft_moe_rl.md, the
# protocol tables, cite file:line). Counts are agent steps. num_steps = updates.
_DQN = {
    "env.name": "Pong", "env.sticky_action_prob": 0.25, "env.frame_skip": 4, "env.max_episode_steps": 25_000,
    "env.time_limit_is_terminal": True, "env.terminal_on_life_loss": False, "env.full_action_space": False,
    "env.num_envs": 1, "env.max_noops": 0, "network.encoder": "nature", "network.head": "softmoe",
    "network.tokenizer": "per_conv", "network.num_experts": 8, "network.expert_hidden": 512, "network.num_atoms": 1,
    "network.dueling": False, "network.noisy": False, "network.noisy_hidden": False, "network.noisy_experts": False,
    "network.noise_per_row": False, "network.importance_weight": 0.0, "network.load_balancing_weight": 0.0,
    "dqn.gamma": 0.99, "dqn.update_horizon": 1, "dqn.update_period": 4, "dqn.target_update_period": 8000,
    "dqn.min_replay_history": 20_000, "dqn.replay_capacity": 1_000_000, "batch_size": 32,
    "dqn.epsilon_end": 0.01, "dqn.epsilon_decay_period": 250_000, "dqn.epsilon_schedule": "linear",
    "dqn.double_dqn": False, "dqn.loss": "mse", "dqn.clip_rewards": True,
    "optimizer.name": "adam", "optimizer.learning_rate": 6.25e-5, "optimizer.eps": 1.5e-4,
    "num_steps": 200 * 250_000 // 4,
}
# Dopamine's `noisy` reaches the head, the BASELINE's hidden layer and the experts; its MoE agents draw
# the online pass's noise per row (full_rainbow_moe_agent.py:85-86, rainbow_100k_moe_agent.py:84-85)
_RAINBOW = {"network.num_atoms": 51, "dqn.vmax": 10.0, "dqn.vmin": None, "network.dueling": True,
            "network.noisy": True, "network.noisy_hidden": True, "network.noisy_experts": True,
            "network.noise_per_row": True, "dqn.double_dqn": True, "network.num_experts": 4,
            "network.expert_hidden": 512, "dqn.epsilon_schedule": "zero"}
EXPECTED = {
    "dqn": _DQN,
    "dqn_impala": {**_DQN, "network.encoder": "impala"},
    "full_rainbow": {**_DQN, **_RAINBOW, "network.encoder": "impala", "dqn.update_horizon": 3},
    "der": {**_DQN, **_RAINBOW, "network.encoder": "nature", "env.sticky_action_prob": 0.0,
            "env.terminal_on_life_loss": True, "dqn.update_horizon": 10, "dqn.update_period": 1,
            "dqn.target_update_period": 2000, "dqn.min_replay_history": 1600, "dqn.epsilon_decay_period": 2000,
            "optimizer.learning_rate": 1e-4, "env.max_noops": 30, "dqn.eval_episodes": 100,
            "num_steps": 98_399, "eval_every": 10_001, "eval_offset": 1_611},  # test_der_schedule_is_dopamines
}


def _get(c, key):
  for part in key.split("."):
    c = c[part]
  return c


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_each_preset_equals_its_dopamine_config(preset):
  c = dqn_atari.get_config(preset)
  got = {k: _get(c, k) for k in EXPECTED[preset]}
  assert got == EXPECTED[preset]
  assert dqn_atari.get_config(f"{preset},tiny").num_steps <= 20


def test_the_argument_is_a_preset_then_tiny():
  assert dqn_atari.get_config("tiny").to_dict() == dqn_atari.get_config("dqn,tiny").to_dict()
  assert dqn_atari.get_config().to_dict() == dqn_atari.get_config("dqn").to_dict()
  for bad in ("rainbow", "tiny,der", "der,tiny,tiny"):
    with pytest.raises(ValueError, match="takes a preset in"):
      dqn_atari.get_config(bad)


@pytest.mark.parametrize("key, value, message", [
    ("env.terminal_on_life_loss", 1, "env.terminal_on_life_loss"),
    ("dqn.epsilon_schedule", "constant", r"dqn.epsilon_schedule='constant'; choose one of \('linear', 'zero'\)"),
    ("dqn.update_horizon", 0, r"dqn.update_horizon=0; must be an int in \[1, 1000\]"),
    ("dqn.update_horizon", 500, r"dqn.update_horizon=500 leaves a full replay 9 500-step transitions"),
])
def test_bad_rainbow_keys_are_one_line_naming_them(key, value, message):
  c = dqn_atari.get_config("der,tiny")
  node, leaf = key.split(".")
  with c.ignore_type():  # a value of the wrong type, as a hand-written config may hold
    c[node][leaf] = value
  with pytest.raises(InputError, match=message):
    make_task(c, task_context(c))


def _dopamine_der_loop(iterations=10, training_steps=10_000, min_replay_history=1600, horizon=10, target_period=2000):
  """Dopamine's Atari 100k loop, counting only. DataEfficientAtariRunner._run_parallel (atari_100k_runner.py:
  264-347): agent.step(), the environment's step, then a phase ends once total_steps > max_steps; the
  evaluation follows each phase (470-482). Atari100kRainbowMoEAgent._train_step (rainbow_100k_moe_agent.py:
  225-234): an update when replay.add_count > min_replay_history (update_period 1), a target sync when
  training_steps % target_update_period == 0, then training_steps += 1. The replay's accumulator emits a
  transition once more than update_horizon have arrived (accumulator.py: trajectory_len > update_horizon);
  no terminal in the warm-up here (each would move its end by a few steps)."""
  calls = transitions = updates = 0
  evals, syncs = [], []
  for _ in range(iterations):
    total = 0
    while True:
      total += 1
      if transitions - horizon > min_replay_history:
        updates += 1
        if calls % target_period == 0:
          syncs.append(updates)
      calls += 1
      transitions += 1
      if total > training_steps:
        break
    evals.append(updates)
  return {"agent_steps": calls, "updates": updates, "evals": evals, "syncs": syncs}


def test_der_schedule_is_dopamines():
  """The warm-up is inside Dopamine's 10 x 10,000 agent steps (its loop runs 10,001 per iteration:
  100,010), the evaluations come after the same updates as Dopamine's (calls end there), and the target
  syncs at Dopamine's agent steps."""
  c = dqn_atari.get_config("der")
  ref = _dopamine_der_loop()
  assert ref["agent_steps"] == 100_010 and ref["updates"] == 98_399 and ref["evals"][0] == 10_001 - 1_611
  prefill = c.dqn.min_replay_history + c.dqn.update_horizon  # dqn_atari's random warm-up, in agent steps
  assert c.num_steps == ref["updates"]
  assert prefill + c.num_steps + 1 == ref["agent_steps"]  # + Dopamine's act after its last update
  calls = _calls(0, c.num_steps, c.steps_per_call, c.eval_offset)  # the trainer's calls: (first step, steps)
  evals = [start + k for start, k in calls
           if _crossed(start + c.eval_offset, start + k + c.eval_offset, c.eval_every) or start + k == c.num_steps]
  assert evals == ref["evals"]  # at call ends, exactly: the trainer evaluates only there
  assert calls[0] == (0, 33) and {k for _, k in calls[1:]} == {c.steps_per_call}  # a short first call, then 137s
  sync = agent_step_sync(c.dqn.target_update_period, c.dqn.update_period, prefill)
  state = type("S", (), {"step": jnp.arange(1, c.num_steps + 1), "extra": jnp.zeros(()), "params": jnp.ones(())})
  np.testing.assert_array_equal(np.flatnonzero(np.asarray(sync(state))) + 1, ref["syncs"])


def test_training_games_start_after_dopamines_noops():
  """DataEfficientAtariRunner._initialize_episode (atari_100k_runner.py:192-216) starts every training game
  (the first, and each after a game over) with 0..29 NOOP steps that the agent neither stores nor counts:
  the replay holds only the agent's steps, each game's first stored frame is the one after its no-ops,
  with a zero-padded stack, and the game's return is its agent steps' rewards."""
  length, steps = 40, 300
  env = ScriptedAtari(1, length)
  replay = make_frame_replay(1024, 1, 4, 4)
  step = make_env_step(env, replay, lambda params, stack, rng: (jnp.ones((1, 4)).at[:, 0].set(0.0), {}, rng),
                       clip_rewards=False, time_limit_terminal=True, max_noops=30)

  def run(rng):
    def body(d, k):
      d = step(d, {}, jnp.zeros(()), k)
      return d, (d.first, d.stack)
    return jax.lax.scan(body, empty_data(env, replay), jax.random.split(rng, steps))
  data, (first, stacks) = jax.device_get(jax.jit(run)(jax.random.key(0)))
  sent = env.sent()[:, 0]
  assert (sent != 0).sum() == steps  # the no-op steps are not agent steps
  # each game: its no-ops, its agent steps to the end, envpool's reset step (an agent step whose action is ignored)
  games = len(sent) // (length + 1)
  k = leading_noops(sent[:games * (length + 1)].reshape(games, length + 1).T)
  assert games >= 8 and k.max() <= 29 and len(set(k.tolist())) > 1
  stored = data.replay.experience.frame[0, :steps, 0, 0].astype(int)  # each stored frame's steps since its reset
  held = np.concatenate([np.arange(x, length + 1) for x in k])  # the no-op frames are not stored
  np.testing.assert_array_equal(stored[:len(held)], held)
  starts = np.flatnonzero(first[:, 0])[:games - 1]  # after each reset step (the first game's restart is slot 0)
  np.testing.assert_array_equal(stacks[starts, 0, 0, 0, -1], k[1:])  # the frame after the no-ops
  assert np.all(stacks[starts, 0, :, :, :3] == 0)
  done = min(int(data.episodes), games)
  np.testing.assert_array_equal(data.returns[:done], length - k[:done])  # the agent's steps' rewards only
  c = dqn_atari.get_config("tiny")
  c.env.max_noops = 30
  with pytest.raises(InputError, match="env.max_noops=30 needs env.num_envs=1"):
    make_task(c, task_context(c))


def _breakout(life_loss, steps=260):
  """``steps`` random agent steps of one Breakout game (no sticky actions: the same game for the same keys)."""
  env = make_atari("Breakout", num_envs=1, sticky_action_prob=0.0, max_episode_steps=1000)
  replay = make_frame_replay(1024, 1, 4, 4)
  step = make_env_step(env, replay, None, clip_rewards=True, time_limit_terminal=True,
                       terminal_on_life_loss=life_loss)

  def run(rng):
    def body(d, k):
      d = step(d, None, jnp.ones(()), k)
      return d, (d.first, d.stack, d.episode_return)
    return jax.lax.scan(body, empty_data(env, replay, track_lives=life_loss), jax.random.split(rng, steps))
  return jax.device_get(jax.jit(run)(jax.random.key(0)))


def test_a_lost_life_ends_the_agents_episode_but_not_the_game():
  (on, (first_on, stack_on, ret_on)), (off, (first_off, _, ret_off)) = _breakout(True), _breakout(False)
  e_on, e_off = on.replay.experience, off.replay.experience
  for leaf in ("frame", "action", "reward"):  # the same game, step for step
    np.testing.assert_array_equal(getattr(e_on, leaf), getattr(e_off, leaf))
  lost = np.flatnonzero((e_on.discount[0, :260] == 0) & (e_off.discount[0, :260] == 1))
  assert len(lost) >= 3  # Breakout's 5 lives: random play loses some within 260 steps
  # each lost life: stored terminal, and the next frame starts a zero-padded stack in a slot marked first
  np.testing.assert_array_equal(np.flatnonzero(first_on[:, 0] & ~first_off[:, 0]), lost)
  assert e_on.first[0, lost + 1].all() and not e_off.first[0, lost + 1].any()
  assert np.all(stack_on[lost, 0, :, :, :3] == 0)
  np.testing.assert_array_equal(stack_on[lost, 0, :, :, 3], e_on.frame[0, lost + 1])
  # the reported returns are whole games', as without life-loss terminals
  np.testing.assert_array_equal(ret_on, ret_off)
  assert int(on.episodes) == int(off.episodes) and np.array_equal(on.returns, off.returns)
  # the replay samples the terminal transitions before each new life (their next stack is unused)
  replay = make_frame_replay(1024, 1, 4, 4)
  ok = replay.n_step_valid(on.replay, jnp.zeros(len(lost), jnp.int32), jnp.asarray(lost), 1)
  assert np.all(ok)


def test_der_tiny_cli_run_trains(cli, tmp_path):
  """The documented command in a fresh one-device process (envpool's XLA route): ~36 s of CPU on this
  2-core machine, nearly all compiling C51 + the noisy dueling head + 10-step sampling."""
  p = cli.main("--config=configs/dqn_atari.py:der,tiny", f"--workdir={tmp_path}", timeout=600)
  assert p.returncode == 0, p.stderr[-3000:]
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
  last = rows[-1]
  # 64 + 10 pool steps of warm-up (10-step windows need their successors), then 10 updates x 1 agent step
  assert last["step"] == 10 and last["agent_steps"] == 74 + 10 and last["frames"] == 4 * last["agent_steps"]
  assert all(r["epsilon"] == 0 for r in rows if "epsilon" in r)  # zero_epsilon: the noisy net explores
  assert all(np.isfinite(r["loss"]) for r in rows if "loss" in r) and last["nonfinite_skipped"] == 0


@pytest.mark.slow
def test_full_rainbow_tiny_trains_a_few_steps(tmp_path):
  """~70 s of CPU here: the IMPALA encoder's gradient compiles slowly on XLA:CPU."""
  result = train(dqn_atari.get_config("full_rainbow,tiny"), str(tmp_path), progress=False)
  state = jax.device_get(result.state)
  assert int(state.step) == 10 and np.isfinite(result.summary["final_loss"])
  assert "ImpalaEncoder_0" in state.params and state.data_state.lives is None


@pytest.mark.parametrize("preset, top", [
    ("dqn_impala", {"ImpalaEncoder_0", "SoftMoE_0", "Dense_0"}),
    ("full_rainbow", {"ImpalaEncoder_0", "SoftMoE_0", "rainbow_head"}),
    ("der", {"NatureEncoder_0", "SoftMoE_0", "rainbow_head"})])
def test_each_preset_builds_its_task(preset, top):
  config = dqn_atari.get_config(f"{preset},tiny")
  task = make_task(config, task_context(config))
  params = jax.eval_shape(task.init_params, jax.random.key(0))
  assert set(params) == top
  tokens = 64 if preset == "der" else 32  # 121 tokens of the encoder's channels
  assert params["SoftMoE_0"]["experts"]["w1"].shape[1] == tokens
  if "rainbow_head" in params:  # C51 (51 atoms) x Pong's 6 actions, dueling, noisy
    head = params["rainbow_head"]
    assert head["advantage"]["kernel_sigma"].shape[1] == 6 * 51 and head["value"]["kernel_mu"].shape[1] == 51
  data = jax.eval_shape(task.init_data, params, jax.random.key(1))
  assert (data.lives is not None) == (preset == "der")  # terminal on life loss keeps the lives
