"""jaxlab's error type for bad input.

Every check of user input (config values, constructor arguments, concrete hyper-parameters,
shapes) raises :class:`InputError`, whose message names the bad value and what is allowed.
The command line prints it as one line; any other exception is a bug and keeps its traceback.
``InputError`` subclasses ``ValueError``, so ``except ValueError`` keeps working.
"""

from __future__ import annotations


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
