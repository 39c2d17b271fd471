"""jaxlab's error type for bad input.

Every check of user input (config values, constructor arguments, concrete hyper-parameters,
shapes) raises :class:`InputError`, whose message names the bad value and what is allowed.
The command line prints it as one line; any other exception is a bug and keeps its traceback.
``InputError`` subclasses ``ValueError``, so ``except ValueError`` keeps working. Something to
know that does not stop a run is a :class:`JaxlabWarning`, given with :func:`warn`.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import warnings
from typing import Any, Collection, NoReturn, Sequence

import jax
import jax.numpy as jnp
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


class MissingExtraError(InputError, ModuleNotFoundError):
  """An optional package is not installed: the message names it and the extra that installs it.

  Also a ``ModuleNotFoundError`` (so an ``ImportError``): ``try: import jaxlab.rl.replay`` /
  ``except ImportError`` keeps working, and ``name`` is the missing package, as Python sets it.
  Raised by :func:`jaxlab.registry.optional_imports`; the command line prints it as one line.
  """

  def __init__(self, message: str, name: str | None = None):
    super().__init__(message)
    self.name = name

  def __reduce__(self):  # pickles with its package name (ImportError's own reduce drops the class's signature)
    return type(self), (str(self), self.name)


class CheckpointError(RuntimeError):
  """A checkpoint could not be written or read (disk full, permissions, truncated files).

  The message names the directory and step; the command line prints it as one line.
  """


class DivergedError(RuntimeError):
  """Training cannot go on: e.g. every step of a log interval had a non-finite loss or gradient."""


def _show(value: Any) -> str:
  """A short rendering of a bad value: arrays by their shape, 0-d arrays and NumPy scalars as Python values."""
  if is_traced(value):
    return repr(value)
  if isinstance(value, (jax.Array, np.ndarray)) and np.ndim(value) > 0:
    return f"an array of shape {tuple(np.shape(value))}"
  return repr(value.item() if isinstance(value, (jax.Array, np.ndarray, np.generic)) else value)


def is_int(value: Any) -> bool:
  """A Python or NumPy integer, not a bool (``True`` would pass as a size of 1)."""
  return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
  """A real number: a Python or NumPy int or float, or a 0-d int/float array (JAX too); not a bool or a string."""
  if isinstance(value, (bool, np.bool_)):
    return False
  if isinstance(value, numbers.Real):
    return True
  dtype = getattr(value, "dtype", None)
  return (dtype is not None and np.ndim(value) == 0
          and bool(jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)))


def is_traced(value: Any) -> bool:
  """A JAX tracer (under ``jit``/``grad``/``vmap``), whose value cannot be inspected without a host sync."""
  return isinstance(value, jax.core.Tracer)


# Messages come in two styles, each the one its callers have always printed:
#   "name=value; must be <requirement> (meaning)"     (the default: config keys, module fields; a choice
#                                                      reads "name=value; choose one of (...) (meaning)")
#   "name must be <requirement> (meaning), got value"  (got=True: function arguments, as in OT-CLIP, MoMo)


def _fail(value: Any, name: str, requirement: str, meaning: str, got: bool) -> NoReturn:
  why = f" ({meaning})" if meaning else ""
  if got:
    raise InputError(f"{name} must be {requirement}{why}, got {_show(value)}")
  raise InputError(f"{name}={_show(value)}; must be {requirement}{why}")


def check_int(value: Any, name: str, minimum: int = 1, meaning: str = "", *, maximum: int | None = None,
              got: bool = False) -> int:
  """``value`` as an int; InputError unless it is an integer (not a bool or a float) in ``[minimum, maximum]``.

  Sizes are static Python values even under ``jit``, so this runs at trace time, before any compile.

  Args:
    value: the value to check.
    name: where it came from, as the message prints it (``"model.depth"``, ``"momo: b1"``).
    minimum: the smallest allowed value.
    meaning: what the value is, printed in parentheses.
    maximum: the largest allowed value, or None for no bound.
    got: the ``"name must be an integer >= 1, got value"`` style instead of ``"name=value; ..."``.

  Returns:
    ``int(value)``.

  Examples:
    >>> from jaxlab.errors import check_int
    >>> check_int(4, "model.depth")
    4
    >>> check_int(0, "model.depth", meaning="transformer blocks")
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: model.depth=0; must be an int >= 1 (transformer blocks)
    >>> check_int(True, "num_iterations", got=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: num_iterations must be an integer >= 1, got True
  """
  word = "integer" if got else "int"
  allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
  if not (is_int(value) and value >= minimum and (maximum is None or value <= maximum)):
    _fail(value, name, f"an {word} {allowed}", meaning, got)
  return int(value)


def check_range(value: Any, name: str, low: float | None = None, high: float | None = None, *, meaning: str = "",
                low_open: bool = False, high_open: bool = False, got: bool = False) -> None:
  """InputError unless a concrete real scalar ``value`` lies within the bounds (NaN never does).

  With both bounds, ``value`` must lie in the interval (``inf`` only where a closed bound is inf);
  with one or none it must also be finite. Bounds print as given (``0`` as ``0``, ``0.0`` as ``0.0``).
  A traced value (under ``jit``) cannot be inspected and passes: each caller says what it does with it.

  Args:
    value: the value to check: a Python, NumPy or 0-d JAX real number (not a bool or a string).
    name: where it came from, as the message prints it.
    low: the lower bound, or None.
    high: the upper bound, or None.
    meaning: what the value is, printed in parentheses.
    low_open: exclude ``low`` itself.
    high_open: exclude ``high`` itself.
    got: the ``"name must be in [0, 1], got value"`` style instead of ``"name=value; ..."``.

  Examples:
    >>> from jaxlab.errors import check_range
    >>> check_range(0.5, "tau_a", 0, 1, low_open=True, got=True)
    >>> check_range(1.5, "tau_a", 0, 1, low_open=True, got=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: tau_a must be in (0, 1], got 1.5
    >>> check_range(-1.0, "momo: learning_rate", 0.0, got=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: momo: learning_rate must be a finite number >= 0.0, got -1.0
    >>> check_range("0.1", "sticky_action_prob", 0, 1, high_open=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: sticky_action_prob='0.1'; must be a number in [0, 1)
  """
  if is_traced(value):
    return
  number = is_real(value)
  if number:
    v = float(value)
    ok = ((low is None or (v > low if low_open else v >= low))
          and (high is None or (v < high if high_open else v <= high))
          and (low is not None and high is not None or math.isfinite(v)))  # False for NaN throughout
    if ok:
      return
  if low is not None and high is not None:
    interval = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    requirement = interval if number and got else f"a number {interval}"
  elif number or not got:
    bound = (f" {'>' if low_open else '>='} {low}" if low is not None
             else f" {'<' if high_open else '<='} {high}" if high is not None else "")
    requirement = f"a finite number{bound}"
  else:
    requirement = "a number"
  _fail(value, name, requirement, meaning, got)


def check_positive(value: Any, name: str, meaning: str = "", *, got: bool = False) -> None:
  """InputError unless ``value`` is a finite real number > 0 (not a bool, a string, NaN or inf).

  A traced value passes (see :func:`check_range`).

  Args:
    value: the value to check.
    name: where it came from, as the message prints it.
    meaning: what the value is, printed in parentheses.
    got: the ``"name must be a finite number > 0, got value"`` style instead of ``"name=value; ..."``.

  Examples:
    >>> from jaxlab.errors import check_positive
    >>> check_positive(1.25, "capacity_factor")
    >>> check_positive(0.0, "capacity_factor", "expert slots per token")
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: capacity_factor=0.0; must be a finite number > 0 (expert slots per token)
  """
  check_range(value, name, 0, meaning=meaning, low_open=True, got=got)


def check_probability(value: Any, name: str, meaning: str = "", *, got: bool = False) -> None:
  """InputError unless ``value`` is a real number in [0, 1]; a traced value passes.

  Args:
    value: the value to check.
    name: where it came from, as the message prints it.
    meaning: what the value is, printed in parentheses.
    got: the ``"name must be in [0, 1], got value"`` style instead of ``"name=value; ..."``.

  Examples:
    >>> from jaxlab.errors import check_probability
    >>> check_probability(0.5, "alpha", got=True)
    >>> check_probability(float("nan"), "alpha", got=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: alpha must be in [0, 1], got nan
  """
  check_range(value, name, 0, 1, meaning=meaning, got=got)


def check_finite(value: Any, name: str, meaning: str = "", *, got: bool = False) -> None:
  """InputError unless ``value`` is a finite real number (any sign); a traced value passes.

  Args:
    value: the value to check.
    name: where it came from, as the message prints it.
    meaning: what the value is, printed in parentheses.
    got: the ``"name must be a finite number, got value"`` style instead of ``"name=value; ..."``.

  Examples:
    >>> from jaxlab.errors import check_finite
    >>> check_finite(-3.0, "logit_bias", got=True)
    >>> check_finite(float("nan"), "logit_bias", got=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: logit_bias must be a finite number, got nan
  """
  check_range(value, name, meaning=meaning, got=got)


def check_bool(value: Any, name: str, *, got: bool = False) -> None:
  """InputError unless ``value`` is a bool (or a NumPy bool): a string like ``'no'`` is truthy, so refuse it.

  Args:
    value: the value to check.
    name: where it came from, as the message prints it.
    got: the ``"name must be True or False, got value"`` style instead of ``"name=value; ..."``.

  Examples:
    >>> from jaxlab.errors import check_bool
    >>> check_bool(True, "QNetwork.normalize")
    >>> check_bool("no", "QNetwork.normalize")
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: QNetwork.normalize='no'; must be True or False
    >>> check_bool(1, "momo: adapt_lower_bound", got=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: momo: adapt_lower_bound must be True or False, got 1
  """
  if not isinstance(value, (bool, np.bool_)):
    _fail(value, name, "True or False", "", got)


def check_choice(value: Any, name: str, choices: Collection[Any], meaning: str = "", *, got: bool = False) -> None:
  """InputError unless ``value`` is one of ``choices`` (printed as given: pass a sorted list or a tuple).

  Args:
    value: the value to check.
    name: where it came from, as the message prints it.
    choices: the allowed values.
    meaning: printed in parentheses after the choices (e.g. what each choice does, or ``"or None"``).
    got: the ``"name must be one of [...], got value"`` style instead of ``"name=value; choose one of ..."``.

  Examples:
    >>> from jaxlab.errors import check_choice
    >>> check_choice("dots", "remat", ["dots", "full", "none"], got=True)
    >>> check_choice("all", "remat", ["dots", "full", "none"], got=True)
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: remat must be one of ['dots', 'full', 'none'], got 'all'
    >>> check_choice("gpu", "env.step_via", ("auto", "xla", "callback"))
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: env.step_via='gpu'; choose one of ('auto', 'xla', 'callback')
  """
  if value in choices:
    return
  if got:
    _fail(value, name, f"one of {choices!r}", meaning, got)
  why = f" ({meaning})" if meaning else ""
  raise InputError(f"{name}={_show(value)}; choose one of {choices!r}{why}")


def check_scalar(value: Any, name: str) -> None:
  """InputError ``name must be a scalar, got shape (...)`` unless ``value`` has no axes (0-d arrays pass).

  Args:
    value: the value to check (its shape is static, so a traced value is checked too).
    name: where it came from, as the message prints it.

  Examples:
    >>> import numpy as np
    >>> from jaxlab.errors import check_scalar
    >>> check_scalar(np.float32(2.0), "epsilon")
    >>> check_scalar(np.ones(2), "epsilon")
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: epsilon must be a scalar, got shape (2,)
  """
  check(np.ndim(value) == 0, f"{name} must be a scalar, got shape {tuple(np.shape(value))}")


def check_option_names(given: Collection[str], name: str, allowed: Sequence[str]) -> None:
  """InputError ``name got unknown option 'x'; allowed: a, b`` unless every key of ``given`` is allowed.

  Args:
    given: the option names passed (e.g. the keys of a ``**options`` dict).
    name: the function or config key they were passed to, as the message prints it.
    allowed: the option names it takes, in the order the message lists them.

  Examples:
    >>> from jaxlab.errors import check_option_names
    >>> check_option_names({"tau": 0.5}, "entropic_ot_loss", ("num_iterations",))
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: entropic_ot_loss got unknown option 'tau'; allowed: num_iterations
  """
  unknown = sorted(set(given) - set(allowed))
  if unknown:
    raise InputError(f"{name} got unknown option {unknown[0]!r}; allowed: {', '.join(allowed) or 'none'}")


# ---------------------------------------------------------------- warnings

class JaxlabWarning(UserWarning):
  """The category of every warning jaxlab gives: something to know that does not stop the run.

  Silence them with ``warnings.filterwarnings("ignore", category=JaxlabWarning)``; the command line
  shows each as one line, ``jaxlab: warning: <message>`` (:func:`one_line_warnings`).
  """


class JaxlabRuntimeWarning(JaxlabWarning, RuntimeWarning):
  """A :class:`JaxlabWarning` about something found while running (an unreadable checkpoint
  skipped, an optimizer that stopped moving); also a ``RuntimeWarning``."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[JaxlabWarning] = JaxlabWarning) -> None:
  """Gives a jaxlab warning: the one way jaxlab warns.

  The warning is attributed to the first caller outside jaxlab (the user's line that called into
  it, as ``stacklevel`` is meant to be used), so Python's default filter shows it once per message
  and calling line, and a notebook shows the user's own line beneath it.

  Args:
    message: one line: what was found, and what to do about it.
    category: :class:`JaxlabWarning` or a subclass (:class:`JaxlabRuntimeWarning`).

  >>> import warnings
  >>> with warnings.catch_warnings(record=True) as seen:
  ...   warnings.simplefilter("always")
  ...   warn("resuming with changed num_steps: 20 there, 30 here")
  >>> seen[0].category.__name__, str(seen[0].message)
  ('JaxlabWarning', 'resuming with changed num_steps: 20 there, 30 here')
  """
  frame, level = sys._getframe(1), 2  # noqa: SLF001 - stacklevel=2 is warn's caller
  while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
    frame, level = frame.f_back, level + 1
  warnings.warn(message, category, stacklevel=level)


def one_line_warnings(show: bool = True) -> None:
  """Shows jaxlab's warnings as one line on stderr, ``jaxlab: warning: <message>``, the command
  line's form (as its errors are ``jaxlab: error: <message>``); other warnings are shown as before.

  Args:
    show: False hides jaxlab's warnings (a multi-process run's processes other than 0, which
      would repeat process 0's).
  """
  shown = warnings.showwarning
  if getattr(shown, "_jaxlab_one_line", False):
    shown = shown._jaxlab_next  # installed already: replace it, keep what it wrapped

  def showwarning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
    if not issubclass(category, JaxlabWarning):
      return shown(message, category, filename, lineno, file, line)
    if show:
      (file or sys.stderr).write(f"jaxlab: warning: {message}\n")
    return None

  showwarning._jaxlab_one_line, showwarning._jaxlab_next = True, shown  # noqa: SLF001
  warnings.showwarning = showwarning
