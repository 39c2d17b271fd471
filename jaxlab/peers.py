"""The other processes of a multi-process run: wait for them a bounded time, and say so.

A process that waits for its peers (to join, to agree on the run, to save together after a
preemption notice) says so on stderr within :data:`NOTICE_AFTER_S` seconds and gives up after the
peer timeout (:func:`peer_timeout_s`: ``--peer_timeout_s`` of ``python -m jaxlab.main``, else the
``JAXLAB_PEER_TIMEOUT_S`` environment variable, else :data:`DEFAULT_PEER_TIMEOUT_S`) with one line,
instead of hanging until a scheduler kills it. Records are exchanged through the key-value store of
JAX's coordination service (``jax.distributed``), which every process reaches once it has joined;
:func:`agree` checks there that every process starts the same run (a hash of each process's record,
compared by process 0; a difference names the first differing key and each process's value).

This module imports JAX only inside the functions that need a joined job.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Mapping, NoReturn

from jaxlab.errors import InputError

#: The environment variable read for the peer timeout when ``--peer_timeout_s`` is not given.
PEER_TIMEOUT_ENV = "JAXLAB_PEER_TIMEOUT_S"
#: Seconds a process waits for its peers before it gives up (JAX's own join timeout is 300 s too).
DEFAULT_PEER_TIMEOUT_S = 300.0
#: The largest peer timeout accepted: one day.
MAX_PEER_TIMEOUT_S = 86400.0
#: Seconds of waiting after which a process says what it waits for.
NOTICE_AFTER_S = 5.0
#: The key JAX's preemption service sets in the coordination service when a process receives SIGTERM.
PREEMPTION_NOTICE_KEY = "RECEIVED_PREEMPTION_NOTICE"
#: Exit status of a process that gave up waiting for its peers.
GAVE_UP_STATUS = 2

_timeout: dict[str, Any] = {}  # set by set_peer_timeout (the command line); else the variable, else the default


def check_peer_timeout(raw: Any, source: str) -> float:
  """``raw`` (a flag or variable value) as seconds in ``(0, MAX_PEER_TIMEOUT_S]``, else one-line ``InputError``.

  Examples:
    >>> from jaxlab.peers import check_peer_timeout
    >>> check_peer_timeout("30", "--peer_timeout_s")
    30.0
  """
  try:
    value = float(raw)
  except (TypeError, ValueError):
    value = float("nan")
  if not 0 < value <= MAX_PEER_TIMEOUT_S:  # also refuses nan
    raise InputError(f"{source}={raw}; must be a number of seconds in (0, {MAX_PEER_TIMEOUT_S:g}] "
                     "(how long a process waits for the other processes before it gives up)")
  return value


def set_peer_timeout(seconds: float, source: str) -> None:
  """Sets the peer timeout of this process (the command line's ``--peer_timeout_s``), checked before."""
  _timeout.update(seconds=float(seconds), source=source)


def peer_timeout_s(environ: Mapping[str, str] | None = None) -> tuple[float, str]:
  """``(seconds, where it came from)``: ``--peer_timeout_s`` if set, else ``JAXLAB_PEER_TIMEOUT_S``, else 300.

  Raises:
    InputError: the environment variable is not a number of seconds in ``(0, 86400]``.

  Examples:
    >>> from jaxlab.peers import peer_timeout_s
    >>> peer_timeout_s({})
    (300.0, 'default')
    >>> peer_timeout_s({"JAXLAB_PEER_TIMEOUT_S": "20"})
    (20.0, 'JAXLAB_PEER_TIMEOUT_S')
  """
  if _timeout and environ is None:
    return _timeout["seconds"], _timeout["source"]
  raw = (os.environ if environ is None else environ).get(PEER_TIMEOUT_ENV, "")
  if raw.strip():
    return check_peer_timeout(raw, PEER_TIMEOUT_ENV), PEER_TIMEOUT_ENV
  return DEFAULT_PEER_TIMEOUT_S, "default"


def _setting(seconds: float, source: str) -> str:
  """How a message names the timeout: its value and where it came from (how to change it)."""
  where = f"the default; set --peer_timeout_s or {PEER_TIMEOUT_ENV}" if source == "default" else source
  return f"{seconds:g} s ({where})"


def say(line: str) -> None:
  """Writes one line to stderr at once (a process that waits is often one of several sharing a terminal)."""
  sys.stderr.write(line.rstrip("\n") + "\n")
  sys.stderr.flush()


def leave(status: int) -> NoReturn:
  """Ends this process now, without JAX's shutdown barrier (which would wait for peers that are gone)."""
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except Exception:  # noqa: BLE001 - a closed stream: nothing left to flush
      pass
  os._exit(status)


class Wait:
  """Context manager around a wait for the other processes: a notice after a few seconds, a deadline.

  Inside the block this process waits for ``what``. If the block is still running after
  :data:`NOTICE_AFTER_S` seconds, one line says what it waits for and for how long. If it is still
  running at the peer timeout, ``on_timeout`` runs in the watching thread: with ``give_up`` set,
  the default writes ``jaxlab: error: <who>: <give_up>`` and ends the process
  (``leave``), for a wait that Python cannot interrupt (a call into JAX's C++ that blocks).
  A block that can raise instead reads ``deadline`` and raises itself (``give_up=None``).

  Args:
    who: this process, as messages name it (``"process 1 of 2"``).
    what: what it waits for, completing "waiting for ...".
    give_up: what went wrong, after "<who>: "; ``{within}`` in it becomes "within <seconds> s
      (<where the timeout came from>)". None: nothing happens at the deadline (the block checks
      ``deadline`` itself).
    timeout: ``(seconds, source)``, default :func:`peer_timeout_s`.
    status: the exit status of a process that gives up.
  """

  def __init__(self, who: str, what: str, give_up: str | None = None, *,
               timeout: tuple[float, str] | None = None, status: int = GAVE_UP_STATUS,
               on_timeout: Callable[[], None] | None = None):
    self.who, self.what, self.give_up, self.status = who, what, give_up, status
    self.seconds, self.source = timeout if timeout is not None else peer_timeout_s()
    self._on_timeout = on_timeout
    self._done = threading.Event()
    self._thread: threading.Thread | None = None
    self.deadline = 0.0

  @property
  def setting(self) -> str:
    """The timeout as messages name it."""
    return _setting(self.seconds, self.source)

  @property
  def within(self) -> str:
    """``"within <seconds> s (<where the timeout came from>)"``, for messages."""
    return f"within {self.setting}"

  def __enter__(self) -> "Wait":
    self.deadline = time.monotonic() + self.seconds
    self._thread = threading.Thread(target=self._watch, name="jaxlab-peer-wait", daemon=True)
    self._thread.start()
    return self

  def _watch(self) -> None:
    if self._done.wait(min(NOTICE_AFTER_S, self.seconds)):
      return
    say(f"jaxlab: {self.who}: waiting for {self.what}; gives up after {self.setting}")
    if self._done.wait(max(0.0, self.deadline - time.monotonic())):
      return
    if self._on_timeout is not None:
      self._on_timeout()
    elif self.give_up is not None:
      say(f"jaxlab: error: {self.who}: " + self.give_up.replace("{within}", self.within))
      leave(self.status)

  def __exit__(self, *exc: Any) -> None:
    self._done.set()


# ------------------------------------------------------------------------------- a joined job

def client() -> Any:
  """JAX's coordination-service client of a joined multi-process job, or None (one process)."""
  from jax._src import distributed  # noqa: PLC0415 - the client is not public API; orbax reads it the same way

  return distributed.global_state.client


def process() -> tuple[int, int]:
  """``(process id, number of processes)`` as this process was started (no backend is initialised)."""
  from jax._src import distributed  # noqa: PLC0415

  state = distributed.global_state
  return int(state.process_id), int(state.num_processes)


def who() -> str:
  """This process as messages name it: ``"process 1 of 2"``."""
  index, count = process()
  return f"process {index} of {count}"


def _status(error: Exception) -> str:
  """The status code at the start of a coordination-service error (``"NOT_FOUND"``, ``"DEADLINE_EXCEEDED"``)."""
  return str(error).split(":", 1)[0].strip()


def publish(key: str, value: Mapping[str, Any]) -> Mapping[str, Any] | None:
  """Sets ``key`` to ``value`` (JSON) once; returns None, or the value already there (a duplicate)."""
  try:
    client().key_value_set(key, json.dumps(value, sort_keys=True))
    return None
  except RuntimeError as e:
    if _status(e) != "ALREADY_EXISTS":
      raise
    return json.loads(client().key_value_try_get(key))


def fetch(key: str, deadline: float) -> dict[str, Any] | None:
  """The JSON value of ``key``, waiting for it until ``deadline`` (``time.monotonic()``); None if it did not come."""
  while True:
    left_ms = max(1, int((deadline - time.monotonic()) * 1000))
    try:
      return json.loads(client().blocking_key_value_get(key, min(left_ms, 1000)))
    except RuntimeError as e:
      if _status(e) != "DEADLINE_EXCEEDED":
        raise
    if time.monotonic() >= deadline:
      return None


def preemption_noticed() -> bool:
  """Whether JAX's preemption service has recorded a SIGTERM of any process of the job."""
  try:
    client().key_value_try_get(PREEMPTION_NOTICE_KEY)
    return True
  except RuntimeError:  # NOT_FOUND, or the coordinator unreachable (JAX's heartbeats handle that)
    return False


#: What a collective's error says when the process at the other end is gone (gloo's TCP transport).
_LOST_PEER_SIGNS = ("Connection reset by peer", "Connection closed by peer", "Broken pipe")


def lost_peer(error: BaseException) -> str | None:
  """The collective's own words when ``error`` says the process at the other end is gone, else None.

  Examples:
    >>> from jaxlab.peers import lost_peer
    >>> lost_peer(RuntimeError("INTERNAL: Error dispatching computation: Gloo all-reduce failed: "
    ...                        "Read error [127.0.0.1]:3: Connection reset by peer"))
    'Gloo all-reduce failed: Read error [127.0.0.1]:3: Connection reset by peer'
    >>> lost_peer(ValueError("a bug")) is None
    True
  """
  text = str(error).strip().splitlines()[0] if str(error).strip() else ""
  if not any(sign in text for sign in _LOST_PEER_SIGNS):
    return None
  start = text.find("Gloo")
  return text[start if start >= 0 else 0:][:300]


# ------------------------------------------------------------------------------- preemption

class _PreemptionWatch:
  """The one watch of this process (:func:`watch_preemption`); its thread lives until :func:`stand_down`."""
  thread: threading.Thread | None = None
  done = threading.Event()
  where = "the workdir"


def watch_preemption(where: str | None = None) -> None:
  """Many processes: once a SIGTERM is recorded, this process has the peer timeout to end, else one line.

  JAX's preemption service owns SIGTERM on a joined job and records it in the coordination service;
  the processes then agree on a step, save it together and stop. A peer that is gone or stuck keeps
  this process waiting in a collective (during set-up, a step, or that save) until a SIGKILL: from
  the moment this process sees the record, it has the peer timeout to finish, else it writes
  ``jaxlab: error: <who>: ... ending without saving (<where> keeps its last checkpoint; ...)`` and
  ends with status 143 (128 + SIGTERM), as a SIGTERM would. Idempotent; nothing on one process.
  Armed when jaxlab joins the job (``jaxlab.distributed.initialize``) and by the training loop.

  Args:
    where: the run's workdir, named by the message (default: "the workdir").
  """
  if where is not None:
    _PreemptionWatch.where = where
  if client() is None or process()[1] == 1:
    return
  if _PreemptionWatch.thread is None or not _PreemptionWatch.thread.is_alive():
    _PreemptionWatch.done = threading.Event()
    _PreemptionWatch.thread = threading.Thread(target=_watch_notice, args=(_PreemptionWatch.done,),
                                               name="jaxlab-preemption-notice", daemon=True)
    _PreemptionWatch.thread.start()


def stand_down() -> None:
  """Ends the watch: the loop stopped at the agreed step and saved it (or finished)."""
  _PreemptionWatch.done.set()


def _watch_notice(done: threading.Event) -> None:
  while not done.wait(1.0):
    if preemption_noticed():
      break
  else:
    return
  give_up = (f"a SIGTERM (preemption) arrived, and the processes did not reach a step to save at together "
             f"{{within}}: another process is gone or stuck; ending without saving ({_PreemptionWatch.where} "
             "keeps its last checkpoint; rerun to resume)")
  with Wait(who(), "every process to reach the step to save at after a SIGTERM", give_up, status=128 + signal.SIGTERM):
    done.wait()


# ------------------------------------------------------------------------------- agreement

_ACK_GRACE_S = 1.0
_ROUNDS = itertools.count()  # each agreement has its own keys; every process of a job counts alike


def record_hash(record: Mapping[str, Any]) -> str:
  """The sha256 of a record's canonical JSON (keys sorted): equal records, equal hashes, on any host.

  Examples:
    >>> from jaxlab.peers import record_hash
    >>> record_hash({"seed": 0, "steps": 8}) == record_hash({"steps": 8, "seed": 0})
    True
  """
  return hashlib.sha256(json.dumps(record, sort_keys=True, default=repr).encode()).hexdigest()


def first_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
  """``(key, value in a, value in b)`` of the first key (in ``a``'s order, then ``b``'s) that differs, or None.

  Examples:
    >>> from jaxlab.peers import first_difference
    >>> first_difference({"num_steps": 8, "seed": 0}, {"num_steps": 20, "seed": 3})
    ('num_steps', 8, 20)
  """
  for key in list(a) + [k for k in b if k not in a]:
    if a.get(key, "<absent>") != b.get(key, "<absent>"):
      return key, a.get(key, "<absent>"), b.get(key, "<absent>")
  return None


def agree(record: Mapping[str, Any], fix: Callable[[str], str]) -> None:
  """Checks that every process of the joined job starts with the same ``record`` (nothing on one process).

  Each process publishes its record and the record's hash (:func:`record_hash`) under its process
  id in the coordination service; process 0 compares each hash with its own, as they come, and
  publishes the verdict, which every process reads. Each wait is bounded by the peer timeout and
  announced after :data:`NOTICE_AFTER_S` seconds (:class:`Wait`).

  Args:
    record: ``{key: JSON-safe value}`` of what must be the same everywhere, in the order a
      difference is reported (the first differing key is named).
    fix: the differing key -> what to do about it (ends the message).

  Raises:
    InputError: on every process alike, one line: a process id taken by two processes; a
      difference (the first differing key and each process's value); a process that did not come
      within the peer timeout.
  """
  if client() is None:
    return
  index, count = process()
  if count == 1:
    return
  prefix = f"jaxlab/agree/{next(_ROUNDS)}"
  me = f"process {index} of {count}"
  mine = {"hash": record_hash(record), "record": dict(record), "host": socket.gethostname(), "pid": os.getpid()}
  taken = publish(f"{prefix}/process/{index}", mine)
  if taken is not None:
    raise InputError(f"{me}: process id {index} is taken by another process too (host {taken['host']}, pid "
                     f"{taken['pid']}); start each process with its own --process_id (JAX_PROCESS_ID) in [0, {count - 1}]")
  if index == 0:
    verdict = _compare_all(prefix, mine, count, fix)
    publish(f"{prefix}/verdict", verdict)
    if verdict["refused"]:
      _wait_for_acks(prefix, verdict["reached"])
      raise InputError(verdict["message"])
    return
  with Wait(me, "process 0 to compare every process's run") as wait:
    try:
      verdict = fetch(f"{prefix}/verdict", wait.deadline)
      if verdict is not None and verdict["refused"]:
        publish(f"{prefix}/ack/{index}", {"read": True})
    except RuntimeError as e:  # the coordinator is gone (process 0 ended or was killed)
      raise InputError(f"{me}: process 0 stopped answering while the processes compared their runs "
                       f"({_status(e) or e}); start every process with the same command") from None
  if verdict is None:
    raise InputError(f"{me}: process 0 did not compare the processes' runs {wait.within}: it is gone, stuck, or "
                     "waiting for another process; start every process with the same command")
  if verdict["refused"]:
    raise InputError(verdict["message"])


def _compare_all(prefix: str, mine: Mapping[str, Any], count: int, fix: Callable[[str], str]) -> dict[str, Any]:
  """Process 0: each other process's hash, as it comes, against its own; the verdict to publish."""
  reached: list[int] = []
  with Wait(f"process 0 of {count}", "the other processes to start the run") as wait:
    for k in range(1, count):
      wait.what = f"process {k} to start the run (processes 1 to {k - 1} have)" if k > 1 else "process 1 to start the run"
      theirs = fetch(f"{prefix}/process/{k}", wait.deadline)
      if theirs is None:
        message = (f"process 0 of {count}: process {k} did not start the run {wait.within} (processes 0 to "
                   f"{k - 1} did); start all {count} processes with the same command, each with its own --process_id")
        return {"refused": True, "message": message, "reached": reached}
      reached.append(k)
      if theirs["hash"] == mine["hash"]:
        continue
      key, ours, other = first_difference(mine["record"], theirs["record"]) or ("the run", mine["hash"], theirs["hash"])
      message = (f"the {count} processes disagree on the run: {key} is {ours!r} on process 0 and {other!r} on "
                 f"process {k}; {fix(key)}")
      return {"refused": True, "message": message, "reached": reached}
  return {"refused": False, "message": "", "reached": reached}


def _wait_for_acks(prefix: str, processes: list[int]) -> None:
  """Process 0 hosts the coordinator: it stays until the processes it heard from have read the refusal
  (they are waiting for it: at once, unless a machine is starved; at most the peer timeout)."""
  deadline = time.monotonic() + peer_timeout_s()[0]
  for k in processes:
    if fetch(f"{prefix}/ack/{k}", deadline) is None:
      return
  # A process whose coordinator vanishes while a call to it is in flight aborts in JAX's C++ (not one
  # line): the last ack's reply must reach its process, which then leaves at once, before this one.
  time.sleep(_ACK_GRACE_S)
