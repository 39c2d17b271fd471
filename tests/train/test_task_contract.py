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
covering a new task is one line here (the config that trains it at tiny size).
"""

from __future__ import annotations

import math
import os
from typing import Callable

import chex
import jax
import numpy as np
import pytest

import jaxlab
from jaxlab.config_files import load_config
from jaxlab.train.mesh import make_mesh
from jaxlab.train.task import TASKS
from jaxlab.train.trainer import train
from tests.ot_clip.data.conftest import write_image_folder
from tests.tolerances import steps_tol
from tests.train.test_step_export import export_train_step

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "configs", "examples", "robust_regression.py")


def _clip_files(data_dir: str):
  config = load_config("clip_files:tiny")
  config.data.dir = os.path.join(data_dir, "pairs")
  write_image_folder(config.data.dir, num_images=40)
  return config


def _pde(data_dir: str):
  config = load_config("dpot_pde:tiny")
  config.data.cache_dir = data_dir  # generated PDE data, never in a user's cache
  return config


#: task -> (data_dir -> its tiny config, roundings per parameter and step for the vmapped-vs-single
#: comparison (``tests.tolerances.steps_tol``)).
CONTRACT: dict[str, tuple[Callable[[str], object], int]] = {
    "digits_classification": (lambda _: load_config("digits_mlp:tiny"), 150),
    "digits_two_tower": (lambda _: load_config("digits_clip:tiny"), 400),
    "clip_files": (_clip_files, 400),
    "dqn_minatar": (lambda _: load_config("dqn_minatar:tiny"), 2000),
    "dqn_atari": (lambda _: load_config("dqn_atari:tiny"), 2000),
    "pde_operator": (_pde, 2000),
    "huber_regression": (lambda _: load_config(f"{EXAMPLE}:tiny"), 60),  # a user's own task, from its config file
}
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

  # A kill between checkpoints (saved at 2k, killed at 3k), then a resume: bit-identical.
  killed = str(tmp_path / "killed")
  train(two, killed, devices=devices, stop_after=3 * k, progress=False)
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
  for key, value in evaluated.items():  # the same program, shardings and data: bit-equal
    np.testing.assert_array_equal(value, np.asarray(logged[key], value.dtype), err_msg=key)


@pytest.mark.parametrize("task", sorted(CONTRACT))
def test_task_step_exports_for_cuda_and_tpu(task, data_dir):
  if task in NO_EXPORT:
    pytest.xfail(NO_EXPORT[task])
  config = _contract_config(task, data_dir)
  config.runs.seeds = 2
  exported, setup = export_train_step(config)
  assert exported.platforms == ("cuda", "tpu") and exported.nr_devices == setup.mesh.size == math.gcd(2, 8)
