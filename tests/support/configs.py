"""Config helpers the tests share."""

from __future__ import annotations

from typing import Any

import ml_collections


def with_overrides(config: ml_collections.ConfigDict, **overrides: Any) -> ml_collections.ConfigDict:
  """``config`` with each dotted key of ``overrides`` set (``**{"dqn.vmax": 10.0}``), as ``--config.<key>`` would."""
  for key, value in overrides.items():
    node, _, leaf = key.rpartition(".")
    (config[node] if node else config)[leaf] = value
  return config
