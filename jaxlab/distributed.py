"""Multi-process launch settings of the command line, checked before JAX starts.

``python -m jaxlab.main`` takes ``--coordinator_address``, ``--num_processes`` and
``--process_id``, each with an environment variable as fallback (``JAX_COORDINATOR_ADDRESS``,
``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``). :func:`distributed_args` turns them into the
arguments of ``jax.distributed.initialize``, with one-line errors for bad values; this module
imports nothing heavy, so the checks run before JAX is imported. :func:`initialize` then checks
what only this host can tell (the coordinator's name resolves; process 0's port is free and nobody
answers there yet) and joins the job, saying within seconds that it waits for the other processes
and giving up with one line after the peer timeout (``jaxlab.peers``).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import socket
import time
from typing import Any, Mapping

from jaxlab import peers
from jaxlab.errors import InputError

#: The environment variable read for each setting the flag leaves unset.
ENV_VARS = {
    "coordinator_address": "JAX_COORDINATOR_ADDRESS",
    "num_processes": "JAX_NUM_PROCESSES",
    "process_id": "JAX_PROCESS_ID",
}

#: The most processes a job may have: the coordinator keeps state for each (2**20 take ~100 MiB).
MAX_PROCESSES = 2**20

_MEANING = {
    "coordinator_address": "host:port of process 0, e.g. localhost:1234",
    "num_processes": "the number of processes in the job",
    "process_id": "this process's index",
}


def _given(name: str, flag_value: str | None, environ: Mapping[str, str]) -> tuple[str, str] | None:
  """``(source, raw value)``: the flag if given, else its environment variable; None if neither
  (an empty value counts as not given)."""
  if flag_value not in (None, ""):
    return f"--{name}", flag_value
  value = environ.get(ENV_VARS[name], "")
  return (ENV_VARS[name], value) if value.strip() else None


def _int(source: str, raw: str, minimum: int, meaning: str, maximum: int | None = None) -> int:
  try:
    value = int(raw)
  except ValueError:
    value = None
  if value is None or value < minimum or (maximum is not None and value > maximum):
    allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    raise InputError(f"{source}={raw}; must be an int {allowed} ({meaning})")
  return value


def split_address(address: str) -> tuple[str, int]:
  """``(host, port)`` of a checked ``host:port`` (an IPv6 host without its brackets)."""
  host, _, port = address.rpartition(":")
  return host.strip("[]"), int(port)


def _address(source: str, raw: str) -> str:
  address = raw.strip()
  scheme, sep, _ = address.partition("://")
  if sep:
    raise InputError(f"{source}={raw}; must be host:port without a scheme ({scheme}:// is not one JAX speaks), "
                     f"e.g. {address.split('://', 1)[1].split('/')[0] or 'localhost:1234'}")
  host, _, port = address.rpartition(":")
  try:
    port_ok = 1 <= int(port) <= 65535
  except ValueError:
    port_ok = False
  if not host.strip("[]") or not port_ok or any(c in host for c in "/ "):
    raise InputError(f"{source}={raw}; must be host:port with a port in [1, 65535] "
                     f"({_MEANING['coordinator_address']})")
  return address


@dataclasses.dataclass(frozen=True)
class DistributedArgs:
  """The settings of a distributed run, checked: what :func:`initialize` passes to JAX.

  Attributes:
    kwargs: keyword arguments of ``jax.distributed.initialize`` (only the settings given; ``{}``
      leaves all of them to cluster detection).
    sources: where each given setting came from: ``"--flag"`` or the environment variable.
    peer_timeout: ``(seconds, source)``: how long this process waits for the others
      (``jaxlab.peers.peer_timeout_s``).
  """
  kwargs: dict[str, Any]
  sources: dict[str, str]
  peer_timeout: tuple[float, str] = (peers.DEFAULT_PEER_TIMEOUT_S, "default")

  def missing(self) -> list[str]:
    """The settings left to cluster detection, as ``--flag (ENV_VAR)``."""
    return [f"--{name} ({env})" for name, env in ENV_VARS.items() if name not in self.kwargs]


def distributed_args(coordinator_address: str | None = None, num_processes: str | None = None,
                     process_id: str | None = None, *, distributed: bool = False,
                     peer_timeout_s: str | None = None,
                     environ: Mapping[str, str] | None = None) -> DistributedArgs | None:
  """The checked settings of this command's ``jax.distributed.initialize``, or None.

  Each setting comes from its flag, else from its environment variable (:data:`ENV_VARS`).
  Any of the three given makes the run distributed; with none given, ``distributed`` alone
  leaves all three to ``jax.distributed.initialize()``, which detects the cluster (Cloud TPU,
  SLURM, Open MPI). So do settings left out (:func:`initialize` names them when there is no
  cluster).

  Args:
    coordinator_address: ``--coordinator_address`` (``host:port`` of process 0), or None.
    num_processes: ``--num_processes`` as given (a string), or None.
    process_id: ``--process_id`` as given, or None.
    distributed: ``--distributed``.
    peer_timeout_s: ``--peer_timeout_s`` as given, or None (then ``JAXLAB_PEER_TIMEOUT_S``, else 300).
    environ: the environment (default: ``os.environ``).

  Returns:
    None for a single-process run, else the settings given, checked and typed.

  Raises:
    InputError: a value that is not an int, a process count outside ``[1, MAX_PROCESSES]``, a
      process id outside ``[0, num_processes - 1]``, an address with a scheme or without a port,
      a peer timeout that is not a number of seconds; the message names the flag or variable and
      the value.

  Examples:
    >>> from jaxlab.distributed import distributed_args
    >>> args = distributed_args("localhost:1234", "2", None, environ={"JAX_PROCESS_ID": "1"})
    >>> args.kwargs, args.sources["process_id"]
    ({'coordinator_address': 'localhost:1234', 'num_processes': 2, 'process_id': 1}, 'JAX_PROCESS_ID')
    >>> distributed_args(environ={}) is None, distributed_args(distributed=True, environ={}).kwargs
    (True, {})
  """
  environ = os.environ if environ is None else environ
  if peer_timeout_s not in (None, ""):  # checked even where unused: bad input is one line
    timeout = (peers.check_peer_timeout(peer_timeout_s, "--peer_timeout_s"), "--peer_timeout_s")
  else:
    timeout = peers.peer_timeout_s(environ)
  raw = {"coordinator_address": coordinator_address, "num_processes": num_processes, "process_id": process_id}
  given = {name: g for name, value in raw.items() if (g := _given(name, value, environ)) is not None}
  if not given and not distributed:
    return None
  kwargs: dict[str, Any] = {}
  if "coordinator_address" in given:
    kwargs["coordinator_address"] = _address(*given["coordinator_address"])
  if "num_processes" in given:
    kwargs["num_processes"] = _int(*given["num_processes"], 1, _MEANING["num_processes"], MAX_PROCESSES)
  if "process_id" in given:
    source, value = given["process_id"]
    kwargs["process_id"] = _int(source, value, 0, _MEANING["process_id"])
    if "num_processes" in kwargs and kwargs["process_id"] >= kwargs["num_processes"]:
      n = kwargs["num_processes"]
      raise InputError(f"{source}={value}; must be an int in [0, {n - 1}] "
                       f"(this process's index; {given['num_processes'][0]}={n})")
  return DistributedArgs(kwargs, {name: source for name, (source, _) in given.items()}, timeout)


def _listed(items: list[str]) -> str:
  return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _resolve(source: str, address: str, timeout: tuple[float, str]) -> None:
  """Waits until the coordinator's host name resolves (a cluster's DNS may name process 0's host only
  once it runs); says so within seconds, gives up with one ``InputError`` at the peer timeout."""
  host, port = split_address(address)
  with peers.Wait("this process", f"the coordinator's host {host!r} to resolve", timeout=timeout) as wait:
    while True:
      try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return
      except OSError as e:
        reason = e.strerror or str(e)
      if time.monotonic() >= wait.deadline:
        raise InputError(f"{source}={address}: the host {host!r} did not resolve {wait.within} "
                         f"({reason}); allowed: a host name or IP address of process 0 that every process resolves")
      time.sleep(min(1.0, max(0.0, wait.deadline - time.monotonic())))


def _check_coordinator_port(source: str, address: str) -> socket.socket | None:
  """Process 0 starts the coordinator on the address's port: that port must be free on this host, and
  nobody may answer at the address yet (another process started as process 0, there or elsewhere).

  Returns:
    The socket that found the port free, still bound, now with ``SO_REUSEPORT``: held until JAX's
    coordinator has bound the port too (gRPC binds with ``SO_REUSEPORT``), so that a second process 0
    started at the same moment finds the port in use instead of crashing in JAX's server. None
    where nothing is held (``JAX_COORDINATOR_BIND_ADDRESS`` set, or no such option here).
  """
  if os.environ.get("JAX_COORDINATOR_BIND_ADDRESS"):
    return None  # the coordinator binds elsewhere: that is JAX's to report
  host, port = split_address(address)
  twice = "another program holds it, or another process was started as process 0"
  held = None
  for family, any_host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
    try:
      probe = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
      continue  # no IPv6 on this host: try IPv4
    try:
      probe.bind((any_host, port))  # without SO_REUSEPORT: fails while anyone holds the port
    except OSError as e:
      probe.close()
      if e.errno == errno.EADDRINUSE:
        raise InputError(f"{source}={address}: port {port} is in use on this host, where process 0 starts the "
                         f"coordinator: {twice} (each process needs its own --process_id); "
                         "choose a free port") from None
      if e.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
        continue
      raise InputError(f"{source}={address}: process 0 cannot start the coordinator on port {port} of this host "
                       f"({e.strerror or e}); choose another port") from None
    try:
      probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
      held = probe
    except (AttributeError, OSError):  # no SO_REUSEPORT here: let go, and let JAX bind
      probe.close()
    break
  try:
    with socket.create_connection((host, port), timeout=1.0):
      pass
  except OSError:
    return held  # nobody answers: the coordinator can start
  if held is not None:
    held.close()
  raise InputError(f"{source}={address}: something already answers there, before this process 0 started the "
                   f"coordinator: {twice} (each process needs its own --process_id), or {host!r} is not this "
                   "host (process 0 runs on the coordinator's host)")


def initialize(args: DistributedArgs) -> None:
  """Joins the job: ``jax.distributed.initialize(**args.kwargs)``, after the checks only this host can make.

  The coordinator's host name must resolve (waited for, up to the peer timeout); process 0's port
  must be free here and unanswered. While the other processes have not all joined, this process
  says so within seconds (``jaxlab.peers.NOTICE_AFTER_S``) and, at the peer timeout, ends with one
  line (exit status 2): JAX's own join timeout aborts the process with a C++ stack trace. Once
  joined, a SIGTERM while a peer is gone or stuck ends the process (``jaxlab.peers.watch_preemption``).

  Args:
    args: from :func:`distributed_args`.

  Raises:
    InputError: some settings were not given and no cluster was detected to supply them; the
      coordinator's host did not resolve in time; process 0's port is taken.
  """
  import jax  # here, not at the top: the checks above run before JAX is imported

  peers.set_peer_timeout(*args.peer_timeout)
  kwargs, seconds = dict(args.kwargs), args.peer_timeout[0]
  address, held = kwargs.get("coordinator_address"), None
  if address is not None:
    _resolve(args.sources["coordinator_address"], address, args.peer_timeout)
    if kwargs.get("process_id") == 0:
      held = _check_coordinator_port(args.sources["coordinator_address"], address)
  count = kwargs.get("num_processes")
  who = f"process {kwargs['process_id']} of {count}" if "process_id" in kwargs and count else "this process"
  others = ("the other process" if count == 2 else f"the other {count - 1} processes") if count else "the other processes"
  at = f" at {address}" if address else ""
  give_up = (f"{others} did not {'join' if count == 2 else 'all join'}{at} {{within}}; start every process with the same --coordinator_address and "
             f"--num_processes and each its own --process_id" + (f" in [0, {count - 1}]" if count else "")
             + (", process 0 on the coordinator's host" if address else ""))
  # JAX aborts the process when its own join timeout passes: ours comes first, with one line.
  kwargs["initialization_timeout"] = int(seconds) + 60
  try:
    with peers.Wait(who, f"{others} to join{at}", give_up, timeout=args.peer_timeout):
      jax.distributed.initialize(**kwargs)
  except ValueError as e:
    if "defined" not in str(e):  # not jax's "... must be defined": something else, keep it
      raise
    example = "e.g. --coordinator_address=localhost:1234 --num_processes=2 --process_id=0 (then 1)"
    if not args.kwargs:
      raise InputError("--distributed: no cluster (Cloud TPU, SLURM, Open MPI) was detected to launch on; "
                       f"elsewhere give {_listed(args.missing())}, {example}") from None
    given = [f"{args.sources[name]}={value}" for name, value in args.kwargs.items()]
    raise InputError(f"{_listed(given)} given without {_listed(args.missing())}, and no cluster "
                     "(Cloud TPU, SLURM, Open MPI) was detected to supply "
                     f"{'them' if len(args.missing()) > 1 else 'it'}; give all three, {example}") from None
  finally:
    if held is not None:  # the coordinator holds the port now (or never will)
      held.close()
  peers.watch_preemption()  # from now on, a SIGTERM while a peer is gone ends this process
