"""The command line, end to end, in a fresh process (as a user runs it)."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, env_devices=None):
  env = dict(os.environ)
  env["XLA_FLAGS"] = ""  # the CLI sees the machine's real devices, not the test's 8
  return subprocess.run([sys.executable, "-m", "jaxlab.main", *args], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300)


def test_quickstart_tiny_trains_resumes_and_prints_summary(tmp_path):
  workdir = str(tmp_path / "run")
  p = _run("--config=configs/quickstart.py:tiny", f"--workdir={workdir}", "--stop_after=12")
  assert p.returncode == 0, p.stderr
  p = _run("--config=configs/quickstart.py:tiny", f"--workdir={workdir}")
  assert p.returncode == 0, p.stderr
  assert "test_accuracy" in p.stdout and "steps_per_sec" in p.stdout
  rows = [json.loads(l) for l in open(os.path.join(workdir, "digits_mlp", "metrics.jsonl"))]
  assert [r["step"] for r in rows] == [5, 10, 15, 20]
  assert "opt/step_size" in rows[-1]  # MoMo's adaptive step reaches the metrics
  clip_rows = [json.loads(l) for l in open(os.path.join(workdir, "digits_clip", "metrics.jsonl"))]
  assert "zero_shot_accuracy" in clip_rows[-1] and "ot_zero_shot_accuracy" in clip_rows[-1]


def test_unknown_config_key_lists_valid_keys(tmp_path):
  p = _run("--config=configs/quickstart.py:tiny", f"--workdir={tmp_path}", "--config.experiments.digits_mlp.optimizer.lr=3")
  assert p.returncode != 0
  assert "unknown config key(s) ['experiments.digits_mlp.optimizer.lr']" in p.stderr
  assert "experiments.digits_mlp.optimizer.learning_rate" in p.stderr


def test_bad_mesh_is_one_clear_line(tmp_path):
  p = _run("--config=configs/quickstart.py:tiny", f"--workdir={tmp_path}",
           "--config.experiments.digits_mlp.mesh=((\"data\", 3), (\"model\", 1))")
  assert p.returncode == 2
  assert "needs a multiple of 3 devices" in p.stderr and "Traceback" not in p.stderr
