"""The sharding guide's two-process launch, run as written, and resuming across process counts.

The guide's "try it on one machine" block (two CPU processes on localhost, one device each) is
read from docs/guides/sharding.md and run with bash, so the documented command is the tested one.
Every run here is ``digits_mlp:tiny`` (20 steps, checkpoints at 10 and 20) with the same global
batch; a resume starts from the step-10 checkpoint of a run whose step-20 checkpoint is removed,
as if the job had been killed between the two saves.
"""

import os
import shutil
import signal
import socket
import subprocess

import jax
import numpy as np
import pytest

import jaxlab
from configs import digits_mlp
from jaxlab.experiment import train
from tests.support.guide_blocks import guide_block
from tests.support.tolerances import steps_tol

STEPS = 20
# As tests/experiment/test_multiprocess.py: the rounding of ~150 operations per parameter and step,
# carried on over the steps, from summing the gradient over another number of devices.
TOL = steps_tol(STEPS, 150)


def guide_launch_block() -> str:
  """The guide's bash block that starts the two local processes."""
  return guide_block("sharding.md", "JAX_PROCESS_ID=$i")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def start_as_the_guide_says(cli, workdir: str) -> subprocess.Popen:
  """Starts the guide's block with ``WORKDIR=workdir`` (finish it with :func:`finish`), one CPU device
  per process."""
  return cli.popen(["bash", "-c", guide_launch_block()], env={"PORT": str(_free_port()), "WORKDIR": workdir},
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def finish(p: subprocess.Popen, workdir: str) -> str:
  """Waits for a launch; returns its output (both processes) after checking that both finished."""
  try:
    out = p.communicate(timeout=240)[0]
  except subprocess.TimeoutExpired:  # one process died, the other waits for it: end both
    os.killpg(p.pid, signal.SIGKILL)
    out = p.communicate()[0]
    raise AssertionError(f"the guide's launch did not finish:\n{out[-4000:]}")
  assert p.returncode == 0 and "Traceback" not in out and "jaxlab: error" not in out, out[-4000:]
  assert f"checkpoints are under {workdir}" in out and "2 x cpu" in out, out[-4000:]  # process 0's summary
  return out


def launch_as_the_guide_says(cli, workdir: str) -> str:
  """Runs the guide's block with ``WORKDIR=workdir``; returns its output."""
  return finish(start_as_the_guide_says(cli, workdir), workdir)


def _killed_after_step_10(src: str, dst: str) -> str:
  """A copy of the finished run ``src`` as a job killed between its checkpoints at 10 and 20 left it."""
  shutil.copytree(src, dst)
  shutil.rmtree(os.path.join(dst, "checkpoints", str(STEPS)))
  return dst


def _state(workdir: str) -> dict:
  run = jaxlab.load_run(workdir, opt_state=True)
  assert run.step == STEPS
  return {"params": run.params, "opt_state": run.opt_state}


def _max_difference(a, b) -> float:
  diffs = jax.tree.map(lambda x, y: float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)),
                                                 initial=0.0)), a, b)
  return max(jax.tree.leaves(diffs))


def _assert_close(got: dict, want: dict) -> float:
  for (path, g), w in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), **TOL, err_msg=jax.tree_util.keystr(path))
  return _max_difference(got, want)


@pytest.fixture(scope="module")
def uninterrupted(cli, tmp_path_factory) -> dict[str, str]:
  """The workdirs of the two uninterrupted runs: the guide's command (``"two_processes"``) and the
  reference, one process on one device (``"one_process"``), trained while the launch runs."""
  runs = {name: str(tmp_path_factory.mktemp(name) / "run") for name in ("two_processes", "one_process")}
  launch = start_as_the_guide_says(cli, runs["two_processes"])
  try:
    train(digits_mlp.get_config("tiny"), runs["one_process"], devices=jax.devices()[:1], progress=False)
  finally:
    finish(launch, runs["two_processes"])
  return runs


@pytest.fixture(scope="module")
def one_process(uninterrupted) -> str:
  return uninterrupted["one_process"]


@pytest.fixture(scope="module")
def two_processes(uninterrupted) -> str:
  return uninterrupted["two_processes"]


def test_the_guides_two_processes_train_like_one(two_processes, one_process):
  got, want = _state(two_processes), _state(one_process)
  print(f"2 processes vs 1: max |difference| {_assert_close(got, want):.3g}")
  last = [jaxlab.load_run(w).logged_metrics()["loss"] for w in (two_processes, one_process)]
  np.testing.assert_allclose(last[0], last[1], **TOL)


def test_the_guides_command_resumes_bit_identically(cli, two_processes, tmp_path):
  resumed = _killed_after_step_10(two_processes, str(tmp_path / "resumed"))
  launch_as_the_guide_says(cli, resumed)
  # The same program on the same two processes from a restored (exact) state: bit-identical.
  jax.tree.map(np.testing.assert_array_equal, _state(resumed), _state(two_processes))
  rows = [jaxlab.load_run(w).logged_metrics() for w in (resumed, two_processes)]
  assert rows[0]["loss"] == rows[1]["loss"] and rows[0]["test_accuracy"] == rows[1]["test_accuracy"]


def test_a_one_process_run_resumes_on_two_processes(cli, one_process, tmp_path):
  resumed = _killed_after_step_10(one_process, str(tmp_path / "resumed"))
  launch_as_the_guide_says(cli, resumed)
  print(f"1 -> 2 processes vs 1: max |difference| {_assert_close(_state(resumed), _state(one_process)):.3g}")


def test_a_two_process_run_resumes_on_one_process(two_processes, one_process, tmp_path):
  resumed = _killed_after_step_10(two_processes, str(tmp_path / "resumed"))
  train(digits_mlp.get_config("tiny"), resumed, devices=jax.devices()[:1], progress=False)
  print(f"2 -> 1 process vs 1: max |difference| {_assert_close(_state(resumed), _state(one_process)):.3g}")
  # Kept "data" size (two processes -> one process with two devices): the same sums, to the bit.
  kept = _killed_after_step_10(two_processes, str(tmp_path / "kept"))
  train(digits_mlp.get_config("tiny"), kept, devices=jax.devices()[:2], progress=False)
  jax.tree.map(np.testing.assert_array_equal, _state(kept), _state(two_processes))
