"""DPOT size presets: the paper's Ti/S/M/L/H (Hao et al., ICML 2024, Table 1) and small CPU sizes.

Each preset is a dict of ``DPOT`` kwargs. The paper sizes use the pre-training data shape (128^2
grid, patch 8, 4 channels, 10 input steps, modes 32), at which their parameter counts equal the
official code's (``OFFICIAL_PARAM_COUNTS``, sum of numel with the 12-way class head). L uses 16
AFNO blocks: that gives the paper's 509M (the official configs/pretrain_large.yaml says
n_blocks=8, which would give 523,174,515). L and H stack their blocks (``scan_blocks``) so a
train step compiles one block body instead of 24-27.
"""

from __future__ import annotations

from typing import Any

from jaxlab.errors import UnknownNameError
from jaxlab.pde.dpot import DPOT

PRETRAIN_DATA = dict(img_size=128, patch_size=8, in_channels=4, out_channels=4, in_timesteps=10,
                     out_timesteps=1, modes=32)

#: Preset name -> ``DPOT`` keyword arguments: the paper's ``Ti`` / ``S`` / ``M`` / ``L`` / ``H`` and
#: small sizes for tests and CPU experiments (``tiny``, ``cpu_small``, ...); see :func:`make_dpot`.
DPOT_SIZES: dict[str, dict[str, Any]] = {
    # tests: 16^2, 2 channels, 3 steps (20,189 params)
    "tiny": dict(img_size=16, patch_size=4, in_channels=2, out_channels=2, in_timesteps=3, out_timesteps=1,
                 embed_dim=32, depth=2, n_blocks=4, modes=8, mlp_ratio=1.0, out_layer_dim=16),
    # CPU experiments at 64^2 (247,143 params)
    "cpu_small": dict(img_size=64, patch_size=8, in_channels=4, out_channels=4, in_timesteps=10, out_timesteps=1,
                      embed_dim=64, depth=4, n_blocks=4, modes=8, mlp_ratio=1.0, out_layer_dim=32),
    "Ti": dict(PRETRAIN_DATA, embed_dim=512, depth=4, n_blocks=4, mlp_ratio=1.0, out_layer_dim=32),
    "S": dict(PRETRAIN_DATA, embed_dim=1024, depth=6, n_blocks=8, mlp_ratio=1.0, out_layer_dim=32),
    "M": dict(PRETRAIN_DATA, embed_dim=1024, depth=12, n_blocks=8, mlp_ratio=4.0, out_layer_dim=32),
    "L": dict(PRETRAIN_DATA, embed_dim=1536, depth=24, n_blocks=16, mlp_ratio=4.0, out_layer_dim=128,
              scan_blocks=True),
    "H": dict(PRETRAIN_DATA, embed_dim=2048, depth=27, n_blocks=8, mlp_ratio=4.0, out_layer_dim=128,
              scan_blocks=True),
}

#: Parameter counts of the official DPOTNet per paper size, ``sum(p.numel())`` with the 12-way class
#: head (``n_cls=12``); ``DPOT`` built from the same preset has the same count.
OFFICIAL_PARAM_COUNTS = {"Ti": 7_534_643, "S": 30_801_459, "M": 122_125_875, "L": 509_018_739,
                         "H": 1_031_082_099}


def dpot_config(size: str, **overrides: Any) -> dict[str, Any]:
  """The preset's kwargs with ``overrides`` applied (e.g. ``num_classes=12``, ``remat=True``)."""
  if size not in DPOT_SIZES:
    raise UnknownNameError(f"unknown DPOT size {size!r}; valid sizes: {', '.join(DPOT_SIZES)}")
  return {**DPOT_SIZES[size], **overrides}


def make_dpot(size: str, **overrides: Any) -> DPOT:
  """``DPOT(**dpot_config(size, **overrides))`` (named make_dpot so that ``jaxlab.pde.dpot`` stays the module)."""
  return DPOT(**dpot_config(size, **overrides))
