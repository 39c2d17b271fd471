"""The array checks every OT-CLIP function shares (embeddings, dtypes) and the dtype the math runs in.

Shapes and dtypes are static under ``jit``, so they are always checked. Values (a logit scale,
tau, a class prior, ...) are checked with :mod:`jaxlab.errors` (``got=True``: messages like
``tau_a must be in (0, 1], got 1.5``) when they are concrete; inside ``jit``/``grad``/``vmap``
a *traced* value cannot be inspected without a host round trip, so it is left alone and each
caller says in its docstring what it does with a bad traced value (the losses return NaN,
inference returns predictions of -1), so that no bad value gives a finite wrong answer silently.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError

# Embeddings narrower than this are computed in float32 (bf16/f16 lose the O(1/n) differences
# that the OT losses are made of; float16 also overflows exp at moderate logit scales).
MIN_COMPUTE_DTYPE = jnp.float32


def check_floating(x: Any, name: str) -> None:
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
  check_floating(x, f"{names[0]} embeddings")
  check_floating(y, f"{names[1]} embeddings")


def compute_dtype(*arrays: Any) -> Any:
  """The dtype the math runs in: the inputs' common float dtype, at least float32."""
  return jnp.promote_types(jnp.result_type(*arrays), MIN_COMPUTE_DTYPE)


def positive_finite(value: Any) -> jax.Array:
  """Traced validity flag for a scalar that must be finite and > 0."""
  return jnp.isfinite(value) & (value > 0)

