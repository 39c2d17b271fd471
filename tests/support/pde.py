"""Loading the official DPOT fixtures (tests/data/dpot) and comparing to them."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np

from jaxlab.pde.dpot import DPOT

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "dpot"
NAMES = ("tiny_a", "tiny_b", "tiny_c")
REL_TOL = 1e-5

# Rounded operations per parameter in one train step of the tests' small DPOTs: the patch
# embedding's and MLPs' dots (widths up to a few hundred), the 2-D FFTs of the latent grid (bounded
# as direct DFTs, n terms for n points), the gradient's sums over batch x patches, the optimizer.
DPOT_STEP_OPS = 1000


def load(name: str) -> dict[str, Any]:
  """{"config", "state_dict", "x", "output", "logits", "acts", "y", "loss", "grads"}."""
  z = np.load(DATA / f"{name}.npz")
  return {"config": json.loads((DATA / f"config_{name}.json").read_text()),
          "state_dict": {k[3:]: z[k] for k in z.files if k.startswith("sd/")},
          "x": z["x"], "output": z["output_0"], "logits": z["output_1"], "y": z["y"], "loss": z["loss"],
          "acts": {k[4:]: z[k] for k in z.files if k.startswith("act/")},
          "grads": {k[5:]: z[k] for k in z.files if k.startswith("grad/")}}


def model_from_config(config: dict[str, Any], **overrides: Any) -> DPOT:
  """The official constructor kwargs -> ``DPOT`` (n_cls -> num_classes; only 'afno' mixing exists)."""
  kw = dict(config)
  assert kw.pop("mixing_type") == "afno"
  kw["num_classes"] = kw.pop("n_cls")
  kw.update(overrides)
  return DPOT(**kw)


def rel_err(actual: Any, expected: Any) -> float:
  """max |actual - expected| / max |expected| (0/0 := 0)."""
  actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
  assert actual.shape == expected.shape, (actual.shape, expected.shape)
  err = float(np.max(np.abs(actual - expected))) if actual.size else 0.0
  scale = float(np.max(np.abs(expected))) if expected.size else 0.0
  return err / scale if scale else err


def assert_rel_close(actual: Any, expected: Any, name: str = "", tol: float = REL_TOL) -> None:
  err = rel_err(actual, expected)
  assert err <= tol, f"{name}: relative error {err:.3g} > {tol:g}"
