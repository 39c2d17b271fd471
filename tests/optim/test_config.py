"""Optimizers from config blocks: learning-rate argument and schedule, masks, chains, bad keys."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from jaxlab.errors import InputError
from jaxlab.optim import optimizer_from_config, set_hyperparams
from tests.support.tolerances import ops_rtol


def _cfg(**kw):
  return ml_collections.ConfigDict(kw)


def _params():
  return {"dense": {"kernel": jnp.ones((3, 2)), "bias": jnp.ones((2,))}, "norm": {"scale": jnp.ones((2,))}}


def _one_update(opt, params=None, value=1.0):
  params = params or _params()
  grads = jax.tree.map(jnp.zeros_like, params)
  updates, _ = opt.update(grads, opt.init(params), params, value=jnp.asarray(value))
  return updates


def test_schedule_goes_to_the_learning_rate():
  opt = optimizer_from_config(_cfg(name="sgd", learning_rate=1.0, schedule="cosine"), num_steps=10)
  params = {"w": jnp.ones(())}
  state = opt.init(params)
  u0, state = opt.update({"w": jnp.ones(())}, state, params)
  for _ in range(4):
    u, state = opt.update({"w": jnp.ones(())}, state, params)
  np.testing.assert_allclose(u0["w"], -1.0)
  # The same schedule evaluated in two programs: a cosine and a few products.
  np.testing.assert_allclose(u["w"], -optax.cosine_decay_schedule(1.0, 10)(4), rtol=ops_rtol(8))


def test_schedule_on_an_optimizer_whose_rate_takes_none_is_refused():
  with pytest.raises(InputError, match="'polyak_sgd' takes no schedule for its max_learning_rate"):
    optimizer_from_config(_cfg(name="polyak_sgd", learning_rate=1.0, schedule="cosine"), 10)
  optimizer_from_config(_cfg(name="polyak_sgd", learning_rate=1.0), 10)  # constant is fine


def test_unknown_kwargs_list_the_valid_ones():
  with pytest.raises(InputError, match=r"optimizer 'adam' has no argument\(s\) \['beta1'\]; valid: .*'b1'"):
    optimizer_from_config(_cfg(name="adam", learning_rate=1e-3, beta1=0.9), 10)
  with pytest.raises(InputError, match=r"schedule 'warmup_cosine' has no argument\(s\) \['warmup'\]"):
    optimizer_from_config(_cfg(name="adam", learning_rate=1e-3, schedule="warmup_cosine",
                               schedule_kwargs={"warmup": 3}), 10)
  with pytest.raises(InputError, match="unknown optimizer 'adamm'; valid names: .*adam"):
    optimizer_from_config(_cfg(name="adamm", learning_rate=1e-3), 10)


@pytest.mark.parametrize("name", ["adamw", "momo", "momo_adam"])
def test_weight_decay_mask_spares_biases_and_norm_scales(name):
  opt = optimizer_from_config(_cfg(name=name, learning_rate=0.1, weight_decay=0.5,
                                   weight_decay_mask="no_bias_norm"), 10)
  updates = _one_update(opt)
  assert float(jnp.abs(updates["dense"]["kernel"]).max()) > 0  # decayed
  np.testing.assert_array_equal(updates["dense"]["bias"], 0.0)  # zero grads, no decay: exactly 0
  np.testing.assert_array_equal(updates["norm"]["scale"], 0.0)


def test_mask_on_an_optimizer_without_weight_decay_is_refused():
  with pytest.raises(InputError, match="'adam' takes no weight-decay mask"):
    optimizer_from_config(_cfg(name="adam", learning_rate=1e-3, weight_decay_mask="no_bias_norm"), 10)


def test_chain_members_run_first_and_value_still_reaches_momo():
  opt = optimizer_from_config(_cfg(name="momo", learning_rate=10.0,
                                   chain=(("clip_by_global_norm", {"max_norm": 1e-3}),)), 10)
  params = {"w": jnp.ones(4)}
  state = opt.init(params)
  updates, state = opt.update({"w": jnp.full(4, 100.0)}, state, params, value=jnp.asarray(5.0))
  assert float(optax.tree.norm(updates)) <= 10.0 * 1e-3 + 1e-6  # step cap x clipped gradient
  with pytest.raises(InputError, match="optimizer.chain\\[0\\] must be"):
    optimizer_from_config(_cfg(name="sgd", learning_rate=1.0, chain=("clip",)), 10)


def test_swept_hyperparameters_live_in_the_state():
  opt = optimizer_from_config(_cfg(name="momo_adam", learning_rate=1e-2), 10, swept=("learning_rate",))
  state = set_hyperparams(opt.init({"w": jnp.ones(2)}), {"learning_rate": 0.5})
  assert float(state.hyperparams["learning_rate"]) == 0.5
  with pytest.raises(InputError, match="a swept learning_rate needs schedule='constant'"):
    optimizer_from_config(_cfg(name="adam", learning_rate=1e-2, schedule="cosine"), 10, swept=("learning_rate",))


def test_onecycle_with_cycle_momentum_sets_lr_and_b1_per_step():
  """torch OneCycleLR(cycle_momentum=True): b1 goes 0.95 -> 0.85 (at the lr peak) -> 0.95; tests/pde/test_protocol.py
  checks the whole DPOT recipe against torch's formulas."""
  opt = optimizer_from_config(_cfg(name="adam", learning_rate=1e-3, schedule="onecycle",
                                   schedule_kwargs={"pct_start": 0.2, "div_factor": 1e4},
                                   cycle_momentum={"base_momentum": 0.85, "max_momentum": 0.95}), 10)
  params = {"w": jnp.ones(2)}
  state = opt.init(params)
  b1 = []
  for _ in range(10):
    _, state = opt.update({"w": jnp.ones(2)}, state, params)
    b1.append(float(state.hyperparams["b1"]))   # the value the update just used
  np.testing.assert_allclose([b1[0], b1[1], b1[-1]], [0.95, 0.85, 0.95], rtol=1e-6)
  assert all(a < b for a, b in zip(b1[1:-1], b1[2:]))   # rising back while the lr falls


