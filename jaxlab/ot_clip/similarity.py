"""Similarity S, cost C = 1 - S and the input checks shared by every OT-CLIP function.

Shi, Fan & Yan, "OT-CLIP: Understanding and Generalizing CLIP via Optimal Transport", ICML 2024
(https://proceedings.mlr.press/v235/shi24b.html), Sec. 3: the coupling between a batch of images
and texts is scored by the cosine similarity S_ij = <x_i, y_j> of L2-normalised embeddings, the
transport cost is C = 1 - S, and the entropic regulariser is the CLIP temperature,
epsilon = 1 / logit_scale.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import numpy as np


def l2_normalize(x: jax.Array, eps: float = 1e-6) -> jax.Array:
  """Rows scaled to unit L2 norm (eps guards an all-zero row against 0/0)."""
  return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), eps * eps))


def check_embeddings(x: jax.Array, y: jax.Array, *, same_batch: bool = True,
                     names: tuple[str, str] = ("image", "text")) -> None:
  """Raises ValueError naming both shapes unless x, y are [n, d] and [m, d] (n == m if same_batch)."""
  xs, ys = tuple(jnp.shape(x)), tuple(jnp.shape(y))
  if len(xs) != 2 or len(ys) != 2:
    raise ValueError(f"{names[0]} embeddings {xs} and {names[1]} embeddings {ys} must both be 2-D [batch, dim]")
  if xs[1] != ys[1]:
    raise ValueError(f"{names[0]} embeddings {xs} and {names[1]} embeddings {ys} have different dimensions")
  if same_batch and xs[0] != ys[0]:
    raise ValueError(f"{names[0]} embeddings {xs} and {names[1]} embeddings {ys} have different batch sizes")


def check_positive(name: str, value: Any) -> None:
  """ValueError if a concrete ``value`` has an entry <= 0 (or NaN).

  Traced values (inside jit/grad) cannot be inspected without a host round trip; they are left
  alone. Learned scales are parameterised as exp(log_scale), so they are positive by construction.
  """
  if value is None or isinstance(value, jax.core.Tracer):
    return
  arr = np.asarray(value)
  if not np.all(arr > 0):
    raise ValueError(f"{name} must be positive, got {value}")


def gather_batch(x: jax.Array) -> jax.Array:
  """Replicates an array whose type carries an *explicit* sharding; otherwise returns it as is.

  The plan couples every pair of the global batch. With explicit mesh axes (sharding in types,
  the default of ``jax.make_mesh`` in recent JAX) ops such as x @ y.T on two row-sharded arrays
  or a diagonal of a row-sharded matrix are type errors, so we all-gather the [B, d] embeddings
  (cheap next to the B x B plan). Under auto axes (GSPMD) the compiler places the collectives.
  """
  sharding = getattr(jax.typeof(x), "sharding", None)
  if sharding is None or sharding.mesh.empty or all(s is None for s in sharding.spec):
    return x
  explicit = {name for name, t in zip(sharding.mesh.axis_names, sharding.mesh.axis_types)
              if t == jax.sharding.AxisType.Explicit}
  if not explicit:
    return x
  return jax.sharding.reshard(x, NamedSharding(sharding.mesh, P()))


def similarity(x: jax.Array, y: jax.Array, *, same_batch: bool = True) -> jax.Array:
  """S_ij = <x_i, y_j> after L2 normalisation: [n, d] x [m, d] -> [n, m]."""
  check_embeddings(x, y, same_batch=same_batch)
  return l2_normalize(gather_batch(x)) @ l2_normalize(gather_batch(y)).T


def cosine_cost(x: jax.Array, y: jax.Array, *, same_batch: bool = True) -> jax.Array:
  """C = 1 - S, the transport cost of OT-CLIP (Sec. 3)."""
  return 1.0 - similarity(x, y, same_batch=same_batch)


def epsilon_from_logit_scale(logit_scale: Any) -> jax.Array:
  """epsilon = 1 / logit_scale: the entropic regulariser is CLIP's temperature (Sec. 3)."""
  check_positive("logit_scale", logit_scale)
  return 1.0 / jnp.asarray(logit_scale)
