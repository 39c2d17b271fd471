"""Classification losses by name (``CLASSIFICATION_LOSSES``). Method-specific losses live with their method.

``jaxlab.losses.LOSSES`` is the former name of ``CLASSIFICATION_LOSSES`` (deprecated: it read as the
one registry of every loss, beside ``jaxlab.ot_clip.LOSSES``).
"""

import warnings as _warnings

from jaxlab.losses.classification import CLASSIFICATION_LOSSES, softmax_cross_entropy

__all__ = ["CLASSIFICATION_LOSSES", "softmax_cross_entropy"]  # LOSSES: deprecated, not listed


def __getattr__(name: str) -> object:
  if name == "LOSSES":
    _warnings.warn("jaxlab.losses.LOSSES is deprecated; use jaxlab.losses.CLASSIFICATION_LOSSES",
                   DeprecationWarning, stacklevel=2)
    return CLASSIFICATION_LOSSES
  raise AttributeError(f"module 'jaxlab.losses' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted(__all__)
