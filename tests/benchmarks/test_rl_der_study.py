"""benchmarks/rl_der_study.py: DER's settings, Dopamine's per-iteration train average, a resumable tiny run."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from benchmarks import rl_der_study
from benchmarks.rl_der_study import cell_config, main, train_iterations
from jaxlab.experiment.validate import validate_trainer_config

pytest.importorskip("envpool")


@pytest.mark.parametrize("head", ["dense", "softmoe"])
def test_a_cell_is_ders_config_within_the_agent_step_budget(head):
  c = cell_config("Breakout", head, agent_steps=100_000, seeds=3, size="real", eval_episodes=100)
  validate_trainer_config(c)
  assert (c.dqn.update_period, c.dqn.target_update_period, c.dqn.min_replay_history) == (1, 2000, 1600)
  assert (c.dqn.epsilon_end, c.dqn.epsilon_decay_period, c.dqn.double_dqn) == (0.01, 2000, True)
  assert (c.optimizer.learning_rate, c.optimizer.eps, c.batch_size) == (1e-4, 1.5e-4, 32)
  assert (c.env.name, c.env.sticky_action_prob, c.env.terminal_on_life_loss) == ("Breakout", 0.0, True)
  assert (c.dqn.update_horizon, c.dqn.replay_scheme, c.network.num_atoms, c.network.noisy) == (
      10, "prioritized", 51, True)
  assert c.network.head == head and c.network.encoder == "nature" and c.network.num_experts == 4
  assert (c.dqn.eval_episodes, c.dqn.eval_epsilon) == (100, 0.001) and c.runs.seeds == 3
  # warm-up (1600 + 10 agent steps) + one update per agent step: never more than the budget
  agent_steps = c.dqn.min_replay_history + c.dqn.update_horizon + c.num_steps
  assert 100_000 - c.steps_per_call < agent_steps <= 100_000 and c.num_steps % c.steps_per_call == 0
  assert c.log_every == rl_der_study.ITERATION_STEPS
  assert (c.env.backend, c.env.step_via) == ("envpool", "auto")  # --backend / --step_via: the GPU plan's ale_py
  ale = cell_config("Breakout", head, agent_steps=100_000, seeds=3, size="real", eval_episodes=100, backend="ale_py",
                    step_via="callback")
  assert (ale.env.backend, ale.env.step_via) == ("ale_py", "callback")


def test_train_iterations_is_the_mean_of_the_episodes_that_ended_in_each():
  # two runs; run 0 ends episodes scoring 1, 3 | 5 ; run 1 none | 2, 2, 2
  rows = [{"agent_steps": 10, "episodes": [2, 0], "episode_return": [2.0, np.nan]},
          {"agent_steps": 20, "episodes": [3, 3], "episode_return": [3.0, 2.0]},
          {"agent_steps": 30, "loss": 0.1}]
  it = train_iterations(rows, 2, window=100)
  assert [r["agent_steps"] for r in it] == [10, 20]
  assert it[0]["average_return"] == [2.0, None] and it[0]["episodes"] == [2, 0]
  assert it[1]["average_return"] == [5.0, 2.0] and it[1]["exact"]
  past = train_iterations([{"agent_steps": 5, "episodes": 120, "episode_return": 7.0}], 1, window=100)
  assert past[0]["average_return"] == [7.0] and not past[0]["exact"]  # the ring's mean, flagged


def _cell(game, head, scores):
  return {"game": game, "head": head, "eval_return": scores, "wall_time_s": 1.0,
          "human_normalized": [rl_der_study.human_normalized(game, x) for x in scores]}


def test_the_report_is_built_from_the_cell_files_and_compares_heads_on_the_same_games(tmp_path):
  args = rl_der_study.parse_args(["--games=Pong,Boxing", "--seeds=3", f"--workdir={tmp_path}",
                                  f"--out={tmp_path}/der.json", "--report_only"])
  cells = tmp_path / "cells"
  cells.mkdir()
  for game, head, scores in (("Pong", "dense", [-20.7, -19.0, -15.0]), ("Pong", "softmoe", [-18.0, -17.0, -10.0]),
                             ("Boxing", "dense", [0.1, 1.0, 2.0])):  # Boxing/softmoe not run yet
    (cells / f"{game}__{head}.json").write_text(json.dumps(_cell(game, head, scores)))
  result = rl_der_study.run_study(args)
  assert json.loads((tmp_path / "der.json").read_text()) == result
  assert result["budget"] == {"agent_steps": 100_000, "frames": 400_000, "games": ["Pong", "Boxing"], "seeds": 3,
                              "heads": ["dense", "softmoe"], "size": "real", "eval_episodes": 100, "backend": "envpool"}
  assert result["not_run"] == ["Boxing/softmoe"] and set(result["cells"]) == {"Pong/dense", "Pong/softmoe", "Boxing/dense"}
  iqm = result["iqm_human_normalized"]  # Pong only: the game both heads finished
  assert iqm["dense"]["games"] == ["Pong"] and iqm["dense"]["runs"] == 3
  assert iqm["softmoe"]["iqm"] > iqm["dense"]["iqm"] and (tmp_path / "der.png").exists()


@pytest.mark.slow  # compiles the task's programs (~25 s quiet, over a minute on a loaded 2-core CPU): make test-slow
def test_a_tiny_study_writes_the_json_and_a_rerun_skips_the_finished_cell(tmp_path, capsys):
  argv = ["--size=tiny", "--games=Pong", "--heads=dense", "--seeds=1", "--agent_steps=80", "--eval_episodes=1",
          f"--workdir={tmp_path}/w", f"--out={tmp_path}/der.json"]
  assert main(argv) == 0
  result = json.loads((tmp_path / "der.json").read_text())
  assert result["budget"]["agent_steps"] == 80 and result["budget"]["frames"] == 320
  cell = result["cells"]["Pong/dense"]
  assert cell["agent_steps"] <= 80 and cell["seeds"] == 1 and cell["eval_episodes"] == [1.0]
  assert cell["human_normalized"] == [pytest.approx((cell["eval_return"][0] + 20.7) / 35.3)]
  assert set(result["iqm_human_normalized"]) == {"dense"} and (tmp_path / "der.png").exists()
  cell_file = tmp_path / "w" / "cells" / "Pong__dense.json"
  stamp = os.stat(cell_file).st_mtime_ns
  capsys.readouterr()
  assert main(argv) == 0
  assert "Pong/dense: done, skipped" in capsys.readouterr().out and os.stat(cell_file).st_mtime_ns == stamp


@pytest.mark.parametrize("args,words", [(["--games=pong"], "'pong' is not an Atari 100k game; did you mean 'Pong'"),
                                        (["--heads=top1"], "--heads='top1': unknown ['top1']"),
                                        (["--agent_steps=1000"], "--agent_steps=1000 leaves no updates"),
                                        (["--seeds=0"], "--seeds=0: must be >= 1")])
def test_bad_arguments_are_one_line(args, words, capsys):
  with pytest.raises(SystemExit) as e:
    main(args + ["--workdir=/nonexistent"])
  err = capsys.readouterr().err.strip().splitlines()
  assert e.value.code == 2 and len(err) == 1 and words in err[0], err


@pytest.mark.slow  # two tiny trainings (compilation): a minute
def test_measure_writes_the_cost_of_each_head(tmp_path):
  out = tmp_path / "cost.json"
  assert main(["--measure", "--size=tiny", "--seeds=1", "--games=Pong", "--measure_steps=4",
               f"--measure_out={out}"]) == 0
  record = json.loads(out.read_text())
  assert [r["head"] for r in record["rows"]] == ["dense", "softmoe"]
  assert all(r["s_per_1k_agent_steps"] > 0 for r in record["rows"]) and "--measure" in record["command"]
