"""Model constructors by name, so configs say ``model.name = "mlp"``."""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn

from jaxlab.models.mlp import MLP, SmallCNN
from jaxlab.errors import InputError, is_int
from jaxlab.registry import Registry

#: Models by name (``config.model.name``) for :func:`make_model`.
MODELS: Registry = Registry("model")
MODELS.register("mlp")(MLP)
MODELS.register("small_cnn")(SmallCNN)


def make_model(name: str, **kwargs: Any) -> nn.Module:
  """The model ``name`` with ``kwargs``; unknown keyword arguments are an error listing the valid ones."""
  cls = MODELS.get(name)
  fields = {f.name for f in dataclasses.fields(cls)} - {"parent", "name"} if dataclasses.is_dataclass(cls) else None
  if fields is not None and set(kwargs) - fields:
    raise InputError(f"model {name!r} has no field(s) {sorted(set(kwargs) - fields)}; valid: {sorted(fields)}")
  for key in ("num_outputs", "hidden", "features"):
    values = kwargs.get(key, ())
    values = values if isinstance(values, (tuple, list)) else (values,)
    if any(not is_int(v) or v < 1 for v in values):
      raise InputError(f"model.{key} must be positive integers, got {kwargs[key]!r}")
  return cls(**kwargs)
