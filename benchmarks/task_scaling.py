r"""The scaling contract's table: each registered task's compiled train step on 1, 2, 4 and 8 devices, read by XLA.

For every task of the task contract (``tests/train/test_task_contract.py``'s ``CONTRACT``: its tiny
config, with a batch large enough that what grows with it dominates), the trainer's own step program
(``make_train_setup(config, devices).train_step(k)``, the default mesh ``("data", n)``) is compiled
(never run) and its ``memory_analysis()`` is read, per device:

* ``argument``: must be the batch's shard plus the train state's shards (``batch`` falls as 1/n,
  ``state`` by the task's rules: replicated where no rule splits a parameter);
* ``temp``: must fall like the batch, ``temp(n) <= SLACK * temp(1) / n + STATE_TEMPS * replicated state
  + MIN_WHOLE`` (``temp_bound``): gradients, updates and new moments of replicated parameters are
  replicated too, and a program has a few small fixed temporaries;
* ``held_whole``: arrays larger than the global batch (and ``MIN_WHOLE``) that the n-device program
  holds at a shape of the 1-device program (not shrunk with n), other than state leaves: must be none.

A task whose step collects its own data (DQN: no batch argument, the replay buffer in the state)
splits vmapped runs over "data": it is measured with ``RUNS`` runs, whose state must fall as 1/n.

``tests/benchmarks/test_task_scaling.py`` asserts the contract (1 and 8 devices in the default suite);
this script writes the whole table::

  XLA_FLAGS=--xla_force_host_platform_device_count=8 nice -n 5 python benchmarks/task_scaling.py \
      --out=benchmarks/results/train/task_scaling.json

Compile only: ~5 CPU-minutes on 2 cores for every task at 1, 2, 4 and 8 devices.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import pathlib
import re
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: XLA may schedule a program's temporaries differently at another size (fusion, buffer reuse).
SLACK = 2.0
#: Temporaries of the state's size per replicated state byte: gradient, update, new moments.
STATE_TEMPS = 3.0
#: Arrays at most this large (or the global batch's size) may be held whole.
MIN_WHOLE = 64 << 10
#: Per task: config keys that make the batch-proportional work dominate (still compile-only).
BIGGER = {
    "digits_classification": {"batch_size": 1024},
    "digits_two_tower": {"batch_size": 1024},
    "clip_files": {"batch_size": 32},
}
#: Tasks whose step collects its own data (no batch argument): they scale by vmapped runs over "data".
BY_RUNS = ("dqn_minatar", "dqn_atari")
RUNS = 8
SHAPE = re.compile(r"= (f32|f16|bf16|s32|u32|s8|u8|pred|f64|s64)\[([0-9,]*)\]")
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "s8": 1, "u8": 1, "pred": 1, "f64": 8, "s64": 8}


def _shard_bytes(tree: Any, shardings: Any) -> int:
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  leaves, spec = jax.tree.leaves(tree), jax.tree.leaves(shardings)
  return sum(math.prod(s.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize for x, s in zip(leaves, spec))


def _arrays(hlo: str) -> collections.Counter:
  """(dtype, dims) -> count of every array an instruction of the compiled module produces."""
  out: collections.Counter = collections.Counter()
  for dtype, dims in SHAPE.findall(hlo):
    out[(dtype, tuple(int(d) for d in dims.split(",") if d))] += 1
  return out


def _nbytes(key: tuple[str, tuple[int, ...]]) -> int:
  return ITEMSIZE[key[0]] * math.prod(key[1])


def measure(config: Any, task: str, devices: int) -> dict[str, Any]:
  """The compiled step of ``config`` (task ``task``) on ``devices`` devices: per-device bytes and its arrays."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from jaxlab.experiment import make_train_setup  # pylint: disable=import-outside-toplevel
  from jaxlab.train.checkpoint import abstract_like  # pylint: disable=import-outside-toplevel
  for key, value in BIGGER.get(task, {}).items():
    config[key] = value
  if task in BY_RUNS:  # its step samples its own batch: what "data" splits is the vmapped runs
    config.runs.seeds = RUNS
  setup = make_train_setup(config, jax.devices()[:devices])
  k = config.steps_per_call
  step = setup.train_step(k)
  state = abstract_like(setup.abstract_state, setup.state_sharding)
  batch = None
  if step.takes_batch:
    batch = abstract_like(step.batch_spec, jax.tree.map(lambda _: setup.batch_sharding(k), step.batch_spec))
  with jax.set_mesh(setup.mesh):
    compiled = step.jitted.lower(state, batch).compile()
  mem = compiled.memory_analysis()
  state_leaves, state_shardings = jax.tree.leaves(setup.abstract_state), jax.tree.leaves(setup.state_sharding)
  replicated = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize
                   for x, s in zip(state_leaves, state_shardings) if s.is_fully_replicated)
  return {"argument": int(mem.argument_size_in_bytes), "temp": int(mem.temp_size_in_bytes),
          "batch": 0 if batch is None else _shard_bytes(step.batch_spec, jax.tree.map(
              lambda _: setup.batch_sharding(k), step.batch_spec)),
          "state": _shard_bytes(setup.abstract_state, setup.state_sharding), "replicated_state": replicated,
          "arrays": _arrays(compiled.as_text()),
          "state_shapes": {tuple(s.shard_shape(x.shape)) for x, s in zip(state_leaves, state_shardings)}}


