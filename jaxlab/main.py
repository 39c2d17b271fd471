r"""Command line: ``python -m jaxlab.main --config=configs/<name>.py[:arg] --workdir=DIR [--config.key=value ...]``.

Re-running the same command resumes from the latest checkpoint in ``DIR``.

Several processes (hosts) run the same command, each with its own process id:

* ``--distributed``: call ``jax.distributed.initialize()`` first, which detects the cluster on
  Cloud TPU, SLURM and Open MPI;
* elsewhere, ``--coordinator_address=host:port`` (of process 0), ``--num_processes=N`` and
  ``--process_id=0..N-1``, or the environment variables ``JAX_COORDINATOR_ADDRESS``,
  ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID`` where the flag is not given. Any of the three (flag or
  variable) implies ``--distributed``; a bad value is one line (``jaxlab.distributed.distributed_args``).

A process that waits for the others (to join, to agree on the run, to save together after SIGTERM)
says so within seconds and gives up with one line after ``--peer_timeout_s`` seconds (default: the
``JAXLAB_PEER_TIMEOUT_S`` environment variable, else 300). Before the first step the processes check
that they all start the same run (``jaxlab.experiment.agreement``). A collective whose peer is gone
ends the process with one line (status 1); any other error of a joined process keeps its traceback
and ends the process too, without JAX's shutdown, which would wait for the others.
"""

from __future__ import annotations

import os
import shutil
import sys
import traceback
from typing import Sequence

if __name__ == "__main__":  # the CLI, not an import: before JAX starts, a Ctrl-C only sets a flag
  from jaxlab import startup_interrupt
  startup_interrupt.defer()

from absl import app, flags, logging
from ml_collections import config_flags

