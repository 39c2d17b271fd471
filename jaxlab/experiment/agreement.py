"""Several processes start one run: before the first step they check that it is the same run.

Every process of a multi-process job runs the same command; one started with another config
value, ``--stop_after``, process count or JAX version would train another run, or hang in the
first collective the others do not make. :func:`agree_across_processes` publishes each process's
run (the config, flattened, and the launch settings) through JAX's coordination service; process 0
compares each with its own and publishes the verdict, which every process reads: a difference is
one line on every process, naming the first differing key and each process's value. Waits are
bounded by the peer timeout (``jaxlab.peers``).
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from typing import Any

from jaxlab import peers
from jaxlab.errors import InputError
from jaxlab.train.checkpoint import flat_config

_ROUNDS = itertools.count()  # each agreement of a process has its own keys; every process counts alike
_ACK_WAIT_S = 10.0  # process 0 waits this long (at most) for the others to read a refusal before it leaves


def run_record(config: Any, stop_after: int | None) -> dict[str, Any]:
  """What must be the same on every process: the process count, JAX's version, ``--stop_after``, the config.

  Returns:
    ``{key: value}`` in the order a difference is reported: the launch first, then the config's
    keys (``config.<dotted key>``).
  """
  import jax  # noqa: PLC0415 - a joined job has JAX

  _, count = peers.process()
  config = config.to_dict() if hasattr(config, "to_dict") else dict(config)
  record = {"num_processes": count, "jax version": jax.__version__, "stop_after": stop_after}
  record.update((f"config.{k}", v) for k, v in sorted(flat_config(config).items()))
  return record


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, Any, Any] | None:
  """``(key, value in a, value in b)`` of the first key (in ``a``'s order, then ``b``'s) that differs."""
  for key in list(a) + [k for k in b if k not in a]:
    if a.get(key, "<absent>") != b.get(key, "<absent>"):
      return key, a.get(key, "<absent>"), b.get(key, "<absent>")
  return None


def _disagreement(key: str, value0: Any, other: Any, k: int, count: int) -> str:
  fix = ("start every process with the same --num_processes" if key == "num_processes"
         else "install the same versions on every host" if key.endswith(" version")
         else "start every process with the same command (config, --config.* overrides, --stop_after)")
  return (f"the {count} processes disagree on the run: {key} is {value0!r} on process 0 and {other!r} on "
          f"process {k}; {fix}")


def agree_across_processes(config: Any, stop_after: int | None = None) -> None:
  """Checks that every process of the joined job starts this run (nothing happens on one process).

  Args:
    config: this process's experiment config (or suite), already checked.
    stop_after: this process's ``--stop_after``.

  Raises:
    InputError: on every process alike, one line: a process id taken twice, a difference (the first
      differing key and each process's value), or a process that did not come within the peer
      timeout.
  """
  if peers.client() is None:
    return
  index, count = peers.process()
  if count == 1:
    return
  prefix = f"jaxlab/agree/{next(_ROUNDS)}"
  who = f"process {index} of {count}"
  record = {"run": run_record(config, stop_after), "host": socket.gethostname(), "pid": os.getpid()}
  taken = peers.publish(f"{prefix}/process/{index}", record)
  if taken is not None:
    raise InputError(f"{who}: process id {index} is taken by another process too (host {taken['host']}, pid "
                     f"{taken['pid']}); start each process with its own --process_id (JAX_PROCESS_ID) in [0, {count - 1}]")
  if index == 0:
    verdict = _compare_all(prefix, record["run"], count)
    peers.publish(f"{prefix}/verdict", verdict)
    if verdict["refused"]:
      _wait_for_acks(prefix, verdict["reached"])
      raise InputError(verdict["message"])
    return
  with peers.Wait(who, "process 0 to compare every process's run") as wait:
    verdict = peers.fetch(f"{prefix}/verdict", wait.deadline)
  if verdict is None:
    raise InputError(f"{who}: process 0 did not compare the processes' runs {wait.within}: it is gone, stuck, or "
                     "waiting for another process; start every process with the same command")
  if verdict["refused"]:
    peers.publish(f"{prefix}/ack/{index}", {"read": True})
    raise InputError(verdict["message"])


def _compare_all(prefix: str, mine: dict[str, Any], count: int) -> dict[str, Any]:
  """Process 0: each other process's record, as it comes, against its own; the verdict to publish."""
  reached = []
  with peers.Wait(f"process 0 of {count}", "the other processes to start the run") as wait:
    for k in range(1, count):
      wait.what = f"process {k} to start the run (processes 1 to {k - 1} have)" if k > 1 else "process 1 to start the run"
      theirs = peers.fetch(f"{prefix}/process/{k}", wait.deadline)
      if theirs is None:
        message = (f"process 0 of {count}: process {k} did not start the run {wait.within} (processes 0 to "
                   f"{k - 1} did); start all {count} processes with the same command, each with its own --process_id")
        return {"refused": True, "message": message, "reached": reached}
      reached.append(k)
      difference = first_difference(mine, theirs["run"])
      if difference is not None:
        return {"refused": True, "message": _disagreement(*difference, k, count), "reached": reached}
  return {"refused": False, "message": "", "reached": reached}


def _wait_for_acks(prefix: str, processes: list[int]) -> None:
  """Process 0 hosts the coordinator: it stays until the processes it heard from have read the refusal."""
  deadline = time.monotonic() + _ACK_WAIT_S
  for k in processes:
    if peers.fetch(f"{prefix}/ack/{k}", deadline) is None:
      return
