"""DPOT against the official PyTorch DPOTNet: outputs, per-layer activations and loss gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.convert import convert_state_dict, params_to_state_dict
from jaxlab.pde.dpot import DPOT, count_params, init_params
from jaxlab.pde.losses import relative_l2_loss

from tests.support.pde import NAMES, assert_rel_close, load, model_from_config

LITERAL = dict(fuse_embedding=False)
SCAN_REMAT = dict(scan_blocks=True, remat=True)
# The default layout on every fixture; the others on tiny_c, the discriminating one.
CASES = [pytest.param(name, {}, id=f"{name}-default") for name in NAMES] + [
    pytest.param("tiny_c", LITERAL, id="tiny_c-literal"), pytest.param("tiny_c", SCAN_REMAT, id="tiny_c-scan_remat")]
_CACHE = {}


def _load(name):
  if name not in _CACHE:
    _CACHE[name] = load(name)
  return _CACHE[name]


def _to_torch_layout(name, act):
  """Our channels-last activations -> the layout the official forward hooks recorded."""
  act = np.asarray(act)
  return act.transpose(0, 3, 1, 2) if name != "time_agg_layer" else act


@pytest.mark.parametrize("name, scan", [(n, False) for n in NAMES] + [("tiny_c", True)],
                         ids=[f"{n}-literal" for n in NAMES] + ["tiny_c-fused-scan"])
def test_activations_match_official(name, scan):
  """Literal path: every recorded activation; fused + scanned: all but patch_embed (never formed)."""
  fixture = _load(name)
  model = model_from_config(fixture["config"], fuse_embedding=scan, scan_blocks=scan)
  params, _ = convert_state_dict(fixture["state_dict"], model)
  apply = jax.jit(lambda p, x: model.apply(p, x, mutable=["intermediates"]))
  _, state = apply({"params": params}, jnp.asarray(fixture["x"]))
  inter = state["intermediates"]
  ours = {"time_agg_layer": inter["time_agg"][0], "out_layer": inter["out_layer"][0]}
  if not scan:
    ours["patch_embed"] = inter["patch_embed"][0]
  for i in range(model.depth):
    block = jax.tree.map(lambda a, i=i: a[i], inter["blocks"]) if scan else inter[f"blocks_{i}"]
    ours[f"blocks.{i}.filter"], ours[f"blocks.{i}"] = block["filter_output"][0], block["output"][0]
  assert set(ours) == set(fixture["acts"]) - ({"patch_embed"} if scan else set())
  for name in ours:
    assert_rel_close(_to_torch_layout(name, ours[name]), fixture["acts"][name], f"act/{name}")


@pytest.mark.parametrize("name, layout", CASES)
def test_outputs_loss_and_gradients_match_official(name, layout):
  fixture = _load(name)
  model = model_from_config(fixture["config"], **layout)
  params, skipped = convert_state_dict(fixture["state_dict"], model)
  assert skipped == []
  x, y = jnp.asarray(fixture["x"]), jnp.asarray(fixture["y"])

  def loss_fn(p):
    pred, logits = model.apply({"params": p}, x)
    return relative_l2_loss(pred, y), (pred, logits)
  (loss, (pred, logits)), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params)
  assert_rel_close(pred, fixture["output"], "output")
  assert_rel_close(logits, fixture["logits"], "cls logits")
  assert_rel_close(loss, fixture["loss"], "loss")
  torch_grads = params_to_state_dict(grads, model)
  assert set(torch_grads) == set(fixture["grads"])
  for name, expected in fixture["grads"].items():
    assert_rel_close(torch_grads[name], expected, f"grad/{name}")


def test_without_class_head_the_output_is_one_array_and_cls_weights_are_skipped():
  fx = _load("tiny_a")
  model = model_from_config(fx["config"], num_classes=0)
  params, skipped = convert_state_dict(fx["state_dict"], model)
  assert skipped == sorted(k for k in fx["state_dict"] if k.startswith("cls_head."))
  assert "cls_head" not in params
  pred = jax.jit(model.apply)({"params": params}, jnp.asarray(fx["x"]))
  assert_rel_close(pred, fx["output"], "output")


def test_init_matches_official_parameter_count_and_layouts():
  fx = _load("tiny_b")
  model = model_from_config(fx["config"])
  params = jax.jit(lambda key: init_params(model, key))(jax.random.key(0))
  assert count_params(params) == 146_589  # sum of numel of the official tiny_b
  shapes = {k: v.shape for k, v in params_to_state_dict(params, model).items()}
  assert shapes == {k: v.shape for k, v in fx["state_dict"].items()}
  # official init: GroupNorm 1/0, AFNO scale * U[0, 1), gamma = 2^linspace(-10, 10, D)
  np.testing.assert_array_equal(params["blocks_0"]["norm1"]["scale"], 1.0)
  w1 = np.asarray(params["blocks_0"]["filter"]["w1"])
  assert w1.min() >= 0 and w1.max() < 1 / (24 * 24)
  np.testing.assert_allclose(params["time_agg"]["gamma"], fx["state_dict"]["time_agg_layer.gamma"][0], rtol=0)  # a copy


@pytest.mark.parametrize("kwargs, x_shape, match", [
    (dict(img_size=30, patch_size=8), (1, 30, 30, 3, 2), "img_size 30 is not divisible by patch_size 8"),
    (dict(), (1, 24, 24, 3, 2), "input resolution 24x24 is not divisible by patch_size 16"),
    (dict(), (1, 32, 32, 3, 3), "input has 3 channels; the model has in_channels=2"),
    (dict(), (1, 32, 32, 4, 2), "input has T=4 time steps; the model has in_timesteps=3"),
    (dict(embed_dim=36, n_blocks=4), (1, 32, 32, 3, 2), "embed_dim 36 is not divisible by 8"),
    (dict(embed_dim=48, n_blocks=5), (1, 32, 32, 3, 2), "embed_dim 48 is not divisible by n_blocks 5"),
    (dict(), (1, 48, 48, 3, 2), "input resolution 48x48 does not match img_size 32"),
    (dict(act="swish"), (1, 32, 32, 3, 2), "act='swish' is not one of"),
])
def test_bad_input_raises_one_line_input_error(kwargs, x_shape, match):
  base = dict(img_size=32, patch_size=16, in_channels=2, out_channels=2, in_timesteps=3, embed_dim=16,
              n_blocks=2, depth=1, out_layer_dim=4)
  model = DPOT(**{**base, **kwargs})
  with pytest.raises(InputError, match=match) as info:
    jax.eval_shape(model.init, jax.random.key(0), jnp.zeros(x_shape))
  assert "\n" not in str(info.value)
