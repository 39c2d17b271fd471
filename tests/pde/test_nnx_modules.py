"""The NNX DPOT, DPOT block, AFNO2D and FNO2d against the linen modules: parameter tree, outputs, training.

Run op by op, both call the same pure functions on the same arrays: bit-equal by construction
(tests/support/nnx_training.py). Small shapes: an 8x8 grid, width 16.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from jaxlab.errors import InputError
from jaxlab.pde import AFNO2D, DPOT, DPOTBlock, FNO2d, dpot_state_shardings
from jaxlab.pde import nnx as pde_nnx
from jaxlab.sharding import path_name
from jaxlab.train import make_mesh
from tests.support.nnx_training import linen_params, load, train_both
from tests.support.pde import DPOT_STEP_OPS
from tests.support.tolerances import assert_close_to_scale, ops_rtol

TINY = dict(img_size=8, patch_size=2, in_channels=2, out_channels=2, in_timesteps=3, embed_dim=16, depth=2,
            n_blocks=2, modes=2, out_layer_dim=8)


def _x(shape=(2, 8, 8, 3, 2), key=3):
  return jax.random.normal(jax.random.key(key), shape)


@pytest.mark.parametrize("settings", [
    {},
    {"normalize": True, "num_classes": 3, "fuse_embedding": False, "time_agg": "mlp", "mlp": "softmoe",
     "num_experts": 2, "slots_per_expert": 3, "remat": True, "act": "relu"},
    {"scan_blocks": True, "remat": True}, {"scan_blocks": True, "mlp": "softmoe", "num_experts": 4},
])
def test_nnx_dpot_equals_linen(settings):
  linen = DPOT(**TINY, **settings)
  x = _x()
  variables = {"params": linen_params(linen, x)}
  model = load(lambda: pde_nnx.DPOT(**TINY, **settings, rngs=nnx.Rngs(0)), variables["params"])
  got, want = model(x), linen.apply(variables, x)
  if settings.get("scan_blocks"):   # one compiled scan body each, operands in another order: two programs
    assert_close_to_scale(got, want, ops_rtol(DPOT_STEP_OPS))
  else:
    chex.assert_trees_all_equal(got, want)


def test_nnx_dpot_initialises_as_linen_and_shards_by_the_same_rules():
  mesh = make_mesh((("data", -1), ("model", 2)))
  for settings in ({}, {"scan_blocks": True, "mlp": "softmoe"}, {"normalize": True, "num_classes": 4}):
    linen_params = jax.eval_shape(DPOT(**TINY, **settings).init, jax.random.key(0), _x())["params"]
    model = nnx.eval_shape(lambda: pde_nnx.DPOT(**TINY, **settings, rngs=nnx.Rngs(0)))
    chex.assert_trees_all_equal_shapes_and_dtypes(model.linen_params(), linen_params)
    want = dpot_state_shardings(linen_params, mesh)
    got = dpot_state_shardings(nnx.as_pure(nnx.state(model, nnx.Param)), mesh)
    specs = lambda tree: [(path_name(p), tuple(s.spec)) for p, s in jax.tree_util.tree_leaves_with_path(tree)]
    assert specs(got) == specs(want)
    assert any(spec for _, spec in specs(got))   # some leaves are split over "model"


@pytest.mark.parametrize("kwargs", [{}, {"mlp": "softmoe", "num_experts": 4, "mlp_ratio": 2.0}])
def test_nnx_dpot_block_equals_linen(kwargs):
  h = jax.random.normal(jax.random.key(1), (2, 4, 4, 16))
  linen = DPOTBlock(16, 2, 2, **kwargs)
  variables = {"params": linen_params(linen, h)}
  model = load(lambda: pde_nnx.DPOTBlock(16, 2, 2, num_tokens=16, **kwargs, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(h), linen.apply(variables, h))


def test_nnx_afno_equals_linen():
  h = jax.random.normal(jax.random.key(1), (2, 4, 4, 16))
  layer = AFNO2D(16, n_blocks=2, modes=3)
  variables = {"params": linen_params(layer, h)}
  model = load(lambda: pde_nnx.AFNO2D(16, 2, 3, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(h), layer.apply(variables, h))


def test_nnx_fno_equals_linen():
  fno = FNO2d(modes=2, width=8, in_channels=2, in_timesteps=3, out_timesteps=2, n_layers=2, projection_dim=16)
  x = _x()
  variables = {"params": linen_params(fno, x)}
  kwargs = {f.name: getattr(fno, f.name) for f in dataclasses.fields(fno) if f.name not in ("parent", "name")}
  model = load(lambda: pde_nnx.FNO2d(**kwargs, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(x), fno.apply(variables, x))


def test_nnx_dpot_trains_with_momo_adam_as_linen():
  """With scanned, rematerialised blocks: the NNX scan over split/merged blocks differentiates as nn.scan."""
  settings = dict(TINY, scan_blocks=True, remat=True)
  linen = DPOT(**settings)
  x = _x()
  params = linen_params(linen, x, scale=0.1)
  model = load(lambda: pde_nnx.DPOT(**settings, rngs=nnx.Rngs(0)), params)
  loss = lambda y: jnp.mean(jnp.square(y - x[..., :1, :]))
  train_both(lambda p, v: linen.apply({"params": p}, v), params, model, loss, (x,), ops_per_step=DPOT_STEP_OPS,
             steps=3, learning_rate=0.01)


def test_every_linen_setting_has_an_nnx_counterpart():
  """A field added to a linen module and not to its NNX twin fails here (and is refused when set)."""
  for linen_cls, implemented in ((DPOT, pde_nnx.DPOT_SETTINGS), (FNO2d, pde_nnx.FNO2D_SETTINGS)):
    fields = {f.name for f in dataclasses.fields(linen_cls)} - {"parent", "name"}
    assert fields == set(implemented), linen_cls.__name__


def test_bad_nnx_settings_are_one_line():
  with pytest.raises(InputError, match="DPOT has no setting 'embed'"):
    pde_nnx.DPOT(embed=16, rngs=nnx.Rngs(0))
  with pytest.raises(InputError, match="embed_dim 12 is not divisible by 8"):
    pde_nnx.DPOT(**dict(TINY, embed_dim=12), rngs=nnx.Rngs(0))
  model = nnx.eval_shape(lambda: pde_nnx.DPOT(**TINY, rngs=nnx.Rngs(0)))   # the input check comes first
  with pytest.raises(InputError, match="input has T=2 time steps; the model has in_timesteps=3"):
    model(jnp.zeros((1, 8, 8, 2, 2)))
