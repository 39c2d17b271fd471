"""Preemption: SIGTERM saves a checkpoint at the current step; rerunning resumes bit-identically."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preemption_worker.py")


def _start(workdir, out):
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one CPU device
  return subprocess.Popen([sys.executable, WORKER, str(workdir), str(out)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_saves_and_the_rerun_resumes_bit_identically(tmp_path):
  workdir = tmp_path / "run"
  proc = _start(workdir, tmp_path / "first.npz")
  metrics = workdir / "metrics.jsonl"
  deadline = time.time() + 240
  while time.time() < deadline and proc.poll() is None:  # wait until it is training
    if metrics.exists() and metrics.read_text().count("\n") >= 2:
      break
    time.sleep(0.2)
  proc.send_signal(signal.SIGTERM)
  stdout, stderr = proc.communicate(timeout=240)
  assert proc.returncode == 0, stderr[-3000:]
  first = json.loads(stdout.strip().splitlines()[-1])
  assert first["stopped"].startswith(f"preempted at step {first['steps']}") and first["steps"] < 1500
  saved = sorted(int(d) for d in os.listdir(workdir / "checkpoints") if d.isdigit())
  assert saved[-1] == first["steps"]  # a checkpoint at the step it stopped, not the last multiple

  resumed = _start(workdir, tmp_path / "resumed.npz")
  out, err = resumed.communicate(timeout=600)
  assert resumed.returncode == 0, err[-3000:]
  assert json.loads(out.strip().splitlines()[-1])["steps"] == 1500
  straight = _start(tmp_path / "straight", tmp_path / "straight.npz")
  out, err = straight.communicate(timeout=600)
  assert straight.returncode == 0, err[-3000:]
  a, b = np.load(tmp_path / "resumed.npz"), np.load(tmp_path / "straight.npz")
  for k in a.files:  # bit-equal by construction: the same compiled steps on this machine, state restored
    np.testing.assert_array_equal(a[k], b[k])
  steps = [json.loads(l)["step"] for l in metrics.read_text().splitlines()]
  assert steps == sorted(set(steps))  # no duplicated metrics lines after the resume
