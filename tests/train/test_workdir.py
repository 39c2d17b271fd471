"""The one reader of a workdir, and restores that read only what is asked for, where it is placed.

One run of 4 vmapped seeds on the 8 virtual CPU devices (mesh data=4 x model=2, the run axis over
"data") is trained once; fine-tuning from one of its seeds and ``load_run`` on a mesh read it.
"""

import os

import chex
import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import pytest

import jaxlab
from configs import digits_mlp
from jaxlab import report
from jaxlab.errors import CheckpointError
from jaxlab.train import checkpoint as checkpoint_lib
from jaxlab.train.finetune import fine_tune_start
from jaxlab.train.mesh import make_mesh
from jaxlab.sharding import tree_shardings
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.experiment import train
from jaxlab.train.workdir import Workdir, read_metrics, saved_config

SEEDS = 4
MESH = (("data", 4), ("model", 2))


def _config(**overrides):
  c = digits_mlp.get_config("tiny")
  c.batch_size, c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = 64, 4, 2, 2, 2
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 1e-2})
  for k, v in overrides.items():
    c[k] = v
  return c


@pytest.fixture(scope="module")
def seeds_dir(tmp_path_factory):
  config = _config(mesh=MESH)
  config.runs.seeds = SEEDS
  workdir = str(tmp_path_factory.mktemp("seeds"))
  train(config, workdir, progress=False)  # all 8 devices
  return workdir


def test_the_reader_gives_steps_config_metrics_and_experiments(seeds_dir, tmp_path):
  w = Workdir(seeds_dir)
  assert w.steps() == [2, 4] and w.latest_step() == 4 and w.has_checkpoints and w.has_metrics
  assert w.saved_config()["runs"]["seeds"] == SEEDS and w.saved_config(2)["mesh"] == [["data", 4], ["model", 2]]
  assert saved_config(seeds_dir) == w.saved_config(4) and saved_config(str(tmp_path)) is None
  assert w.saved_config(3) is None
  with pytest.raises(CheckpointError, match=r"the config of .*checkpoints/3 is unreadable"):
    w.saved_config(3, required=True)
  assert [r["step"] for r in w.metrics() if "test_accuracy" in r] == [2, 4]
  assert len(w.logged_at(4)["test_accuracy"]) == SEEDS
  for name, inside in (("a", "metrics.jsonl"), ("b", "checkpoints/"), ("c", "notes/")):
    (tmp_path / "suite" / name / inside).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "suite" / name / inside).touch() if not inside.endswith("/") else (tmp_path / "suite" / name / inside).mkdir()
  suite = Workdir(tmp_path / "suite").experiments()  # a suite: one workdir per experiment
  assert [(os.path.basename(e.path), e.has_metrics, e.has_checkpoints) for e in suite] == [
      ("a", True, False), ("b", False, True)]

  # A last line cut short by a kill is skipped; a bad line before it is not the trainer's file.
  (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": null}\n{"step": 2, "lo')
  rows = read_metrics(str(tmp_path))
  assert len(rows) == 1 and np.isnan(rows[0]["loss"])
  (tmp_path / "metrics.jsonl").write_text('{"step": 1\n{"step": 2}\n')
  with pytest.raises(ValueError):
    read_metrics(str(tmp_path))


def test_one_list_of_keys_that_are_not_a_setting():
  base = checkpoint_lib.BOOKKEEPING_KEYS
  assert set(checkpoint_lib.RESUME_SAFE_KEYS) - set(base) == {"num_steps"}  # a resumed run may run longer
  assert checkpoint_lib.RESUME_SAFE_KEYS[:2] == ("name", "num_steps")       # the order the refusal lists
  assert set(report.NOT_A_SETTING) - set(base) == {"seed", "runs.*"}         # they tell seeds apart
  assert set(base) <= set(report.NOT_A_SETTING) & set(checkpoint_lib.RESUME_SAFE_KEYS)


def _fresh_params_on_the_mesh():
  """One run's params placed as a fine-tuning run on the 8 devices places them (kernels over "model")."""
  config = _config(mesh=MESH)
  mesh = make_mesh(config.mesh)
  params = make_task(config, task_context(config)).init_params(jax.random.key(7))
  shardings = tree_shardings(params, mesh, config.sharding_rules)
  return jax.tree.map(jax.device_put, params, shardings)


def test_fine_tuning_from_one_seed_reads_only_that_seed_onto_its_sharding(seeds_dir, monkeypatch):
  every = jaxlab.load_run(seeds_dir)  # all runs, the default device: the reference
  fresh = _fresh_params_on_the_mesh()
  reads = []
  original = checkpoint_lib._read_region

  def recording(store, index):
    out = original(store, index)
    reads.append(out.shape)
    return out

  def whole_restore(*args, **kwargs):
    raise AssertionError("a whole-array restore while fine-tuning from one seed")

  monkeypatch.setattr(checkpoint_lib, "_read_region", recording)
  monkeypatch.setattr(ocp.Checkpointer, "restore", whole_restore)
  for i in (0, 2):
    reads.clear()
    start = fine_tune_start(fresh, seeds_dir, seed_index=i)
    chex.assert_trees_all_equal(jax.device_get(start.params), jax.tree.map(lambda x: np.asarray(x[i]), every.params))
    jax.tree.map(lambda got, want: (got.sharding == want.sharding) or pytest.fail(str(got.sharding)),
                 start.params, fresh)
    # Every array brought into memory is one device's shard of one run: never the run axis.
    shard_shapes = {x.sharding.shard_shape(x.shape) for x in jax.tree.leaves(fresh)}
    assert reads and set(reads) <= shard_shapes
    kernel = fresh["Dense_0"]["kernel"]
    assert kernel.sharding.shard_shape(kernel.shape)[1] == kernel.shape[1] // 2  # really split over "model"


def test_load_run_on_a_mesh_places_like_the_trainer_and_reproduces_the_log(seeds_dir):
  config = _config(mesh=MESH)
  mesh = make_mesh(config.mesh)
  run = jaxlab.load_run(seeds_dir, mesh=mesh)
  kernel = run.params["Dense_0"]["kernel"]
  assert kernel.sharding.spec == jax.sharding.PartitionSpec("data", None, "model")  # the trainer's
  evaluated, logged = run.evaluate(), run.logged_metrics()
  assert evaluated
  for key, value in evaluated.items():  # the trainer's program on the trainer's placement: bit-equal
    np.testing.assert_array_equal(np.asarray(value), np.asarray(logged[key]), err_msg=key)

  one = jaxlab.load_run(seeds_dir, seed_index=3, mesh=mesh)  # one run, placed as a single run
  assert one.params["Dense_0"]["kernel"].sharding.spec == jax.sharding.PartitionSpec(None, "model")
  chex.assert_trees_all_equal(jax.device_get(one.params), jax.tree.map(lambda x: np.asarray(x[3]), run.params))
  assert one.logged_metrics()["test_accuracy"] == logged["test_accuracy"][3]
