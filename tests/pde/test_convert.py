"""Official state dict -> jaxlab params: round trip, scanned layout, wrappers, and InputErrors that list every problem."""

import argparse
import contextlib
import sys
import types

import chex
import jax
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.convert import convert_state_dict, expected_torch_shapes, load_torch_checkpoint, params_to_state_dict

from tests.support.pde import load, model_from_config


@pytest.fixture(scope="module")
def tiny_c():
  return load("tiny_c")


def test_round_trip_is_exact_in_both_layouts(tiny_c):
  sd = tiny_c["state_dict"]
  for scan in (False, True):
    model = model_from_config(tiny_c["config"], scan_blocks=scan)
    params, _ = convert_state_dict(sd, model)
    back = params_to_state_dict(params, model)
    assert set(back) == set(sd)
    for k, v in sd.items():
      np.testing.assert_array_equal(back[k], v, err_msg=k)


def test_scanned_params_stack_the_unrolled_blocks(tiny_c):
  unrolled, _ = convert_state_dict(tiny_c["state_dict"], model_from_config(tiny_c["config"]))
  scanned, _ = convert_state_dict(tiny_c["state_dict"], model_from_config(tiny_c["config"], scan_blocks=True))
  depth = tiny_c["config"]["depth"]
  stacked = jax.tree.map(lambda *xs: np.stack(xs), *[unrolled[f"blocks_{i}"] for i in range(depth)])
  chex.assert_trees_all_equal(scanned["blocks"], stacked)
  assert not any(k.startswith("blocks_") for k in scanned)


def test_checkpoint_wrappers_are_accepted(tiny_c):
  model = model_from_config(tiny_c["config"])
  sd = tiny_c["state_dict"]
  plain, _ = convert_state_dict(sd, model)
  wrapped, _ = convert_state_dict({"model": {f"module.{k}": v for k, v in sd.items()}, "epoch": 3}, model)
  chex.assert_trees_all_equal(plain, wrapped)


def test_errors_list_every_missing_unexpected_and_misshaped_key(tiny_c):
  model = model_from_config(tiny_c["config"])
  sd = dict(tiny_c["state_dict"])
  del sd["blocks.1.filter.w2"], sd["pos_embed"]
  sd["blocks.0.filter.w3"] = np.zeros(3)
  sd["time_agg_layer.w"] = np.zeros((5, 16, 16))
  with pytest.raises(InputError) as info:
    convert_state_dict(sd, model)
  msg = str(info.value)
  assert "\n" not in msg
  assert "missing ['blocks.1.filter.w2', 'pos_embed']" in msg
  assert "unexpected ['blocks.0.filter.w3']" in msg
  assert "time_agg_layer.w: expected (4, 16, 16), got (5, 16, 16)" in msg


def test_class_head_size_mismatch_is_reported_and_skipping_is_explicit(tiny_c):
  with pytest.raises(InputError, match=r"cls_head.4.weight: expected \(7, 16\), got \(5, 16\)"):
    convert_state_dict(tiny_c["state_dict"], model_from_config(tiny_c["config"], num_classes=7))
  params, skipped = convert_state_dict(tiny_c["state_dict"], model_from_config(tiny_c["config"], num_classes=0))
  assert skipped == [f"cls_head.{i}.{w}" for i in (0, 2, 4) for w in ("bias", "weight")]
  assert "cls_head" not in params


def test_expected_shapes_cover_every_official_key(tiny_c):
  shapes = expected_torch_shapes(model_from_config(tiny_c["config"]))
  assert shapes == {k: v.shape for k, v in tiny_c["state_dict"].items()}


def test_reading_a_pth_without_torch_is_an_input_error(tmp_path):
  try:
    import torch  # noqa: F401
    pytest.skip("torch is installed here")
  except ImportError:
    pass
  with pytest.raises(InputError, match="needs torch"):
    load_torch_checkpoint(str(tmp_path / "model.pth"))


class _FakeTensor:
  """What load_torch_checkpoint uses of a torch tensor."""

  def __init__(self, value):
    self.value = value

  def detach(self):
    return self

  def cpu(self):
    return self

  def numpy(self):
    return self.value


def test_pth_is_loaded_with_weights_only(monkeypatch, tmp_path):
  # torch is not a dependency: a fake module records how torch.load is called
  calls, allowed = [], []
  fake = types.ModuleType("torch")
  fake.load = lambda path, **kw: calls.append((path, kw)) or {
      "model": {"module.pos_embed": _FakeTensor(np.ones(2, np.float32))}, "args": argparse.Namespace(lr=1e-3)}
  fake.serialization = types.SimpleNamespace(safe_globals=lambda g: allowed.append(g) or contextlib.nullcontext())
  monkeypatch.setitem(sys.modules, "torch", fake)
  out = load_torch_checkpoint(str(tmp_path / "model.pth"))
  assert calls == [(str(tmp_path / "model.pth"), {"map_location": "cpu", "weights_only": True})]
  assert allowed == [[argparse.Namespace]]  # DPOT's training scripts save their args beside the weights
  assert list(out) == ["pos_embed"]
