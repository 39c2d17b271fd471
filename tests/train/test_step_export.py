"""The trainer's step of every shipped experiment config lowers for GPU and TPU (``jax.export``).

Each case is the program the trainer itself runs: ``make_train_setup(config).train_step(k)`` with
the config's mesh on the 8 virtual CPU devices, its state and batch shardings and its
``steps_per_call``, exported for ("cuda", "tpu") in one lowering at the config's tiny size. The
configs are every trainer config shipped in configs/ and configs/examples/ (tiny variants; the
quickstart suite's experiments are these same configs) and one cell of each distinct network of
the DQN studies (dense, Soft-MoE, Top-1 heads; per-patch tokens; a vmapped learning-rate x seed
sweep; Space Invaders). Not trainer configs, so not here: configs/momo_lr_sweep.py and
configs/ot_clip_digits.py (their benchmarks build steps from the components tests/test_export.py
exports); configs/dpot_study.py's cells are configs/dpot_pde.py's DPOT and FNO models at other sizes;
configs/dpot_files.py trains the same DPOT step on batches read from files (host-side data).
configs/dqn_atari.py does not export: its step calls envpool on the host (an xfail says why).
Also: the composition config's DPOT with a Soft-MoE mixer on a (data 2 x model 2 x expert 2) mesh.
"""

from __future__ import annotations

import os

import jax
import pytest

from benchmarks.rl_study_cells import cell_config as _rl_cell
from jaxlab.config_files import load_config
from tests.support.export import BARRIER, export_train_step
from tests.support.clip_data import write_image_folder


def _study_cell(spec: str, cell: str, game: str | None = None):
  return lambda: _rl_cell(load_config(spec), cell, game)


CONFIGS = {
    # Each task's own tiny config is exported by tests/train/test_task_contract.py; here the rest.
    **{spec: (lambda spec=spec: load_config(spec)) for spec in (
        "dpot_pde:fno_tiny", "dpot_pde:mixture_tiny", "dpot_moe:tiny", "dpot_moe:dense_tiny")},
    "rl_expert_scaling:small/dense": _study_cell("rl_expert_scaling:small", "dense"),
    "rl_momo_dqn:small/momo_adam_star": _study_cell("rl_momo_dqn:small", "momo_adam_star"),
    "rl_expert_scaling:full_smoke/space_invaders/top1_8": _study_cell("rl_expert_scaling:full_smoke", "top1_8",
                                                                     "space_invaders"),
}


def _load(name: str, data_dir: str):
  config = CONFIGS[name]()
  if "data" in config and "cache_dir" in config.data:
    config.data.cache_dir = data_dir  # generated PDE data: shared by the cases, never in a user's cache
  if config.task == "clip_files":  # the user's image-caption folder, written here
    config.data.dir = os.path.join(data_dir, "pairs")
    write_image_folder(config.data.dir, num_images=40)
  return config


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("pde_data"))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_train_step_exports_for_cuda_and_tpu(name, data_dir):
  config = _load(name, data_dir)
  exported, setup = export_train_step(config)
  assert exported.nr_devices == setup.mesh.size
  # the real shardings went in: the module's input shardings are the trainer's state shardings
  state_in = exported.in_shardings_jax(setup.mesh)[:len(jax.tree.leaves(setup.abstract_state))]
  for got, want, leaf in zip(state_in, jax.tree.leaves(setup.state_sharding), jax.tree.leaves(setup.abstract_state)):
    assert got.is_equivalent_to(want, leaf.ndim), (got, want)
  if config.remat == "none":  # jax.checkpoint's own barriers would be legitimate; no shipped config remats
    assert BARRIER not in exported.mlir_module()


def test_quickstart_suite_is_made_of_exported_configs():
  # every shipped task's own tiny config is exported by test_task_contract.py (which covers each one)
  from jaxlab.train.task import TASKS  # pylint: disable=import-outside-toplevel
  shipped = {name for name in TASKS.names() if TASKS.target(name).startswith("jaxlab.")}
  for name, experiment in load_config("quickstart:tiny").experiments.items():
    assert f"{name}:tiny" in CONFIGS or experiment.task in shipped
    assert experiment.to_dict() == load_config(f"{name}:tiny").to_dict()


def test_dpot_soft_moe_on_a_data_model_expert_mesh_exports(data_dir):
  """The composition config (docs/methods/compose.md) on (data 2, model 2, expert 2)."""
  config = _load("dpot_moe:tiny", data_dir)
  config.mesh = (("data", 2), ("model", 2), ("expert", 2))
  exported, setup = export_train_step(config)
  assert dict(setup.mesh.shape) == {"data": 2, "model": 2, "expert": 2} and exported.nr_devices == 8
  shardings = dict(zip((jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(setup.abstract_state)[0]),
                       exported.in_shardings_jax(setup.mesh)))
  w1 = {path: s for path, s in shardings.items() if path.endswith("['mlp']['experts']['w1']")}
  assert any(p.startswith(".params") for p in w1) and any(".opt_state" in p for p in w1), list(w1)  # and moments
  assert all(s.spec == jax.sharding.PartitionSpec("expert", None, "model") for s in w1.values()), w1
  assert BARRIER not in exported.mlir_module()
