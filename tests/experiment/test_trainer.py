"""The trainer end to end: device-count invariance, 2-D mesh, resumption, bad input."""

import json
import os

import jax
import numpy as np
import pytest

from configs import digits_clip, digits_mlp
from jaxlab.errors import InputError
from jaxlab.experiment import train
from tests.support.tolerances import steps_tol


def _config(**overrides):
  c = digits_mlp.get_config("tiny")
  c.batch_size = 64
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 1e-2
  c.model.hidden = (32, 16)
  for k, v in overrides.items():
    c[k] = v
  return c


def _params(result):
  return jax.tree.map(np.asarray, jax.device_get(result.state.params))


def _assert_trees_close(a, b, num_steps):
  # 1 vs 8 devices (or a 2-D mesh): the same Adam steps with gradients summed in another order.
  # Per parameter and step: dots over 64 pixels and 32 hidden units, a batch mean (the CLIP loss:
  # a 64 x 64 logit matrix), Adam: ~200 rounded operations, carried from step to step.
  tol = steps_tol(num_steps, 200)
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, **tol), a, b)


def _clip_config():
  c = digits_clip.get_config("tiny")
  c.batch_size = 64
  return c


@pytest.mark.parametrize("make_config", [_config, _clip_config], ids=["digits_mlp", "digits_clip"])
def test_one_device_equals_eight_devices(tmp_path, make_config):
  one = train(make_config(), str(tmp_path / "one"), devices=jax.devices()[:1], progress=False)
  eight = train(make_config(), str(tmp_path / "eight"), progress=False)
  assert one.summary["mesh"] == {"data": 1, "model": 1}
  assert eight.summary["mesh"] == {"data": 8, "model": 1}
  _assert_trees_close(_params(one), _params(eight), make_config().num_steps)


def test_2d_mesh_shards_large_params_over_model_and_matches(tmp_path):
  rules = ((r"Dense_[01]/kernel$", (None, "model")),)
  one = train(_config(), str(tmp_path / "one"), devices=jax.devices()[:1], progress=False)
  two_d = train(_config(mesh=(("data", 4), ("model", 2)), sharding_rules=rules), str(tmp_path / "2d"),
                progress=False)
  kernel = two_d.state.params["Dense_0"]["kernel"]
  assert kernel.sharding.spec == jax.sharding.PartitionSpec(None, "model")
  assert kernel.addressable_shards[0].data.shape == (64, 16)  # half of 32 columns per model shard
  adam_mu = two_d.state.opt_state[0].mu["Dense_0"]["kernel"]
  assert adam_mu.sharding.spec == kernel.sharding.spec
  _assert_trees_close(_params(one), _params(two_d), _config().num_steps)


def test_resume_after_kill_equals_uninterrupted_run(tmp_path):
  full = train(_config(), str(tmp_path / "full"), progress=False)
  workdir = str(tmp_path / "killed")
  first = train(_config(), workdir, stop_after=13, progress=False)  # checkpoint at 10, dies at 13
  assert int(first.state.step) == 13
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["10"]
  resumed = train(_config(), workdir, progress=False)
  assert int(resumed.state.step) == 20
  # Bit-equal by construction: the resumed run executes the same compiled step on restored state.
  jax.tree.map(np.testing.assert_array_equal, _params(full), _params(resumed))
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    steps = [json.loads(line)["step"] for line in f]
  assert steps == [5, 10, 15, 20]  # the killed run's step-15 line was replaced, not duplicated


def test_batch_not_divisible_by_data_axis_names_both_numbers(tmp_path):
  with pytest.raises(ValueError, match=r"global batch size 60 .*axis size 8"):
    train(_config(batch_size=60), str(tmp_path), progress=False)


def test_unwritable_workdir_fails_before_training(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("not a directory")
  with pytest.raises(InputError, match="not writable"):
    train(_config(), str(blocker / "sub"), progress=False)


def test_unknown_optimizer_lists_valid_names(tmp_path):
  c = _config()
  c.optimizer.name = "adamm"
  with pytest.raises(KeyError, match="valid names: .*adam"):
    train(c, str(tmp_path), progress=False)


def test_metrics_and_tensorboard_written(tmp_path):
  result = train(_config(), str(tmp_path), progress=False)
  rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
  assert rows[-1]["step"] == 20 and "test_accuracy" in rows[-1] and "steps_per_sec" in rows[-1]
  assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path / "tensorboard"))
  assert result.summary["test_accuracy"] > 0.3
