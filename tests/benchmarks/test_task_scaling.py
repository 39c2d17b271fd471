"""The scaling contract: each registered task's compiled train step on 1, 2, 4 and 8 devices, read by XLA.

Beside the task contract (tests/train/test_task_contract.py), over the same tiny configs with a
batch large enough that what grows with it dominates, the trainer's own step program is compiled
(never run) and its ``memory_analysis()`` must show, per device (``benchmarks/task_scaling.py``
measures it and states the bounds; it writes the whole table to
``benchmarks/results/train/task_scaling.json``):

* the arguments are the batch's shard plus the train state's shards, and nothing more: the batch
  falls as 1/n (it is split over "data"); the parameters, optimizer state and data state by the
  task's rules (``config.sharding_rules``; replicated where no rule splits them);
* the temporaries fall like the batch: temp(n) <= SLACK * temp(1) / n + STATE_TEMPS * the
  replicated state + ``MIN_WHOLE`` (scalars and small vectors);
* no temporary larger than the global batch itself (and ``MIN_WHOLE`` bytes) is held whole: an
  array of the many-device program that big must not have a shape of the 1-device program, unless
  it has the shape of a state leaf (replicated by the rules). Arrays of the batch's size may be
  whole by design (the OT-CLIP texts, all-gathered as [B, d]).

A task whose step collects its own data (DQN) splits vmapped runs over "data", not a batch: it is
measured with ``RUNS`` runs, whose state and temporaries must fall as 1/n. (A single DQN run is
not data-parallel: its whole step runs on every device.)

A failure prints the task's table (per-device KiB at each device count, the bound, what broke).
Compile only, ~60 s of CPU for the fast cases (1 and 8 devices); 2 and 4 devices are ``slow``
(``test_task_scales_with_the_devices[...]`` covers the same contract at the two ends).
"""

from __future__ import annotations

import pytest

from benchmarks.task_scaling import format_table, task_table
from tests.support.task_contract import CONTRACT


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("scaling_data"))


def _check(task: str, counts: tuple[int, ...], data_dir: str) -> None:
  table = task_table(CONTRACT[task][0], task, counts, data_dir)
  assert not any(row["broken"] for row in table.values()), "\n" + format_table(task, table)


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


def test_the_contract_sees_a_batch_held_whole():
  # The check can fail: a 1-device program's [B, d] batch-sized temporary, seen whole in an 8-device one.
  from benchmarks.task_scaling import verdict  # pylint: disable=import-outside-toplevel
  base = {"argument": 1 << 20, "batch": 1 << 20, "state": 0, "replicated_state": 0, "temp": 8 << 20,
          "state_shapes": set(), "arrays": {("f32", (4096, 256)): 1}}
  many = dict(base, argument=1 << 17, batch=1 << 17, temp=8 << 20)
  table = verdict("some_task", {1: base, 8: many})
  assert table[1]["broken"] == []
  assert any("held whole" in b for b in table[8]["broken"]) and any("temp" in b for b in table[8]["broken"])
