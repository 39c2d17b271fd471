"""Preemption: SIGTERM saves a checkpoint at the current step; rerunning resumes bit-identically."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")  # the worker scripts
WORKER = os.path.join(SUPPORT, "preemption_worker.py")


def _start(cli, workdir, out):
  return cli.popen([sys.executable, WORKER, str(workdir), str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_sigterm_saves_and_the_rerun_resumes_bit_identically(cli, tmp_path):
  workdir = tmp_path / "run"
  proc = _start(cli, workdir, tmp_path / "first.npz")
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

  resumed = _start(cli, workdir, tmp_path / "resumed.npz")
  out, err = resumed.communicate(timeout=600)
  assert resumed.returncode == 0, err[-3000:]
  assert json.loads(out.strip().splitlines()[-1])["steps"] == 1500
  straight = _start(cli, tmp_path / "straight", tmp_path / "straight.npz")
  out, err = straight.communicate(timeout=600)
  assert straight.returncode == 0, err[-3000:]
  a, b = np.load(tmp_path / "resumed.npz"), np.load(tmp_path / "straight.npz")
  for k in a.files:  # bit-equal by construction: the same compiled steps on this machine, state restored
    np.testing.assert_array_equal(a[k], b[k])
  steps = [json.loads(l)["step"] for l in metrics.read_text().splitlines()]
  assert steps == sorted(set(steps))  # no duplicated metrics lines after the resume


# Ctrl-C: the first SIGINT saves like SIGTERM, a second one stops at once; the handlers are the
# trainer's only while it trains.

SLOW_CONFIG = os.path.join(SUPPORT, "slow_digits_config.py")


def _ctrl_c_able(cli, command, stderr=subprocess.PIPE):
  # A terminal's Ctrl-C: SIGINT not ignored, even where pytest runs as a background job.
  return cli.popen(command, stdout=subprocess.PIPE, stderr=stderr,
                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _main(cli, *args, stderr=subprocess.PIPE):
  return _ctrl_c_able(cli, [sys.executable, "-m", "jaxlab.main", *args], stderr=stderr)


def _wait_for_lines(proc, metrics, lines):
  deadline = time.time() + 240
  while time.time() < deadline and proc.poll() is None:
    if metrics.exists() and metrics.read_text().count("\n") >= lines:
      return
    time.sleep(0.1)
  raise AssertionError(f"no {lines} metrics lines; exit code {proc.poll()}")


def test_ctrl_c_once_saves_the_current_step_twice_stops_at_once(cli, tmp_path):
  workdir = tmp_path / "run"
  args = (f"--config={SLOW_CONFIG}", f"--workdir={workdir}")  # batches of 0.3 s: signals land mid-run
  metrics = workdir / "metrics.jsonl"
  proc = _main(cli, *args)
  _wait_for_lines(proc, metrics, 1)
  proc.send_signal(signal.SIGINT)
  stdout, stderr = proc.communicate(timeout=240)
  assert proc.returncode == 0, stderr[-3000:]
  assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
  assert "jaxlab: Ctrl-C: stopping after this step with a checkpoint; rerun with the same workdir" in stderr
  stopped = [l for l in stdout.splitlines() if l.startswith("stopped")]
  assert stopped and "interrupted (Ctrl-C) at step" in stopped[0], stdout
  step = int(stopped[0].split("at step ")[1].split()[0])
  saved = sorted(int(d) for d in os.listdir(workdir / "checkpoints") if d.isdigit())
  assert saved == [step] and step < 1000  # the step it reached, not a multiple of checkpoint_every

  lines = metrics.read_text().count("\n")
  log = tmp_path / "resumed.stderr"
  with open(log, "w") as stderr_file:  # the same command resumes; two Ctrl-C stop it at once, without saving
    resumed = _main(cli, *args, stderr=stderr_file)
    _wait_for_lines(resumed, metrics, lines + 1)
    resumed.send_signal(signal.SIGINT)
    deadline = time.time() + 60
    while "jaxlab: Ctrl-C: stopping" not in log.read_text() and time.time() < deadline:
      time.sleep(0.01)  # the first one handled (while a 0.3 s batch is made), so the next is a second one
    resumed.send_signal(signal.SIGINT)
    sent = time.time()
    stdout, _ = resumed.communicate(timeout=240)
  stderr = log.read_text()
  assert time.time() - sent < 30  # at once: not after the remaining steps of 0.3 s
  assert resumed.returncode == 130, stderr[-3000:]
  assert "Traceback" not in stderr
  assert f"jaxlab: stopped by Ctrl-C without saving; {workdir} keeps its last checkpoint" in stderr
  assert sorted(int(d) for d in os.listdir(workdir / "checkpoints") if d.isdigit()) == [step]
  steps = [json.loads(l)["step"] for l in metrics.read_text().splitlines()]
  assert steps == sorted(set(steps)) and steps[-1] > step  # resumed from the saved step, no duplicates


def test_signal_handlers_are_the_callers_again_after_train(tmp_path):
  import threading

  import jax

  from configs import digits_mlp
  from jaxlab.train.preemption import PreemptionWatcher
  from jaxlab.experiment import train

  config = digits_mlp.get_config("tiny")
  config.num_steps = 2
  before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
  train(config, str(tmp_path), devices=jax.devices()[:1], progress=False)
  assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before  # a notebook keeps its Ctrl-C

  installed = []

  def in_a_thread():  # Python installs handlers from the main thread only: the watcher must not try
    with PreemptionWatcher(None):
      installed.append(signal.getsignal(signal.SIGINT))

  thread = threading.Thread(target=in_a_thread)
  thread.start()
  thread.join(timeout=60)
  assert installed == [before[0]]


STARTUP_WORKER = os.path.join(SUPPORT, "startup_sigint_worker.py")


def test_ctrl_c_during_start_up_is_exit_130_with_one_line_never_a_crash(cli, tmp_path):
  """A Ctrl-C while the config loads or the task builds stops at the next safe point (exit 130);
  one while the first step compiles is the first Ctrl-C of training (saves, exit 0)."""
  procs = {point: _ctrl_c_able(cli, [sys.executable, STARTUP_WORKER, point, "--config=configs/digits_mlp.py:tiny",
                                     f"--workdir={tmp_path / point}"])
           for point in ("config", "setup", "step")}
  for point, proc in procs.items():
    stdout, stderr = proc.communicate(timeout=240)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, (point, stderr[-3000:])
    if point == "step":
      assert proc.returncode == 0, stderr[-3000:]
      assert "interrupted (Ctrl-C) at step" in stdout
      continue
    assert proc.returncode == 130, (point, proc.returncode, stderr[-3000:])  # never a signal death (< 0)
    lines = [l for l in stderr.splitlines() if l.startswith("jaxlab:")]
    assert lines == [f"jaxlab: stopped by Ctrl-C without saving; {tmp_path / point} keeps its last checkpoint "
                     "(rerun to resume from it)"], (point, stderr)
    assert not (tmp_path / point / "checkpoints").exists() or not os.listdir(tmp_path / point / "checkpoints")
