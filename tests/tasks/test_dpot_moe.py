"""DPOT with a Soft-MoE MLP, MoMo-Adam, through the trainer: a (data 2 x model 2 x expert 2) mesh on 8
virtual devices trains to the same loss and params as one device, with the experts split over "expert"."""

from __future__ import annotations

import chex
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from configs import dpot_moe
from jaxlab.errors import InputError
from jaxlab.pde.sizes import make_dpot
from jaxlab.tasks.pde_data import channels_of
from jaxlab.tasks.pde_model import build_model
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train
from tests.support.pde import DPOT_STEP_OPS
from tests.support.tolerances import steps_tol

STEPS = 4


def _config(cache):
  c = dpot_moe.get_config("tiny")
  c.data.cache_dir = cache
  c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = STEPS, 1, STEPS, STEPS
  c.data.rollout_steps = 2
  c.model.depth = 1
  # the config's MoMo-Adam as is (eps 1e-8): its sign-like first Adam steps could amplify the
  # 8-device reduction order's rounding of a ~1e-9 gradient entry, but here they do not
  return c


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  cache = str(tmp_path_factory.mktemp("pde_data"))
  one = train(_config(cache), str(tmp_path_factory.mktemp("one")), devices=jax.devices()[:1], progress=False)
  config = _config(cache)
  config.mesh = (("data", 2), ("model", 2), ("expert", 2))
  workdir = str(tmp_path_factory.mktemp("eight"))
  return one, train(config, workdir, progress=False), workdir


def test_data_model_expert_mesh_equals_one_device(runs):
  one, eight, workdir = runs
  assert eight.summary["mesh"] == {"data": 2, "model": 2, "expert": 2}
  # The (data, model, expert) mesh sums the same steps in another order.
  chex.assert_trees_all_close(jax.device_get(eight.state.params), jax.device_get(one.state.params),
                              **steps_tol(STEPS, DPOT_STEP_OPS))
  losses = [r["loss"] for r in read_metrics(workdir) if "loss" in r]
  assert len(losses) == STEPS and np.all(np.isfinite(losses))
  np.testing.assert_allclose(eight.summary["final_loss"], one.summary["final_loss"],
                             rtol=steps_tol(STEPS, DPOT_STEP_OPS)["rtol"])
  assert float(one.state.opt_state.step_size) > 0  # MoMo-Adam's Polyak step is in use


def test_experts_are_sharded_over_expert_and_model(runs):
  _, eight, _ = runs
  experts = eight.state.params["blocks_0"]["mlp"]["experts"]
  assert experts["w1"].sharding.spec == P("expert", None, "model")
  assert experts["w2"].sharding.spec == P("expert", "model", None)
  assert experts["b2"].sharding.spec == P("expert")
  assert experts["w1"].addressable_shards[0].data.shape == (1, 32, 16)  # 2 experts, hidden 32 -> 1 x 16
  # Adam moments follow their parameters
  assert eight.state.opt_state.exp_avg["blocks_0"]["mlp"]["experts"]["w1"].sharding.spec == P("expert", None, "model")
  assert eight.state.params["blocks_0"]["filter"]["w1"].sharding.spec == P(None, "model")


def test_dense_and_softmoe_configs_differ_only_in_the_mlp():
  moe, dense = dpot_moe.get_config(""), dpot_moe.get_config("dense")
  differ = {k for k in set(moe.to_dict()) | set(dense.to_dict()) if moe.to_dict().get(k) != dense.to_dict().get(k)}
  assert differ == {"model", "sharding_rules", "name"}
  assert {k for k in moe.model if moe.model[k] != dense.model[k]} == {"mlp"}


@pytest.mark.parametrize("overrides, message", [
    (dict(mlp="moe"), "mlp='moe'; allowed"),
    (dict(mlp="softmoe", num_experts=0), "num_experts=0"),
    (dict(mlp="softmoe", capacity_factor=0.0), "capacity_factor=0.0"),  # zero slots
    (dict(mlp="softmoe", slots_per_expert=-1), "slots_per_expert=-1"),
])
def test_bad_mlp_settings_are_one_line_input_errors(overrides, message):
  with pytest.raises(InputError, match=message) as e:
    make_dpot("tiny", **overrides).check_config()
  assert "\n" not in str(e.value)
  config = dpot_moe.get_config("tiny")
  config.model.update(overrides)
  with pytest.raises(InputError, match="model: " + message):
    build_model(config, channels_of(config))