def held_whole(one: dict[str, Any], many: dict[str, Any]) -> list[tuple[str, tuple[int, ...], int]]:
  """Arrays larger than the global batch that the many-device program holds at a one-device shape."""
  limit = max(MIN_WHOLE, one["batch"] + one["state"] * (one["batch"] == 0))
  return sorted(((dtype, dims, _nbytes((dtype, dims))) for dtype, dims in many["arrays"]
                 if _nbytes((dtype, dims)) > limit and (dtype, dims) in one["arrays"]
                 and dims not in many["state_shapes"]), key=lambda t: -t[2])


def verdict(task: str, rows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
  """Per device count: the measured bytes, the bounds they must keep and what breaks them (``broken``, [] if none)."""
  one = rows[1]
  out = {}
  for n, row in sorted(rows.items()):
    bound = SLACK * one["temp"] / n + STATE_TEMPS * row["replicated_state"] + MIN_WHOLE
    whole = held_whole(one, row) if n > 1 else []
    broken = []
    if row["argument"] != row["batch"] + row["state"]:
      broken.append(f"argument {row['argument']} != batch {row['batch']} + state {row['state']}")
    if row["batch"] * n != one["batch"]:
      broken.append(f"batch {row['batch']} x {n} != {one['batch']}")
    if task in BY_RUNS and row["state"] * n != one["state"]:
      broken.append(f"state of {RUNS} runs {row['state']} x {n} != {one['state']}")
    if row["temp"] > bound:
      broken.append(f"temp {row['temp']} > bound {bound:.0f}")
    if whole:
      broken.append(f"held whole: {whole[:5]}")
    out[n] = {"argument": row["argument"], "batch": row["batch"], "state": row["state"],
              "replicated_state": row["replicated_state"], "temp": row["temp"], "temp_bound": int(bound),
              "temp_over_one_device": row["temp"] / max(one["temp"], 1),
              "held_whole": [[dtype, list(dims), size] for dtype, dims, size in whole],
              "held_whole_count": len(whole), "broken": broken, "kept": not broken}
  return out


def format_table(task: str, table: dict[int, dict[str, Any]]) -> str:
  """The task's rows as text (per-device KiB), for a test's message or a terminal."""
  lines = [f"{task}: per-device KiB  devices | batch | state (replicated) | argument | temp (bound) | broken"]
  for n, r in table.items():
    lines.append(f"  {n} | {r['batch'] / 1024:.0f} | {r['state'] / 1024:.0f} ({r['replicated_state'] / 1024:.0f}) | "
                 f"{r['argument'] / 1024:.0f} | {r['temp'] / 1024:.0f} ({r['temp_bound'] / 1024:.0f}) | "
                 f"{'; '.join(r['broken']) or 'none'}")
  return "\n".join(lines)


def task_table(config_fn: Any, task: str, counts: tuple[int, ...], data_dir: str) -> dict[int, dict[str, Any]]:
  """:func:`verdict` of ``task`` at ``counts`` devices (1 is always measured), its config from ``config_fn(data_dir)``."""
  rows = {n: measure(config_fn(data_dir), task, n) for n in sorted(set((1,) + tuple(counts)))}
  return verdict(task, rows)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--out", default="")
  p.add_argument("--devices", default="1,2,4,8")
  p.add_argument("--tasks", default="", help="comma-separated; default: every task of the contract")
  args = p.parse_args()
  counts = tuple(int(n) for n in args.devices.split(","))
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={max(counts)}").strip()
  sys.path.insert(0, str(ROOT))
  import jax  # pylint: disable=import-outside-toplevel
  from tests.support.task_contract import CONTRACT  # pylint: disable=import-outside-toplevel
  tasks = args.tasks.split(",") if args.tasks else sorted(CONTRACT)
  out: dict[str, Any] = {
      "jax": jax.__version__, "platform": jax.devices()[0].platform, "devices": list(counts),
      "command": "XLA_FLAGS=--xla_force_host_platform_device_count=8 python benchmarks/task_scaling.py "
                 + " ".join(sys.argv[1:]),
      "contract": {"slack": SLACK, "state_temps": STATE_TEMPS, "min_whole_bytes": MIN_WHOLE, "runs": RUNS,
                   "by_runs": list(BY_RUNS), "bigger": BIGGER},
      "unit": "bytes per device", "tasks": {}}
  with tempfile.TemporaryDirectory() as data_dir:
    for task in tasks:
      start = time.process_time()
      try:
        table = task_table(CONTRACT[task][0], task, counts, data_dir)
      except ModuleNotFoundError as e:  # an optional extra (envpool) not installed here
        out["tasks"][task] = {"skipped": str(e)}
        print(task, "skipped:", e, flush=True)
        continue
      out["tasks"][task] = {"compile_cpu_s": time.process_time() - start,
                            "by_devices": {str(n): row for n, row in table.items()}}
      print(format_table(task, table), flush=True)
  if args.out:
    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
  main()
