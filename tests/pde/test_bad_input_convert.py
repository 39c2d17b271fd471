"""Bad official DPOT state dicts: each case ends in ONE line naming the offending tensor's key.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. The checks run on the
numpy arrays before any parameter is built, so every case takes milliseconds.
"""

from __future__ import annotations

import os
import pickle
import sys
import types
from typing import Any, Callable

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from jaxlab.pde.convert import convert_state_dict, load_torch_checkpoint  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402
from tests.support.pde import load, model_from_config  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]

_TINY = load("tiny_c")
_MODEL = model_from_config(_TINY["config"])


def _convert(key: str | None = None, value: Any = None, drop: str | None = None) -> Callable[[], Any]:
  """Converts tiny_c's state dict with ``key`` set to ``value`` (a function of the original) or ``drop`` removed."""
  def run():
    sd = dict(_TINY["state_dict"])
    if key is not None:
      sd[key] = value(sd[key]) if callable(value) else value
    if drop is not None:
      del sd[drop]
    return convert_state_dict(sd, _MODEL)
  return run


def _with_nan(w: np.ndarray) -> np.ndarray:
  w = w.copy()
  w.flat[3] = np.nan
  return w


CASES: list[Case] = [
    ("dpot convert", "NaN weight", _convert("blocks.0.filter.w1", _with_nan),
     "state dict entry 'blocks.0.filter.w1' has 1 non-finite value(s) in float32"),
    ("dpot convert", "inf bias", _convert("out_layer.2.bias", lambda w: np.full_like(w, np.inf)),
     "state dict entry 'out_layer.2.bias' has"),
    ("dpot convert", "float64 beyond float32's range", _convert("pos_embed", lambda w: w.astype(np.float64) * 1e300),
     "state dict entry 'pos_embed' has"),
    ("dpot convert", "complex weight", _convert("time_agg_layer.w", lambda w: w.astype(np.complex64)),
     "state dict entry 'time_agg_layer.w' has dtype complex64; must be a real floating-point array"),
    ("dpot convert", "integer weight", _convert("patch_embed.proj.0.weight", lambda w: w.astype(np.int32)),
     "state dict entry 'patch_embed.proj.0.weight' has dtype int32; must be a real floating-point array"),
    ("dpot convert", "boolean weight", _convert("blocks.1.norm1.weight", lambda w: w > 0),
     "state dict entry 'blocks.1.norm1.weight' has dtype bool"),
    ("dpot convert", "string entry", _convert("blocks.1.norm1.bias", lambda w: np.full(w.shape, "x")),
     "state dict entry 'blocks.1.norm1.bias' has dtype <U1"),
    ("dpot convert", "ragged entry", _convert("blocks.1.norm2.bias", [[1.0], [1.0, 2.0]]),
     "state dict entry 'blocks.1.norm2.bias' is not an array"),
    ("dpot convert", "not a mapping", lambda: convert_state_dict([("pos_embed", 0)], _MODEL),
     "state_dict is a list; must be a mapping of parameter names to arrays"),
    ("dpot convert", "non-string key", _convert(7, np.zeros(2)),
     "state dict keys must be parameter names (str); got [7]"),
    ("dpot convert", "missing key (kept)", _convert(drop="pos_embed"), "missing ['pos_embed']"),
    ("dpot convert", "unexpected key (kept)", _convert("blocks.9.filter.w1", np.zeros(2)),
     "unexpected ['blocks.9.filter.w1']"),
    ("dpot convert", "mis-shaped key (kept)", _convert("time_agg_layer.w", np.zeros((5, 16, 16), np.float32)),
     "time_agg_layer.w: expected (4, 16, 16), got (5, 16, 16)"),
    ("dpot convert", "checkpoint that weights_only loading refuses", lambda: _load_pth(pickle.UnpicklingError(
        "Weights only load failed. Unsupported global: GLOBAL posix.system")),
     "checkpoint 'model.pth' cannot be read with torch.load(weights_only=True): Weights only load failed."),
    ("dpot convert", "truncated checkpoint", lambda: _load_pth(RuntimeError(
        "PytorchStreamReader failed reading zip archive: failed finding central directory")),
     "cannot be read with torch.load(weights_only=True): PytorchStreamReader failed reading zip archive"),
    ("dpot convert", "checkpoint holding a list", lambda: _load_pth([1, 2]),
     "checkpoint 'model.pth' holds a list; must be a state dict"),
]


def _load_pth(result: Any) -> Any:
  """load_torch_checkpoint with a fake torch (torch is not a dependency) whose load raises or returns ``result``."""
  def load(path, **kw):
    assert kw["weights_only"] is True
    if isinstance(result, Exception):
      raise result
    return result
  fake = types.ModuleType("torch")
  fake.load = load
  saved = sys.modules.get("torch")
  sys.modules["torch"] = fake
  try:
    return load_torch_checkpoint("model.pth")
  finally:
    if saved is None:
      del sys.modules["torch"]
    else:
      sys.modules["torch"] = saved


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
