"""The scaling contract: each registered task's compiled train step on 1, 2, 4 and 8 devices, read by XLA.

Beside the task contract (tests/train/test_task_contract.py), over the same tiny configs with a
batch large enough that what grows with it dominates, the trainer's own step program
(``make_train_setup(config, devices).train_step(k)``, the default mesh ``("data", n)``) is
compiled (never run) and its ``memory_analysis()`` must show, per device:

* the arguments are the batch's shard plus the train state's shards, and nothing more: the batch
  falls as 1/n (it is split over "data"); the parameters, optimizer state and data state by the
  task's rules (``config.sharding_rules``; replicated where no rule splits them);
* the temporaries fall like the batch: temp(n) <= SLACK * temp(1) / n + STATE_TEMPS * the
  replicated state (gradients, updates and new moments of replicated parameters are replicated
  by the rules, and so are their temporaries) + ``MIN_WHOLE`` (scalars and small vectors);
* no temporary larger than the global batch itself (and ``MIN_WHOLE`` bytes) is held whole: an
  array of the many-device program that big must not have a shape of the 1-device program (it
  must shrink with n), unless it has the shape of a state leaf (replicated by the rules). Arrays of
  the batch's size may be whole by design (the OT-CLIP texts, all-gathered as [B, d]).

A task whose step collects its own data (DQN: no batch argument, the replay buffer in the state)
splits vmapped runs over "data", not a batch: it is measured with ``RUNS`` runs, whose state and
temporaries must fall as 1/n. (A single DQN run is not data-parallel: its whole step runs on every
device, 7.6 MB of temporaries per device at 1 and at 8 devices for ``dqn_minatar:tiny``.)

Compile only, ~60 s of CPU for the fast cases (1 and 8 devices); 2 and 4 devices are ``slow``
(``test_task_scales_with_the_devices[...]`` covers the same contract at the two ends).
"""

from __future__ import annotations

import collections
import math
import re
from typing import Any

import jax
import numpy as np
import pytest

from jaxlab.train.checkpoint import abstract_like
from jaxlab.experiment import make_train_setup
from tests.train.test_task_contract import CONTRACT

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


def measure(task: str, devices: int, data_dir: str) -> dict[str, Any]:
  """The compiled step of ``task`` on ``devices`` devices: per-device bytes and its arrays."""
  config = CONTRACT[task][0](data_dir)
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
  state_shardings = setup.state_sharding
  replicated = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize
                   for x, s in zip(jax.tree.leaves(setup.abstract_state), jax.tree.leaves(state_shardings))
                   if s.is_fully_replicated)
  state_shapes = {tuple(s.shard_shape(x.shape)) for x, s in zip(jax.tree.leaves(setup.abstract_state),
                                                                 jax.tree.leaves(state_shardings))}
  return {"argument": int(mem.argument_size_in_bytes), "temp": int(mem.temp_size_in_bytes),
          "batch": 0 if batch is None else _shard_bytes(step.batch_spec, jax.tree.map(
              lambda _: setup.batch_sharding(k), step.batch_spec)),
          "state": _shard_bytes(setup.abstract_state, state_shardings), "replicated_state": replicated,
          "arrays": _arrays(compiled.as_text()), "state_shapes": state_shapes}


def held_whole(one: dict[str, Any], many: dict[str, Any]) -> list[tuple[str, tuple[int, ...], int]]:
  """Arrays larger than the global batch that the many-device program holds at a one-device shape."""
  limit = max(MIN_WHOLE, one["batch"] + one["state"] * (one["batch"] == 0))
  return sorted(((dtype, dims, _nbytes((dtype, dims))) for dtype, dims in many["arrays"]
                 if _nbytes((dtype, dims)) > limit and (dtype, dims) in one["arrays"]
                 and dims not in many["state_shapes"]), key=lambda t: -t[2])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("scaling_data"))


def _check(task: str, counts: tuple[int, ...], data_dir: str) -> None:
  rows = {n: measure(task, n, data_dir) for n in counts}
  one = rows[1]
  for n, row in rows.items():
    # XLA holds exactly the shards the shardings say: the batch's and the state's, nothing replicated beyond.
    assert row["argument"] == row["batch"] + row["state"], (task, n, row["argument"], row["batch"], row["state"])
    assert row["batch"] * n == one["batch"], (task, n)
    if task in BY_RUNS:
      assert row["state"] * n == one["state"], (task, n, row["state"], one["state"])
    allowance = STATE_TEMPS * row["replicated_state"] + MIN_WHOLE  # + a program's fixed small temporaries
    assert row["temp"] <= SLACK * one["temp"] / n + allowance, (task, n, row["temp"], one["temp"], allowance)
    if n > 1:
      assert not held_whole(one, row), (task, n, held_whole(one, row)[:5])


#: Compiled at 1 and 8 devices in the default suite; dqn_atari's step (the Nature CNN, envpool) is
#: the slowest to compile and has dqn_minatar's structure, so it is ``slow``.
SLOW = ("dqn_atari",)


@pytest.mark.parametrize("task", [pytest.param(t, marks=pytest.mark.slow) if t in SLOW else t for t in sorted(CONTRACT)])
def test_task_scales_with_the_devices(task, data_dir):
  """dqn_atari is slow here (``test_task_scales_with_the_devices[dqn_minatar]`` covers the same step)."""
  if task == "dqn_atari":
    pytest.importorskip("envpool")
  _check(task, (1, 8), data_dir)


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(CONTRACT))
def test_task_scales_at_2_and_4_devices(task, data_dir):
  """Slow: the fast ``test_task_scales_with_the_devices`` checks 1 against 8 devices."""
  if task == "dqn_atari":
    pytest.importorskip("envpool")
  _check(task, (1, 2, 4), data_dir)
