"""Input checks shared by every OT-CLIP function: one ``InputError`` line per bad input.

What can be checked depends on what is concrete. Shapes and dtypes are static under ``jit``, so
they are always checked. Values (a logit scale, tau, a class prior, ...) are checked when they
are concrete Python or NumPy/JAX values; inside ``jit``/``grad``/``vmap`` a *traced* value cannot
be inspected without a host round trip, so it is left alone here and each caller says in its
docstring what it does with a bad traced value (the losses return NaN, inference returns
predictions of -1), so that no bad value gives a finite wrong answer silently.

Every message names the argument, the bad value and what is allowed, e.g.
``tau_a must be in (0, 1], got 1.5``.
"""

from __future__ import annotations

import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError

# Embeddings narrower than this are computed in float32 (bf16/f16 lose the O(1/n) differences
# that the OT losses are made of; float16 also overflows exp at moderate logit scales).
MIN_COMPUTE_DTYPE = jnp.float32


def is_traced(value: Any) -> bool:
  return isinstance(value, jax.core.Tracer)


def _show(value: Any) -> str:
  """A short rendering of a bad value for an error message."""
  if isinstance(value, (jax.Array, np.ndarray)) and np.ndim(value) > 0:
    return f"an array of shape {tuple(np.shape(value))}"
  return repr(value.item() if isinstance(value, (jax.Array, np.ndarray, np.generic)) else value)


def check_floating(name: str, x: Any) -> None:
  """InputError unless ``x`` is an array (or array-like) of a real floating dtype."""
  dtype = jnp.result_type(x) if hasattr(x, "dtype") else np.asarray(x).dtype
  if not jnp.issubdtype(dtype, jnp.floating):
    raise InputError(f"{name} must have a floating dtype (float32, bfloat16, float16, float64), got {dtype}")


def check_embeddings(x: Any, y: Any, *, same_batch: bool = True,
                     names: tuple[str, str] = ("image", "text")) -> None:
  """InputError naming both shapes unless x, y are non-empty float [n, d] and [m, d] (n == m if same_batch)."""
  xs, ys = tuple(np.shape(x)), tuple(np.shape(y))
  both = f"{names[0]} embeddings {xs} and {names[1]} embeddings {ys}"
  if len(xs) != 2 or len(ys) != 2:
    raise InputError(f"{both} must both be 2-D [batch, dim]")
  if xs[1] != ys[1]:
    raise InputError(f"{both} have different dimensions")
  if same_batch and xs[0] != ys[0]:
    raise InputError(f"{both} have different batch sizes")
  if min(xs + ys) < 1:
    raise InputError(f"{both}: empty input; every batch size and the dimension must be >= 1")
  check_floating(f"{names[0]} embeddings", x)
  check_floating(f"{names[1]} embeddings", y)


def compute_dtype(*arrays: Any) -> Any:
  """The dtype the math runs in: the inputs' common float dtype, at least float32."""
  return jnp.promote_types(jnp.result_type(*arrays), MIN_COMPUTE_DTYPE)


def check_scalar(name: str, value: Any) -> None:
  if np.ndim(value) != 0:
    raise InputError(f"{name} must be a scalar, got shape {tuple(np.shape(value))}")


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> None:
  """InputError if a concrete ``value`` has an entry that is <= 0, NaN (or inf unless allowed).

  Traced values are left alone (see the module docstring); learned scales are exp(log_scale), so
  they are positive by construction.
  """
  if value is None or is_traced(value):
    return
  arr = np.asarray(value, np.float64) if _is_real(value) else None
  if arr is None:
    raise InputError(f"{name} must be a positive number, got {_show(value)}")
  ok = arr > 0 if allow_inf else (arr > 0) & np.isfinite(arr)
  if not np.all(ok):
    bad = value if arr.ndim == 0 else arr[~ok].ravel()[0]
    what = "a positive number" if allow_inf else "a finite number > 0"
    raise InputError(f"{name} must be {what}, got {_show(bad)}")


def check_in_range(name: str, value: Any, low: float, high: float, *, low_open: bool = False,
                   high_open: bool = False) -> None:
  """InputError unless a concrete scalar ``value`` lies in the interval (NaN never does)."""
  if is_traced(value):
    return
  interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
  if not _is_real(value) or np.ndim(value) != 0:
    raise InputError(f"{name} must be a number in {interval}, got {_show(value)}")
  v = float(value)
  above = v > low if low_open else v >= low
  below = v < high if high_open else v <= high
  if not (above and below):  # False for NaN
    raise InputError(f"{name} must be in {interval}, got {_show(value)}")


def check_integer(name: str, value: Any, minimum: int = 1) -> int:
  """The value as an int; InputError unless it is an integer (not a bool or float) >= minimum."""
  if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
    raise InputError(f"{name} must be an integer >= {minimum}, got {_show(value)}")
  if int(value) < minimum:
    raise InputError(f"{name} must be an integer >= {minimum}, got {int(value)}")
  return int(value)


def check_bool(name: str, value: Any) -> None:
  if not isinstance(value, (bool, np.bool_)):
    raise InputError(f"{name} must be True or False, got {_show(value)}")


def check_finite(name: str, value: Any) -> None:
  """InputError unless a concrete ``value`` is a real scalar that is finite (e.g. a logit bias)."""
  if is_traced(value):
    return
  check_scalar(name, value)
  if not _is_real(value) or not np.isfinite(float(value)):
    raise InputError(f"{name} must be a finite number, got {_show(value)}")


def check_option_names(where: str, given: dict[str, Any], allowed: tuple[str, ...]) -> None:
  unknown = sorted(set(given) - set(allowed))
  if unknown:
    raise InputError(f"{where} got unknown option {unknown[0]!r}; allowed: {', '.join(allowed) or 'none'}")


def positive_finite(value: Any) -> jax.Array:
  """Traced validity flag for a scalar that must be finite and > 0."""
  return jnp.isfinite(value) & (value > 0)


def _is_real(value: Any) -> bool:
  if isinstance(value, (bool, np.bool_)):
    return False
  if isinstance(value, numbers.Real):
    return True
  dtype = getattr(value, "dtype", None)
  if dtype is None:
    try:
      dtype = np.asarray(value).dtype
    except Exception:  # noqa: BLE001 -- anything that is not array-like is simply not a number
      return False
  return bool(jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer))