@pytest.mark.parametrize("kw,match", [
    (dict(cycle_momentum={"base_momentum": 0.85}), "optimizer.cycle_momentum needs schedule='onecycle'"),
    (dict(schedule="onecycle", b1=0.9, cycle_momentum={"base_momentum": 0.85}),
     "optimizer.b1=0.9 and optimizer.cycle_momentum both set b1"),
    (dict(schedule="onecycle", cycle_momentum={"base": 0.85}), r"cycle_momentum has no key\(s\) \['base'\]"),
    (dict(schedule="onecycle", schedule_kwargs={"pct_start": 0.1}), "puts the one-cycle peak at step 0"),
    (dict(schedule="onecycle", schedule_kwargs={"anneal_strategy": "exp"}), "anneal_strategy='exp'; allowed"),
])
def test_bad_onecycle_settings_name_the_key(kw, match):
  with pytest.raises(InputError, match=match):
    optimizer_from_config(_cfg(name="adam", learning_rate=1e-3, **kw), 10)


@pytest.mark.parametrize("patterns", [(".*",), ("dense", "norm"), ("^",)])
def test_freezing_every_parameter_is_refused(patterns):
  opt = optimizer_from_config(_cfg(name="sgd", learning_rate=0.1, freeze=patterns), 10)
  with pytest.raises(InputError, match=r"optimizer.freeze=.* freezes every parameter \(3 of them\): training would "
                                       r"change nothing; allowed: patterns that leave some parameter trainable"):
    opt.init(_params())
  optimizer_from_config(_cfg(name="sgd", learning_rate=0.1, freeze=("dense",)), 10).init(_params())  # "norm" trains
