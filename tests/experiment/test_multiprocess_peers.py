"""A process waiting for its peers says so within seconds; a SIGTERM while a peer is stuck ends the process.

Two local processes of ``python -m jaxlab.main`` (``tests/support/processes.py``), bounded in time:
a hang fails the test with each process's output instead of hanging the suite. The launches that
are refused (ids, configs, counts, ports) are the sweep's cases in ``test_bad_input_processes.py``.
"""

from __future__ import annotations

import os
import signal
import time

from jaxlab import peers
from tests.support import processes

PEER_TIMEOUT_S = 4
LIMIT_S = 90  # a process still running after this hangs: killed, and the test fails with its output


def _read_until(proc: processes.Process, text: str, limit_s: float) -> tuple[str, float]:
  """``proc``'s output up to and including ``text`` (progress bars end lines with ``\\r``), and when it came."""
  out, deadline = "", time.monotonic() + limit_s
  while text not in out:
    assert time.monotonic() < deadline and proc.popen.poll() is None, f"no {text!r} in:\n{out[-3000:]}"
    chunk = os.read(proc.popen.stdout.fileno(), 4096).decode(errors="replace")
    assert chunk, f"the process ended before {text!r}:\n{out[-3000:]}"
    out += chunk
  return out, time.monotonic()


def test_a_waiting_process_says_so_within_seconds(tmp_path):
  # Alone, with a long peer timeout: the notice comes after NOTICE_AFTER_S, long before the give-up.
  [alone] = processes.start_processes(["--config=digits_mlp:tiny", f"--workdir={tmp_path / 'run'}",
                                       "--num_processes=2", "--peer_timeout_s=600"], [[]])
  started = time.monotonic()
  try:
    out, noticed = _read_until(alone, "waiting for", LIMIT_S)
  finally:
    alone.signal(signal.SIGKILL)
    alone.popen.communicate()
  # The notice names what it waits for and when it gives up; import and start-up come before it.
  assert peers.NOTICE_AFTER_S <= noticed - started < LIMIT_S
  assert "jaxlab: process 0 of 2: waiting for the other process to join at localhost:" in out
  assert "gives up after 600 s (--peer_timeout_s)" in out
  assert "jaxlab: error:" not in out and not (tmp_path / "run").exists()


def test_sigterm_while_a_peer_is_stuck_ends_the_process_with_one_line(tmp_path):
  # Process 1 is stopped (SIGSTOP) once both joined the collectives (set-up, compile or the first
  # steps): process 0 waits in a collective, and the save a SIGTERM asks for needs process 1 too.
  # Without the peer timeout it waits until a SIGKILL.
  workdir = tmp_path / "run"
  procs = processes.start_processes(["--config=digits_mlp:tiny", "--config.num_steps=1000000",
                                     f"--peer_timeout_s={PEER_TIMEOUT_S}", f"--workdir={workdir}"], [[], []])
  try:
    _read_until(procs[0], "[Gloo] Rank 0 is connected", LIMIT_S)
    procs[1].signal(signal.SIGSTOP)
    sent = time.monotonic()
    procs[0].signal(signal.SIGTERM)
    out = procs[0].popen.communicate(timeout=LIMIT_S)[0]
    took = time.monotonic() - sent
  finally:
    for p in procs:
      if p.popen.poll() is None:
        p.signal(signal.SIGKILL)
    procs[1].popen.communicate()
  errors = processes.error_lines(out)
  assert procs[0].returncode == 128 + signal.SIGTERM, out[-3000:]
  assert errors == [f"jaxlab: error: process 0 of 2: a SIGTERM (preemption) arrived, and the processes did not "
                    f"reach a step to save at together within {PEER_TIMEOUT_S} s (--peer_timeout_s): another "
                    f"process is gone or stuck; ending without saving ({workdir} keeps its last checkpoint; "
                    "rerun to resume)"], out[-3000:]
  assert "Traceback" not in out
  # The watch polls the notice every second, then waits the peer timeout.
  assert PEER_TIMEOUT_S <= took < PEER_TIMEOUT_S + 30, took


def test_a_peer_killed_during_training_ends_the_other_with_one_line(tmp_path):
  # Process 1 is killed once both train: process 0's next collective fails (gloo: connection reset);
  # without an exit past JAX's shutdown, which waits for process 1, it would hang after its traceback.
  workdir = tmp_path / "run"
  procs = processes.start_processes(["--config=digits_mlp:tiny", "--config.num_steps=1000000",
                                     f"--peer_timeout_s={PEER_TIMEOUT_S}", f"--workdir={workdir}"], [[], []])
  try:
    _read_until(procs[0], "loss=", LIMIT_S)  # a logged step: both processes are in the loop
    procs[1].signal(signal.SIGKILL)
    out = procs[0].popen.communicate(timeout=LIMIT_S)[0]
  finally:
    for p in procs:
      if p.popen.poll() is None:
        p.signal(signal.SIGKILL)
    procs[1].popen.communicate()
  errors = processes.error_lines(out)
  assert procs[0].returncode == 1 and len(errors) == 1, out[-3000:]
  assert errors[0].startswith("jaxlab: error: process 0 of 2: another process is gone (Gloo "), errors
  assert errors[0].endswith(f"; {workdir} keeps its last checkpoint: restart every process to resume"), errors
  assert "Traceback" not in out
