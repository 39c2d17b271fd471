"""Multi-process launch settings of the command line, checked before JAX starts.

``python -m jaxlab.main`` takes ``--coordinator_address``, ``--num_processes`` and
``--process_id``, each with an environment variable as fallback (``JAX_COORDINATOR_ADDRESS``,
``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``). :func:`distributed_args` turns them into the
arguments of ``jax.distributed.initialize``, with one-line errors for bad values; this module
imports nothing heavy, so the checks run before JAX is imported.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

from jaxlab.errors import InputError

#: The environment variable read for each setting the flag leaves unset.
ENV_VARS = {
    "coordinator_address": "JAX_COORDINATOR_ADDRESS",
    "num_processes": "JAX_NUM_PROCESSES",
    "process_id": "JAX_PROCESS_ID",
}

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


def _int(source: str, raw: str, minimum: int, meaning: str) -> int:
  try:
    value = int(raw)
  except ValueError:
    value = None
  if value is None or value < minimum:
    raise InputError(f"{source}={raw}; must be an int >= {minimum} ({meaning})")
  return value


def _address(source: str, raw: str) -> str:
  host, _, port = raw.strip().rpartition(":")
  try:
    port_ok = 1 <= int(port) <= 65535
  except ValueError:
    port_ok = False
  if not host or not port_ok:
    raise InputError(f"{source}={raw}; must be host:port with a port in [1, 65535] "
                     f"({_MEANING['coordinator_address']})")
  return raw.strip()


@dataclasses.dataclass(frozen=True)
class DistributedArgs:
  """The settings of a distributed run, checked: what :func:`initialize` passes to JAX.

  Attributes:
    kwargs: keyword arguments of ``jax.distributed.initialize`` (only the settings given; ``{}``
      leaves all of them to cluster detection).
    sources: where each given setting came from: ``"--flag"`` or the environment variable.
  """
  kwargs: dict[str, Any]
  sources: dict[str, str]

  def missing(self) -> list[str]:
    """The settings left to cluster detection, as ``--flag (ENV_VAR)``."""
    return [f"--{name} ({env})" for name, env in ENV_VARS.items() if name not in self.kwargs]


def distributed_args(coordinator_address: str | None = None, num_processes: str | None = None,
                     process_id: str | None = None, *, distributed: bool = False,
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
    environ: the environment (default: ``os.environ``).

  Returns:
    None for a single-process run, else the settings given, checked and typed.

  Raises:
    InputError: a value that is not an int, a process id outside ``[0, num_processes - 1]``, an
      address without a port; the message names the flag or variable and the value.

  Examples:
    >>> from jaxlab.distributed import distributed_args
    >>> args = distributed_args("localhost:1234", "2", None, environ={"JAX_PROCESS_ID": "1"})
    >>> args.kwargs, args.sources["process_id"]
    ({'coordinator_address': 'localhost:1234', 'num_processes': 2, 'process_id': 1}, 'JAX_PROCESS_ID')
    >>> distributed_args(environ={}) is None, distributed_args(distributed=True, environ={}).kwargs
    (True, {})
  """
  environ = os.environ if environ is None else environ
  raw = {"coordinator_address": coordinator_address, "num_processes": num_processes, "process_id": process_id}
  given = {name: g for name, value in raw.items() if (g := _given(name, value, environ)) is not None}
  if not given and not distributed:
    return None
  kwargs: dict[str, Any] = {}
  if "coordinator_address" in given:
    kwargs["coordinator_address"] = _address(*given["coordinator_address"])
  if "num_processes" in given:
    kwargs["num_processes"] = _int(*given["num_processes"], 1, _MEANING["num_processes"])
  if "process_id" in given:
    source, value = given["process_id"]
    kwargs["process_id"] = _int(source, value, 0, _MEANING["process_id"])
    if "num_processes" in kwargs and kwargs["process_id"] >= kwargs["num_processes"]:
      n = kwargs["num_processes"]
      raise InputError(f"{source}={value}; must be an int in [0, {n - 1}] "
                       f"(this process's index; {given['num_processes'][0]}={n})")
  return DistributedArgs(kwargs, {name: source for name, (source, _) in given.items()})


def _listed(items: list[str]) -> str:
  return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def initialize(args: DistributedArgs) -> None:
  """``jax.distributed.initialize(**args.kwargs)``; settings no cluster supplies are one ``InputError``.

  Args:
    args: from :func:`distributed_args`.

  Raises:
    InputError: some settings were not given and no cluster was detected to supply them.
  """
  import jax  # here, not at the top: the checks above run before JAX is imported

  try:
    jax.distributed.initialize(**args.kwargs)
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
