"""Processes that disagree: each launch is refused with one line on every process, in seconds.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Each multi-process case
starts ``python -m jaxlab.main`` as 2 local processes (``tests/support/processes.py``) with a peer
timeout of a few seconds; the case passes when every process ends with status 2 and one
``jaxlab: error:`` line (``processes.refused`` raises their lines as one ``InputError``). The
launch checks made before JAX (a scheme, a process count, a peer timeout) and the ones only a host
can make (a name that does not resolve, a port in use) are also called directly.
"""

from __future__ import annotations

import inspect
import os
import socket
import sys
from typing import Any, Callable, Sequence
from unittest import mock

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from jaxlab import distributed, peers  # noqa: E402
from jaxlab.errors import InputError  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402
from tests.support import processes  # noqa: E402

# Seconds a process waits for the other before it gives up: short where the case is a process that
# never comes; long where both come and disagree (they end as soon as both arrived; start-up on a
# loaded machine may differ by more than a few seconds).
GIVE_UP_S, ARRIVE_S = 3, 60
LIMIT_S = 120  # a launch still running after this is a hang: killed, and the test fails with its output
COMMON = ("--config=digits_mlp:tiny", "--config.num_steps=8")

Make = Callable[[Any], Callable[[], None]]


def _launch(*own: Sequence[str], wait_s: float = ARRIVE_S, held: bool = False,
            env: dict[str, str] | None = None) -> Make:
  """One process per ``own`` (its own flags, after the common ones), each waiting ``wait_s`` for the
  other; ``held``: another program listens on the coordinator's port first."""
  def make(tmp_path) -> Callable[[], None]:
    def call() -> None:
      port = processes.free_port()
      with socket.socket() as other_program:
        if held:
          other_program.bind(("localhost", port))
          other_program.listen()
        procs = processes.start_processes([*COMMON, f"--peer_timeout_s={wait_s}", f"--workdir={tmp_path / 'run'}"],
                                          own, port=port,
                                          env=processes.cli_env(**(env or {})))
        processes.refused(procs, LIMIT_S)
    return call
  return make


def _resolve_fails(*_: Any, **__: Any) -> None:
  raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def _unresolved() -> None:
  # The resolver is replaced: no network at test time; the wait is the real one (a short timeout).
  with mock.patch.object(socket, "getaddrinfo", _resolve_fails):
    distributed._resolve("--coordinator_address", "process-zero.invalid:1234", (0.5, "--peer_timeout_s"))


def _port_taken() -> None:
  with socket.socket() as other_program:
    other_program.bind(("localhost", 0))
    other_program.listen()
    port = other_program.getsockname()[1]
    distributed._check_coordinator_port("--coordinator_address", f"localhost:{port}")


def _port_checked_twice() -> None:
  # Two processes 0 started at the same moment: the first check holds the port until JAX's
  # coordinator binds it, so the second finds it in use (without the hold, both pass, and JAX's
  # server crashes in the second).
  port = processes.free_port()
  held = distributed._check_coordinator_port("--coordinator_address", f"localhost:{port}")
  try:
    distributed._check_coordinator_port("--coordinator_address", f"localhost:{port}")
  finally:
    if held is not None:
      held.close()


CASES: list[tuple[str, str, Callable[..., Any], str]] = [
    ("processes", "two processes both --process_id=0",
     _launch(["--process_id=0"], ["--process_id=0"], wait_s=GIVE_UP_S), "is in use on this host, where process 0 starts the coordinator"),
    ("processes", "--config.num_steps=8 on one process, 20 on the other",
     _launch([], ["--config.num_steps=20"]), "config.num_steps is 8 on process 0 and 20 on process 1"),
    ("processes", "--config.seed differs per process",
     _launch([], ["--config.seed=3"]), "config.seed is 0 on process 0 and 3 on process 1"),
    ("processes", "--num_processes=2 on process 0, 3 on process 1",
     _launch([], ["--num_processes=3"]), "num_processes is 2 on process 0 and 3 on process 1"),
    ("processes", "--stop_after differs per process",
     _launch(["--stop_after=4"], []), "stop_after is 4 on process 0 and None on process 1"),
    ("processes", "a process started alone",
     _launch(["--num_processes=2"], wait_s=GIVE_UP_S), "process 0 of 2: the other process did not join at localhost:"),
    ("processes", "the peer timeout from JAXLAB_PEER_TIMEOUT_S",
     _launch(["--num_processes=2", "--peer_timeout_s="], env={peers.PEER_TIMEOUT_ENV: "2"}),
     f"within 2 s ({peers.PEER_TIMEOUT_ENV})"),
    ("processes", "the coordinator's port held by another program",
     _launch([], [], wait_s=GIVE_UP_S, held=True), "is in use on this host, where process 0 starts the coordinator"),
    ("processes", "http://host:port as the coordinator address",
     lambda: distributed.distributed_args("http://localhost:1234", "2", "0"),
     "--coordinator_address=http://localhost:1234; must be host:port without a scheme"),
    ("processes", "--num_processes=2**40",
     lambda: distributed.distributed_args("localhost:1234", str(2**40), "0"),
     f"--num_processes={2**40}; must be an int in [1, {distributed.MAX_PROCESSES}]"),
    ("processes", "--peer_timeout_s=0",
     lambda: distributed.distributed_args("localhost:1234", "2", "0", peer_timeout_s="0"),
     "--peer_timeout_s=0; must be a number of seconds in (0, 86400]"),
    ("processes", "JAXLAB_PEER_TIMEOUT_S=soon",
     lambda: distributed.distributed_args("localhost:1234", "2", "0", environ={peers.PEER_TIMEOUT_ENV: "soon"}),
     f"{peers.PEER_TIMEOUT_ENV}=soon; must be a number of seconds"),
    ("processes", "a coordinator name that does not resolve", _unresolved,
     "--coordinator_address=process-zero.invalid:1234: the host 'process-zero.invalid' did not resolve within 0.5 s"),
    ("processes", "process 0's port in use", _port_taken, "is in use on this host, where process 0 starts the coordinator"),
    ("processes", "two processes 0 checking the port at the same moment", _port_checked_twice,
     "is in use on this host, where process 0 starts the coordinator"),
]


def _call(case_call: Callable[..., Any], tmp_path) -> Callable[[], Any]:
  """A case's call; a launch (``make(tmp_path)``) gets this test's folder for its workdir."""
  return case_call(tmp_path) if len(inspect.signature(case_call).parameters) == 1 else case_call


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment, tmp_path):
  assert_one_clear_line(area, what, _call(call, tmp_path), fragment)
