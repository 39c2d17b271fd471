"""Several processes start one run: before the first step they check that it is the same run.

Every process of a multi-process job runs the same command; one started with another config
value, ``--stop_after``, process count or JAX version would train another run, or hang in the
first collective the others do not make. :func:`agree_across_processes` builds this process's
record of the run and checks it against the others' through ``jaxlab.peers.agree`` (a hash per
process, compared by process 0 over JAX's coordination service): a difference is one line on every
process, naming the first differing key and each process's value.
"""

from __future__ import annotations

from typing import Any

from jaxlab import peers
from jaxlab.train.checkpoint import flat_config


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


def _fix(key: str) -> str:
  if key == "num_processes":
    return "start every process with the same --num_processes"
  if key.endswith(" version"):
    return "install the same versions on every host"
  return "start every process with the same command (config, --config.* overrides, --stop_after)"


def agree_across_processes(config: Any, stop_after: int | None = None) -> None:
  """Checks that every process of the joined job starts this run (nothing happens on one process).

  Args:
    config: this process's experiment config (or suite), already checked.
    stop_after: this process's ``--stop_after``.

  Raises:
    InputError: on every process alike, one line (``jaxlab.peers.agree``): a process id taken
      twice, a difference (the first differing key and each process's value), or a process that
      did not come within the peer timeout.
  """
  if peers.client() is None:
    return
  peers.agree(run_record(config, stop_after), _fix)
