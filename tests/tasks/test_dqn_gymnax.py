"""DQN on gymnax environments beyond MinAtar, and on your own, through the command line."""

from __future__ import annotations

import json
import math
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join("configs", "examples", "own_env.py")
GUIDE = os.path.join(REPO, "docs", "guides", "soft_moe_rl.md")


def _rows(workdir):
  return [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]


@pytest.mark.parametrize("name,extra,description", [
    ("CartPole-v1", [], "DQN CartPole-v1, softmoe head"),         # vector: MLP + per-feature tokens
    ("Catch-bsuite", ["--config.dqn.eval_steps=0"], "DQN Catch-bsuite, softmoe head"),  # 10x5 grid: conv
])
def test_a_gymnax_environment_trains_through_the_cli(cli, tmp_path, name, extra, description):
  p = cli.main("--config=configs/dqn_minatar.py:tiny", f"--workdir={tmp_path}", f"--config.env.name={name}", *extra)
  assert p.returncode == 0, p.stderr[-3000:]
  assert description in p.stdout
  last = _rows(tmp_path)[-1]
  assert last["step"] == 20 and last["episodes"] >= 1 and math.isfinite(last["loss"])
  # the Soft-MoE head's routing over this environment's tokens is logged: 2 experts in the tiny config
  assert {"moe/dispatch_entropy", "moe/combine_entropy", "moe/expert_load/0", "moe/expert_load/1"} <= set(last)
  assert abs(last["moe/expert_load/0"] + last["moe/expert_load/1"] - 1) < 1e-5


def test_the_guide_command_for_cartpole_is_the_tested_one():
  text = open(GUIDE, encoding="utf-8").read()
  assert ("python -m jaxlab.main --config=configs/dqn_minatar.py:tiny --workdir=runs/cartpole "
          "--config.env.name=CartPole-v1\n") in text
  assert "python -m jaxlab.main --config=configs/examples/own_env.py:tiny --workdir=runs/corridor\n" in text


def test_the_guide_shows_the_own_env_example_as_shipped():
  text = open(GUIDE, encoding="utf-8").read()
  assert f"```python\n{open(os.path.join(REPO, EXAMPLE)).read()}```" in text


def test_your_own_environment_registered_in_a_config_file_trains(cli, tmp_path):
  p = cli.main(f"--config={EXAMPLE}:tiny", f"--workdir={tmp_path}")
  assert p.returncode == 0, p.stderr[-3000:]
  assert "DQN corridor, softmoe head" in p.stdout
  rows = _rows(tmp_path)
  # a corridor episode is 3..20 steps: the tiny run's 145 frames finish several, each return 0 or 1
  assert rows[-1]["step"] == 20 and rows[-1]["episodes"] >= 5 and 0 <= rows[-1]["episode_return"] <= 1
  assert "moe/expert_load/3" in rows[-1] and math.isfinite(rows[-1]["eval_return"])


@pytest.mark.parametrize("name,message", [
    ("cartpole", "did you mean 'CartPole-v1'?"),
    ("Pendulum-v1", "environment 'Pendulum-v1' (env.name) has a Box action space; DQN needs discrete actions"),
])
def test_a_bad_environment_name_is_one_line(cli, tmp_path, name, message):
  p = cli.main("--config=configs/dqn_minatar.py:tiny", f"--workdir={tmp_path}", f"--config.env.name={name}")
  assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-3000:]
  lines = p.stderr.strip().splitlines()
  assert len(lines) == 1 and message in lines[0], lines
