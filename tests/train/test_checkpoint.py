"""Checkpoints: keep policy, the config beside them, params-only restore, other runs' workdirs, faults."""

import os
import warnings

import chex
import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import pytest

from configs import digits_mlp
from jaxlab.errors import CheckpointError, InputError
from jaxlab.experiment import train
from jaxlab.train.checkpoint import restore_params
from jaxlab.train.workdir import Workdir


def _config(**overrides):
  c = digits_mlp.get_config("tiny")
  c.batch_size = 64
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 1e-2})
  c.model.hidden = (32, 16)
  c.checkpoint_every = 4
  for k, v in overrides.items():
    c[k] = v
  return c


def _steps(workdir):
  return sorted(int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit())


def test_keep_policy_and_config_saved_beside(tmp_path):
  train(_config(checkpoint_keep=2, checkpoint_keep_period=8), str(tmp_path), progress=False)
  assert _steps(str(tmp_path)) == [8, 16, 20]  # newest two, plus multiples of 8
  saved = Workdir(str(tmp_path)).saved_config(20)
  assert saved["model"]["hidden"] == [32, 16] and saved["optimizer"]["name"] == "adam"


def test_params_only_restore_for_fine_tuning(tmp_path):
  result = train(_config(), str(tmp_path), progress=False)
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), result.state.params)
  params = restore_params(str(tmp_path / "checkpoints"), abstract)
  chex.assert_trees_all_equal(jax.device_get(params), jax.device_get(result.state.params))  # a restore: bit-equal
  wrong = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[:-1] + (x.shape[-1] + 1,), x.dtype), abstract)
  with pytest.raises(InputError, match=r"do not fit this model: 6 of another shape \(Dense_0/bias: \(32,\) there, \(33,\) here \| "):
    restore_params(str(tmp_path / "checkpoints"), wrong)


def test_workdir_of_another_config_is_one_clear_error(tmp_path):
  train(_config(), str(tmp_path), progress=False)
  with pytest.raises(InputError, match=r"was trained with another config: model.hidden: \[32, 16\] there, \[64\] here\. Resuming may change only name, num_steps"):
    train(_config(model=ml_collections.ConfigDict({"name": "mlp", "hidden": (64,), "num_outputs": 10})),
          str(tmp_path), progress=False)


def _truncate_all_files(step_dir):
  for root, _, files in os.walk(step_dir):
    for f in files:
      with open(os.path.join(root, f), "r+b") as fh:
        fh.truncate(1)


def test_truncated_latest_checkpoint_falls_back_to_the_previous_one(tmp_path):
  full = train(_config(), str(tmp_path / "full"), progress=False)
  workdir = str(tmp_path / "run")
  train(_config(), workdir, stop_after=10, progress=False)  # checkpoints at 4 and 8
  _truncate_all_files(os.path.join(workdir, "checkpoints", "8"))
  with pytest.warns(RuntimeWarning, match=r"checkpoints/8 is unreadable"):
    resumed = train(_config(), workdir, progress=False)
  # Bit-equal by construction: the same compiled step on this machine, from the restored step-4 state.
  chex.assert_trees_all_equal(jax.device_get(full.state.params), jax.device_get(resumed.state.params))


def test_no_readable_checkpoint_refuses_to_start_over(tmp_path):
  train(_config(checkpoint_keep=1), str(tmp_path), stop_after=6, progress=False)
  _truncate_all_files(os.path.join(str(tmp_path), "checkpoints", "4"))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    with pytest.raises(CheckpointError, match=r"no readable checkpoint in .*step 4: .*refusing to start over"):
      train(_config(), str(tmp_path), progress=False)
  assert _steps(str(tmp_path)) == [4]  # not overwritten


def test_failing_save_names_the_directory_and_keeps_earlier_checkpoints(tmp_path, monkeypatch):
  workdir = str(tmp_path)
  train(_config(), workdir, stop_after=4, progress=False)
  original = ocp.CheckpointManager.save

  def disk_full(self, step, *args, **kwargs):
    if step > 4:
      raise OSError(28, "No space left on device")
    return original(self, step, *args, **kwargs)

  monkeypatch.setattr(ocp.CheckpointManager, "save", disk_full)
  ckpt_dir = os.path.join(workdir, "checkpoints")
  with pytest.raises(CheckpointError, match=f"saving checkpoint 8 in {ckpt_dir} failed: OSError.*No space left"):
    train(_config(), workdir, progress=False)
  monkeypatch.undo()
  assert _steps(workdir) == [4]
  resumed = train(_config(), workdir, progress=False)  # the earlier checkpoint restores
  assert int(resumed.state.step) == 20
