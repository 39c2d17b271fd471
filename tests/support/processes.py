"""One launcher for the multi-process tests: ``python -m jaxlab.main`` as N local processes, bounded in time.

Every process runs in its own session, so a test that times out kills it and everything it
started (``finish`` raises with the output of each process, never hangs the suite). The processes
get one CPU device each and the repository on ``PYTHONPATH`` (the code under test).
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import time
from typing import Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def cli_env(**extra: str) -> dict[str, str]:
  """The environment of a CLI process: one CPU device, this repository's code."""
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(JAX_PLATFORMS="cpu", PYTHONPATH=REPO, **extra)
  return env


@dataclasses.dataclass
class Process:
  """One started process; ``out`` is its stdout and stderr once finished."""
  popen: subprocess.Popen
  out: str = ""

  @property
  def returncode(self) -> int | None:
    return self.popen.returncode

  def error_lines(self) -> list[str]:
    return error_lines(self.out)

  def signal(self, sig: int) -> None:
    os.killpg(self.popen.pid, sig)


def start(args: Sequence[str], env: dict[str, str] | None = None) -> Process:
  """``python -m jaxlab.main *args`` in the repository, in its own session (killable as a group)."""
  popen = subprocess.Popen([sys.executable, "-m", "jaxlab.main", *args], cwd=REPO, env=env or cli_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
  return Process(popen)


def start_processes(common: Sequence[str], per_process: Sequence[Sequence[str]], port: int | None = None,
                    env: dict[str, str] | None = None) -> list[Process]:
  """One process per entry of ``per_process`` (its own flags), each with ``common`` flags and
  ``--coordinator_address=localhost:<port> --num_processes=<len> --process_id=<i>`` unless given."""
  port = port or free_port()
  procs = []
  for i, own in enumerate(per_process):
    given = {a.split("=")[0] for a in own}
    launch = [f"--coordinator_address=localhost:{port}"] * ("--coordinator_address" not in given)
    launch += [f"--num_processes={len(per_process)}"] * ("--num_processes" not in given)
    launch += [f"--process_id={i}"] * ("--process_id" not in given)
    procs.append(start([*launch, *common, *own], env))
  return procs


def finish(procs: Sequence[Process], timeout: float) -> list[Process]:
  """Waits for every process, ``timeout`` seconds in all; on timeout kills them all and fails with their output."""
  deadline = time.monotonic() + timeout
  late = []
  for p in procs:
    try:
      p.out = p.popen.communicate(timeout=max(0.1, deadline - time.monotonic()))[0]
    except subprocess.TimeoutExpired:
      late.append(p)
  if late:
    for p in procs:
      if p.popen.poll() is None:
        p.signal(signal.SIGKILL)
    for p in late:
      p.out = p.popen.communicate()[0]
    outputs = "\n".join(f"--- process {i} (rc {p.returncode}):\n{p.out[-3000:]}" for i, p in enumerate(procs))
    raise AssertionError(f"{len(late)} process(es) still running after {timeout} s:\n{outputs}")
  return list(procs)


def refused(procs: Sequence[Process], timeout: float) -> None:
  """Finishes the processes as a bad-input case: each must end with status 2 and one ``jaxlab: error:`` line.

  Raises:
    InputError: every process refused with one line and no traceback: their lines, joined by
      ``" | "`` (``process <i>: <line>``), so that a sweep classifies the launch like a call.
    AssertionError: a process ended another way (a traceback, an abort, a second line, a hang).
  Returns None when every process trained (status 0): the launch was accepted (a silent case).
  """
  from jaxlab.errors import InputError

  finish(procs, timeout)
  if all(p.returncode == 0 for p in procs):
    return
  outputs = "\n".join(f"--- process {i} (rc {p.returncode}):\n{p.out[-3000:]}" for i, p in enumerate(procs))
  clean = all(p.returncode == 2 and len(p.error_lines()) == 1 and "Traceback" not in p.out
              and "Fatal Python error" not in p.out for p in procs)
  if not clean:
    raise AssertionError(f"not one line and status 2 on every process:\n{outputs}")
  raise InputError(" | ".join(f"process {i}: {p.error_lines()[0].removeprefix('jaxlab: error: ')}"
                              for i, p in enumerate(procs)))


def error_lines(text: str) -> list[str]:
  """The ``jaxlab: error: ...`` lines of a process's output, also where one follows a progress bar's
  carriage-return line without a newline."""
  return re.findall(r"jaxlab: error: [^\r\n]*", text)
