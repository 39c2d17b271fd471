"""Model constructors by name, so configs say ``model.name = "mlp"``."""

from __future__ import annotations

from typing import Any

import flax.linen as nn

from jaxlab.models.mlp import MLP, SmallCNN
from jaxlab.registry import Registry

MODELS: Registry = Registry("model")
MODELS.register("mlp")(MLP)
MODELS.register("small_cnn")(SmallCNN)


def make_model(name: str, **kwargs: Any) -> nn.Module:
  return MODELS.get(name)(**kwargs)
