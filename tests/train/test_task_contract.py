"""The task contract: one harness over every registered task (optax's ``_common_test.py`` is the model).

Each task in ``TASKS`` trains here at tiny size through the trainer, and must:

* train under jit with two vmapped runs (the trainer's one step program);
* give, in run ``i`` of the vmapped runs, what a single run seeded ``i`` gives (to the rounding of
  the steps: the two are different programs);
* resume bit-identically after a kill between checkpoints (``RESUME_NOT_EXACT``: a task whose
  resume cannot be, by design, says why and must still resume to the end);
* export the trainer's step for ``cuda`` and ``tpu`` (``jax.export``), with its real shardings;
* come back with ``jaxlab.load_run``: its ``evaluate()`` equals what ``metrics.jsonl`` logged.

A task jaxlab registers without an entry in ``CONTRACT`` fails ``test_every_shipped_task_is_covered``:
covering a new task is one line there (``tests/support/task_contract.py``: the config that trains it at tiny size).
"""

from __future__ import annotations

import json
import math
import os
import shutil

import chex
import jax
import numpy as np
import pytest

import jaxlab
from jaxlab.config_files import load_config
from jaxlab.train.mesh import make_mesh
from jaxlab.train.task import TASKS
from jaxlab.experiment import train
from tests.support.tolerances import steps_tol
from tests.support.export import BARRIER, export_train_step
from tests.support.task_contract import CONTRACT, EXAMPLE

#: Tasks whose resume is not bit-identical by design (each says why): the resume must still run to the end.
RESUME_NOT_EXACT = {"dqn_atari": "the emulators live in envpool's host pool, not in the checkpoint: a resumed "
                                 "run restarts its episodes (jaxlab/tasks/dqn_atari.py)"}
#: Tasks whose step cannot be exported (each says why; a strict xfail, so the day it exports, the test says so).
NO_EXPORT = {"dqn_atari": "envpool steps on the host: a CPU-only FFI custom call or an io_callback, "
                          "which jax.export cannot serialise"}


def _contract_config(task: str, data_dir: str):
  """The task's tiny config on a schedule the contract needs: 4 calls, a checkpoint after the 2nd."""
  config = CONTRACT[task][0](data_dir)
  k = config.steps_per_call
  config.num_steps, config.log_every, config.eval_every, config.checkpoint_every = 4 * k, k, 2 * k, 2 * k
  return config


def _killed_copy(workdir: str, into: str, last_checkpoint: int, killed_at: int) -> str:
  """``workdir`` as a run killed at ``killed_at`` leaves it: checkpoints after ``last_checkpoint``
  and metrics rows after ``killed_at`` removed (copying costs no training)."""
  shutil.copytree(workdir, into)
  for name in os.listdir(os.path.join(into, "checkpoints")):
    if name.isdigit() and int(name) > last_checkpoint:
      shutil.rmtree(os.path.join(into, "checkpoints", name))
  path = os.path.join(into, "metrics.jsonl")
  with open(path) as f:
    rows = [line for line in f if json.loads(line)["step"] <= killed_at]
  with open(path, "w") as f:
    f.writelines(rows)
  return into


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("contract_data"))


def test_every_shipped_task_is_covered():
  shipped = {name for name in TASKS.names() if TASKS.target(name).startswith("jaxlab.")}  # not the tests' own
  assert {"dqn_minatar", "pde_operator", "clip_files"} <= shipped
  assert shipped <= set(CONTRACT), f"add the new task to CONTRACT: {sorted(shipped - set(CONTRACT))}"
  load_config(f"{EXAMPLE}:tiny")  # registers its own task, as a user's config file does
  assert "huber_regression" in TASKS and "huber_regression" in CONTRACT


@pytest.mark.parametrize("task", sorted(CONTRACT))
def test_task_contract(task, data_dir, tmp_path):
  if task == "dqn_atari":
    pytest.importorskip("envpool")
  config = _contract_config(task, data_dir)
  assert config.task == task
  k, steps = config.steps_per_call, config.num_steps
  two = config.copy_and_resolve_references()
  two.runs.seeds = 2
  devices = jax.devices()[:2]  # two runs over "data"

  # Trains under jit, vmapped runs: the trainer's one program.
  many = train(two, str(tmp_path / "many"), devices=devices, progress=False)
  assert many.summary["runs"] == 2 and many.summary["steps"] == steps
  assert np.all(np.isfinite(np.asarray(many.summary["final_loss"])))

  # A kill between checkpoints, then a resume: the finished run's workdir as a kill at step 3k
  # leaves it (the checkpoint at 2k, rows up to 3k; the one at 4k never written).
  killed = _killed_copy(str(tmp_path / "many"), str(tmp_path / "killed"), last_checkpoint=2 * k, killed_at=3 * k)
  resumed = train(two, killed, devices=devices, progress=False)
  if task in RESUME_NOT_EXACT:
    assert resumed.summary["steps"] == steps and np.all(np.isfinite(np.asarray(resumed.summary["final_loss"])))
  else:
    chex.assert_trees_all_equal(jax.device_get(many.state), jax.device_get(resumed.state))

  # Run 1 of the vmapped runs is the single run seeded 1.
  one = config.copy_and_resolve_references()
  one.seed = 1
  single = train(one, str(tmp_path / "one"), devices=jax.devices()[:1], progress=False)
  chex.assert_trees_all_close(jax.tree.map(lambda x: x[1], jax.device_get(many.state.params)),
                              jax.device_get(single.state.params), **steps_tol(steps, CONTRACT[task][1]))

  # load_run: the trainer's evaluation again, equal to the log.
  run = jaxlab.load_run(str(tmp_path / "many"), mesh=make_mesh(two.mesh, devices))
  evaluated, logged = run.evaluate(), run.logged_metrics()
  assert set(evaluated) <= set(logged)
  for key, value in evaluated.items():  # the same program, shardings and data: bit-equal (plain floats, both)
    np.testing.assert_array_equal(np.asarray(value), np.asarray(logged[key]), err_msg=key)


@pytest.mark.parametrize("task", [
    pytest.param(t, marks=pytest.mark.xfail(strict=True, raises=NotImplementedError, reason=NO_EXPORT[t]))
    if t in NO_EXPORT else t for t in sorted(CONTRACT)])
def test_task_step_exports_for_cuda_and_tpu(task, data_dir):
  config = CONTRACT[task][0](data_dir)  # as shipped: one run over all 8 devices
  exported, setup = export_train_step(config)
  assert exported.platforms == ("cuda", "tpu") and exported.nr_devices == setup.mesh.size == 8
  # the real shardings went in: the module's input shardings are the trainer's state shardings
  state_in = exported.in_shardings_jax(setup.mesh)[:len(jax.tree.leaves(setup.abstract_state))]
  for got, want, leaf in zip(state_in, jax.tree.leaves(setup.state_sharding), jax.tree.leaves(setup.abstract_state)):
    assert got.is_equivalent_to(want, leaf.ndim), (got, want)
  assert BARRIER not in exported.mlir_module()  # the CPU-only Soft-MoE kernel stays out of accelerator programs
