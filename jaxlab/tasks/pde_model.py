"""The DPOT or FNO-2D a PDE operator-learning config names (``model.*``), sized by its data and window.

The task sets the model's channels and time steps from the data (``in_channels`` /
``out_channels`` from the widest set or ``data.num_channels``, ``in_timesteps`` / ``out_timesteps``
from ``t_in`` / ``t_out``, DPOT's ``img_size`` from ``data.resolution``, strided by the master
table's ``downsample`` for files: :func:`jaxlab.tasks.pde_data.model_resolution`); every other key is the
model's own, checked when the model is built (``InputError`` naming the key).
"""

from __future__ import annotations

from typing import Any

import ml_collections

from jaxlab.errors import InputError, check, check_choice, check_int, is_int
from jaxlab.registry import Registry
from jaxlab.tasks.pde_data import model_resolution, widest_set_channels
from jaxlab.pde.dpot import DPOT
from jaxlab.pde.fno import FNO2d
from jaxlab.pde.sizes import OFFICIAL_PARAM_COUNTS, dpot_config


def _dpot(m: dict[str, Any], io: dict[str, int], res: int, grid: str) -> Any:
  """DPOT of ``model.size`` (``jaxlab.pde.sizes``) on the served grid, its patch size dividing it."""
  kwargs = dpot_config(m.pop("size", "cpu_small"), img_size=res, **io, **m)
  p = kwargs["patch_size"]
  check(isinstance(p, int) and p > 0 and res % p == 0,
        f"{grid}={res} is not divisible by the DPOT patch size {p} (model.patch_size)")
  return _checked(DPOT, kwargs)


def _fno(m: dict[str, Any], io: dict[str, int], res: int, grid: str) -> Any:
  """FNO-2D keeping ``model.modes`` Fourier modes per axis, at most half the served grid."""
  kwargs = {**io, **m}
  modes = kwargs.get("modes", FNO2d.modes)
  check_int(modes, "model.modes", 1, "Fourier modes kept per axis")
  check(2 * modes <= res, f"model.modes={modes} needs {grid} >= {2 * modes}, got {res}; "
        f"use model.modes <= {res // 2}")
  return _checked(FNO2d, kwargs)


#: The models a config may name (``model.name``), each ``(the model's own keys, the channels and window, the
#: served grid size, the grid's name for messages) -> the flax module``, its settings checked.
MODELS: Registry = Registry("PDE model")
MODELS.register("dpot")(_dpot)
MODELS.register("fno")(_fno)


def _model_keys(config: ml_collections.ConfigDict, channels: int) -> tuple[str, dict[str, Any], dict[str, int]]:
  """``(name, the model's own keys, the channels and window the task sets)`` of the ``model`` block."""
  m = dict(config.model)
  name = m.pop("name", None)
  check_choice(name, "model.name", tuple(MODELS))
  widest = widest_set_channels(config)
  for key in ("in_channels", "out_channels"):
    value = m.pop(key, channels)
    if value != channels:  # the task sets both from the data; padding can only add channels
      fix = (f"set data.num_channels={value} to pad the data to it, or remove model.{key}"
             if is_int(value) and value >= widest else
             f"remove model.{key} (the widest data set has {widest}, so the model needs at least that many)")
      raise InputError(f"model.{key}={value!r} does not match the data's {channels} channels; {fix}")
  for key in ("in_timesteps", "out_timesteps", "img_size"):
    check(key not in m, f"model.{key} is set by the task (t_in, t_out, data.resolution); remove it")
  io = dict(in_channels=channels, out_channels=channels, in_timesteps=config.t_in, out_timesteps=config.t_out)
  return name, m, io


def paper_count(config: ml_collections.ConfigDict) -> str:
  """For a paper-size DPOT, its count in the paper (with the 12-way class head this task does not train)."""
  size = config.model.get("size", "") if config.model.name == "dpot" else ""
  if size not in OFFICIAL_PARAM_COUNTS:
    return ""
  return f" (DPOT-{size}: the paper's {OFFICIAL_PARAM_COUNTS[size]:,} parameters include a 12-way class head)"


def build_model(config: ml_collections.ConfigDict, channels: int) -> Any:
  """The configured model (``MODELS``: DPOT or FNO-2D), its settings checked (``InputError`` naming the bad key)."""
  name, m, io = _model_keys(config, channels)
  res = model_resolution(config)
  grid = "data.resolution" if res == config.data.resolution else \
      f"the served grid (data.resolution={config.data.resolution} strided by the master table's downsample)"
  return MODELS.get(name)(m, io, res, grid)


def _checked(cls: Any, kwargs: dict) -> Any:
  """``cls(**kwargs)`` with its settings checked; an unknown key or a bad size is one line under ``model:``."""
  try:
    model = cls(**kwargs)
  except TypeError as e:  # an unknown or missing keyword: the config's, not a bug
    raise InputError(f"model: {e}") from None
  try:
    model.check_config()
  except InputError as e:
    raise InputError(f"model: {e}") from None
  return model
