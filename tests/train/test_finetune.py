"""Fine-tuning: params from another run, chosen leaves re-initialised, others frozen."""

import chex
import jax
import ml_collections
import numpy as np
import pytest

from configs import digits_mlp
from jaxlab.errors import InputError
from jaxlab.train.finetune import load_pretrained
from jaxlab.experiment import train


def _config(**overrides):
  c = digits_mlp.get_config("tiny")
  c.batch_size = 64
  c.model.hidden = (32, 16)
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 1e-2})
  for k, v in overrides.items():
    c[k] = v
  return c


def test_fine_tune_loads_freezes_and_reinitialises(tmp_path):
  pre = train(_config(), str(tmp_path / "pre"), devices=jax.devices()[:1], progress=False)
  fresh = train(_config(seed=7, num_steps=1), str(tmp_path / "fresh"), devices=jax.devices()[:1], progress=False)

  loaded = load_pretrained(jax.device_get(fresh.state.params), str(tmp_path / "pre"), reinit=(r"Dense_2/",))
  chex.assert_trees_all_equal(loaded["Dense_0"], jax.device_get(pre.state.params)["Dense_0"])  # a copy
  assert not np.allclose(loaded["Dense_2"]["kernel"], jax.device_get(pre.state.params)["Dense_2"]["kernel"])

  config = _config(seed=7)
  config.init_from.workdir = str(tmp_path / "pre")
  config.init_from.reinit = (r"Dense_2/",)
  config.optimizer.freeze = (r"^Dense_0/",)
  tuned = train(config, str(tmp_path / "tuned"), devices=jax.devices()[:1], progress=False)
  tuned_params, pre_params = jax.device_get(tuned.state.params), jax.device_get(pre.state.params)
  chex.assert_trees_all_equal(tuned_params["Dense_0"], pre_params["Dense_0"])        # frozen
  assert not np.allclose(tuned_params["Dense_1"]["kernel"], pre_params["Dense_1"]["kernel"])  # trained on
  assert tuned.summary["test_accuracy"] > 0.5


@pytest.mark.parametrize("init_from,match", [
    ({"workdir": "/nonexistent/run", "reinit": ()}, "holds no checkpoints/ directory"),
    ({"workdir": "PRE", "reinit": (r"Dense_9",)}, "reinit pattern 'Dense_9' matches no parameter"),
])
def test_fine_tune_bad_input(tmp_path, init_from, match):
  train(_config(num_steps=4), str(tmp_path / "pre"), devices=jax.devices()[:1], progress=False)
  config = _config()
  config.init_from.workdir = init_from["workdir"].replace("PRE", str(tmp_path / "pre"))
  config.init_from.reinit = init_from["reinit"]
  with pytest.raises(InputError, match=match):
    train(config, str(tmp_path / "tuned"), devices=jax.devices()[:1], progress=False)



def test_following_the_advice_of_a_model_mismatch_fine_tunes(tmp_path):
  """The refusal of a changed model names the leaves and init_from.reinit; re-initialising exactly
  those loads the rest. Re-initialising every leaf would load nothing: refused in one line, not as
  an unreadable checkpoint."""
  import re

  from jaxlab.train.finetune import check_pretrained, fine_tune_start
  from jaxlab.experiment import make_train_setup

  pre = str(tmp_path / "pre")
  train(_config(num_steps=1), pre, devices=jax.devices()[:1], progress=False)
  config = _config()
  config.model.hidden = (32, 8)  # Dense_1 and Dense_2/kernel change shape
  params = make_train_setup(config, devices=jax.devices()[:1]).abstract_state.params  # what the trainer checks
  with pytest.raises(InputError, match="Re-initialise new or changed leaves with init_from.reinit") as refused:
    check_pretrained(params, pre)
  changed = re.findall(r"([\w/]+): \([\d, ]*\) there", str(refused.value))
  assert sorted(changed) == ["Dense_1/bias", "Dense_1/kernel", "Dense_2/kernel"], str(refused.value)
  reinit = tuple(f"^{re.escape(n)}$" for n in changed)  # as the message says
  check_pretrained(params, pre, reinit)
  start = fine_tune_start(params, pre, reinit)
  assert (start.loaded, start.reinitialised) == (3, 3)

  with pytest.raises(InputError, match=r"init_from.reinit=\('.',\) re-initialises every parameter, so nothing would "
                                       r"be loaded from init_from.workdir=.*; re-initialise only the new or changed"):
    check_pretrained(params, pre, (".",))
