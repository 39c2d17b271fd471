"""jaxlab's error type for bad input.

Every check of user input (config values, constructor arguments, concrete hyper-parameters,
shapes) raises :class:`InputError`, whose message names the bad value and what is allowed.
The command line prints it as one line; any other exception is a bug and keeps its traceback.
``InputError`` subclasses ``ValueError``, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class InputError(ValueError):
  """Bad input: the message names the value and what is allowed."""


class UnknownNameError(InputError, KeyError):
  """An unknown registry name (also a ``KeyError``, for dict-like callers)."""

  def __str__(self) -> str:  # KeyError would print the repr of the message
    return str(self.args[0]) if self.args else ""


def check(condition: bool, message: str) -> None:
  """Raises ``InputError(message)`` unless ``condition``."""
  if not condition:
    raise InputError(message)


class CheckpointError(RuntimeError):
  """A checkpoint could not be written or read (disk full, permissions, truncated files).

  The message names the directory and step; the command line prints it as one line.
  """


class DivergedError(RuntimeError):
  """Training cannot go on: e.g. every step of a log interval had a non-finite loss or gradient."""


def _show(value: Any) -> str:
  return repr(value.item() if isinstance(value, np.generic) else value)


def is_int(value: Any) -> bool:
  """A Python or NumPy integer, not a bool (``True`` would pass as a size of 1)."""
  return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(value: Any, name: str, minimum: int = 1, meaning: str = "") -> None:
  """InputError ``name=value; must be an int >= minimum (meaning)`` unless ``value`` is such an int.

  Sizes are static Python values even under ``jit``, so this runs at trace time, before any compile.

  Examples:
    >>> from jaxlab.errors import check_int
    >>> check_int(4, "model.depth")
    >>> check_int(0, "model.depth", meaning="transformer blocks")
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: model.depth=0; must be an int >= 1 (transformer blocks)
  """
  check(is_int(value) and value >= minimum,
        f"{name}={_show(value)}; must be an int >= {minimum}" + (f" ({meaning})" if meaning else ""))


def check_positive(value: Any, name: str, meaning: str = "") -> None:
  """InputError unless ``value`` is a finite real number > 0 (not a bool, a string, NaN or inf)."""
  ok = (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
        and math.isfinite(value) and value > 0)
  check(ok, f"{name}={_show(value)}; must be a finite number > 0" + (f" ({meaning})" if meaning else ""))


def check_bool(value: Any, name: str) -> None:
  """InputError ``name=value; must be True or False`` unless ``value`` is a bool (or a NumPy bool)."""
  check(isinstance(value, (bool, np.bool_)), f"{name}={_show(value)}; must be True or False")