from jaxlab.errors import InputError

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config: a file (configs/*.py[:arg]) or a name (quickstart:tiny).",
                                         lock_config=True)


class _LoadConfigOnce(flags.ArgumentParser):
  """``--config``'s parser: ``jaxlab.config_files.load_config``, run once per command.

  ml_collections' own parser would execute the file a second time, under another module name, so
  that a task or optimizer the file registers would be registered twice (and refused). Here
  ``parse_flags`` loads the file (for one-line errors) and hands this parser the ConfigDict.
  """

  def __init__(self):
    self.loaded: dict[str, object] = {}
    self.config = None  # the last config parsed, for the list of valid keys

  def parse(self, spec):
    config = self.loaded.pop(spec, None)
    if config is None:  # --config given as two arguments: loaded here, still once
      from jaxlab.config_files import load_config
      config = load_config(spec)
    self.config = config
    config.lock()  # as lock_config=True: an override of a key the config lacks is an error
    return config

  def flag_type(self) -> str:
    return "config object"


_CONFIG_PARSER = _LoadConfigOnce()
flags.FLAGS["config"].parser = _CONFIG_PARSER
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints and metrics.")
_STOP_AFTER = flags.DEFINE_integer("stop_after", None,
                                   "Stop after this global step (no final checkpoint), e.g. for time-sliced jobs.")
_DISTRIBUTED = flags.DEFINE_bool("distributed", False,
                                 "Call jax.distributed.initialize() first (multi-host; cluster auto-detected).")
# Strings, checked by jaxlab.distributed like their environment variables (one message for both).
_COORDINATOR = flags.DEFINE_string("coordinator_address", None,
                                   "host:port of process 0 (default: $JAX_COORDINATOR_ADDRESS); implies --distributed.")
_NUM_PROCESSES = flags.DEFINE_string("num_processes", None,
                                     "Number of processes (default: $JAX_NUM_PROCESSES); implies --distributed.")
_PROCESS_ID = flags.DEFINE_string("process_id", None,
                                  "This process's id in [0, num_processes) (default: $JAX_PROCESS_ID); "
                                  "implies --distributed.")
_PEER_TIMEOUT = flags.DEFINE_string("peer_timeout_s", None,
                                    "Seconds a process waits for the other processes (to join, to agree on the run, "
                                    "to save after SIGTERM) before it gives up (default: $JAXLAB_PEER_TIMEOUT_S, else 300).")
flags.mark_flags_as_required(["config", "workdir"])


def config_keys(config, prefix: str = "") -> list[str]:
  """All dotted keys of a ConfigDict, for error messages."""
  keys = []
  for k, v in config.items():
    if hasattr(v, "items"):
      keys.extend(config_keys(v, f"{prefix}{k}."))
    else:
      keys.append(f"{prefix}{k}")
  return keys


def _has_key(config, dotted: str) -> bool:
  node = config
  for part in dotted.split("."):
    if not hasattr(node, "items") or part not in node:
      return False
    node = node[part]
  return True


def _config_spec(argv: Sequence[str]) -> tuple[int, str] | None:
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      return i, a.split("=", 1)[1]
  return None


def parse_flags(argv: Sequence[str]) -> list[str]:
  """absl flag parsing with one-line errors for bad input.

  ``--config`` may be a path or a name (``--config=digits_mlp:tiny``); a missing, broken or
  argument-rejecting config, an unknown ``--config.key`` (the valid keys are listed) and a value
  of the wrong type each end in one line, not a traceback.
  """
  argv = list(argv)
  found = _config_spec(argv)
  config = None
  try:
    if found is not None:
      from jaxlab.config_files import load_config
      config = load_config(found[1])
      _CONFIG_PARSER.loaded[found[1]] = config
    return flags.FLAGS(argv)
  except InputError as e:
    _fail(str(e))
  except (AttributeError, KeyError) as e:
    config = config if config is not None else _CONFIG_PARSER.config
    overrides = [a[len("--config."):].split("=")[0] for a in argv[1:] if a.startswith("--config.")]
    unknown = [k for k in overrides if config is None or not _has_key(config, k)]
    if not unknown:
      raise
    valid = ", ".join(config_keys(config)) if config is not None else "(config did not load)"
    _fail(f"unknown config key(s) {unknown}.\nValid keys: {valid}")
  except flags.Error as e:  # a value of the wrong type, a missing required flag, ...
    _fail(str(e))
  raise AssertionError("unreachable")


def _fail(message: str) -> None:
  sys.stderr.write(f"jaxlab: error: {message}\n")
  if "jax" in sys.modules:
    from jaxlab import peers
    if peers.client() is not None:  # JAX's shutdown would wait for peers that may be gone: leave now
      peers.leave(2)
  sys.exit(2)


def _fmt(v) -> str:
  if v is None:
    return "-"
  return f"{v:.4g}" if isinstance(v, float) else str(v)


def summary_table(summaries: dict[str, dict]) -> str:
  """One column per experiment, one row per metric (union over experiments)."""
  keys = list(dict.fromkeys(k for s in summaries.values() for k in s))
  names = list(summaries)
  cols = [[_fmt(summaries[n].get(k)) for k in keys] for n in names]
  kw = max(len(k) for k in keys + ["metric"])
  widths = [max(len(n), *(len(c) for c in col)) for n, col in zip(names, cols)]
  lines = ["  ".join(["metric".ljust(kw)] + [n.ljust(w) for n, w in zip(names, widths)]),
           "  ".join(["-" * kw] + ["-" * w for w in widths])]
  for i, k in enumerate(keys):
    lines.append("  ".join([k.ljust(kw)] + [col[i].ljust(w) for col, w in zip(cols, widths)]))
  return "\n".join(lines)


def _remove_if_empty(workdir: str) -> None:
  """Removes ``workdir`` (made by this command) if it holds no file, only empty directories."""
  if os.path.isdir(workdir) and not any(files for _, _, files in os.walk(workdir)):
    shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Sequence[str]) -> None:
  del argv
  created = not os.path.exists(_WORKDIR.value)
  try:
    summaries = _run(created)
  except KeyboardInterrupt:  # a second Ctrl-C during training (the first saves and stops), or one before it
    if created:
      _remove_if_empty(_WORKDIR.value)
    sys.stderr.write(f"\njaxlab: stopped by Ctrl-C without saving; {_WORKDIR.value} keeps its last checkpoint "
                     "(rerun to resume from it)\n")
    sys.exit(130)
  except Exception as e:  # noqa: BLE001 - only a job of several processes is handled here
    _end_if_joined(e)
    raise
  import jax
  if jax.process_index() == 0:
    print(f"\n{summary_table(summaries)}\n\nmetrics.jsonl, TensorBoard files and checkpoints are under {_WORKDIR.value}")


def _end_if_joined(error: Exception) -> None:
  """In a job of several processes, an error ends this process now: JAX's shutdown would wait for the
  others, which may be gone. A collective whose peer is gone is one line (status 1); anything else
  keeps its traceback."""
  if "jax" not in sys.modules:
    return
  from jaxlab import peers
  if peers.client() is None:
    return
  reason = peers.lost_peer(error)
  if reason is not None:
    sys.stderr.write(f"jaxlab: error: {peers.who()}: another process is gone ({reason}); {_WORKDIR.value} keeps "
                     "its last checkpoint: restart every process to resume\n")
  else:
    traceback.print_exc()
  peers.leave(1)


def _run(created: bool) -> dict[str, dict]:
  """Start-up and the experiments; a deferred start-up Ctrl-C raises ``KeyboardInterrupt`` at the
  first safe point (``jaxlab.startup_interrupt``)."""
  from jaxlab.errors import one_line_warnings
  from jaxlab.startup_interrupt import raise_if_pending
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  one_line_warnings()  # jaxlab's warnings as one line, as its errors
  from jaxlab.distributed import distributed_args, initialize
  from jaxlab.xla_flags import add_cpu_collective_timeouts
  add_cpu_collective_timeouts()  # before JAX starts its backends: no random aborts on loaded CPUs
  raise_if_pending()
  try:  # before any workdir exists: a refused launch leaves nothing behind
    processes = distributed_args(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value,
                                 distributed=_DISTRIBUTED.value, peer_timeout_s=_PEER_TIMEOUT.value)
    if processes is not None:
      initialize(processes)
      from jaxlab import peers
      peers.watch_preemption(_WORKDIR.value)  # a SIGTERM's give-up line names the workdir
  except InputError as e:
    _fail(str(e))
  if processes is not None:  # every process finds the same things: process 0 says them, once
    import jax
    one_line_warnings(show=jax.process_index() == 0)
  from jaxlab.errors import CheckpointError, DivergedError
  from jaxlab.experiment import check_experiments, run_checked
  from jaxlab.train.loop import ensure_writable
  raise_if_pending()
  try:  # the edge, once, before the workdir is made: a refused or no-op command leaves nothing
    experiments = check_experiments(_CONFIG.value, _STOP_AFTER.value)
  except InputError as e:
    _fail(str(e))
  try:  # bad input and run failures: one clear line; anything else is a bug and keeps its traceback
    ensure_writable(_WORKDIR.value)
    return {name: r.summary for name, r in run_checked(experiments, _WORKDIR.value).items()}
  except (InputError, CheckpointError, DivergedError) as e:
    if created:
      _remove_if_empty(_WORKDIR.value)  # a refused command leaves no trace
    _fail(str(e))
  raise AssertionError("unreachable")


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
