"""Similarity S and cost C = 1 - S of checked, normalised embeddings (checks: ``checks.py``).

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

from jaxlab.errors import check_positive, check_scalar
from jaxlab.ot_clip.checks import check_embeddings, compute_dtype

__all__ = ["check_embeddings", "cosine_cost", "epsilon_from_logit_scale",
           "gather_batch", "l2_normalize", "normalized_pair", "similarity"]


def l2_normalize(x: jax.Array, eps: float = 1e-6) -> jax.Array:
  """Rows scaled to unit L2 norm (eps guards an all-zero row against 0/0)."""
  return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), eps * eps))


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


def normalized_pair(x: jax.Array, y: jax.Array, *, same_batch: bool = True,
                    names: tuple[str, str] = ("image", "text")) -> tuple[jax.Array, jax.Array]:
  """Checked, all-gathered (explicit axes), L2-normalised x, y in the compute dtype.

  The compute dtype is the inputs' float dtype but at least float32: in bfloat16 the OT losses,
  differences of O(1/n) log-masses, round to 0, and float16 overflows exp at moderate scales. A
  float32 input is left as is (no copy), float64 stays float64.
  """
  check_embeddings(x, y, same_batch=same_batch, names=names)
  x, y = jnp.asarray(x), jnp.asarray(y)
  dtype = compute_dtype(x, y)
  return l2_normalize(gather_batch(x).astype(dtype)), l2_normalize(gather_batch(y).astype(dtype))


def similarity(x: jax.Array, y: jax.Array, *, same_batch: bool = True) -> jax.Array:
  """S_ij = <x_i, y_j> after L2 normalisation: [n, d] x [m, d] -> [n, m], at least float32."""
  xn, yn = normalized_pair(x, y, same_batch=same_batch)
  return xn @ yn.T


def cosine_cost(x: jax.Array, y: jax.Array, *, same_batch: bool = True) -> jax.Array:
  """C = 1 - S, the transport cost of OT-CLIP (Sec. 3)."""
  return 1.0 - similarity(x, y, same_batch=same_batch)


def epsilon_from_logit_scale(logit_scale: Any, dtype: Any = None) -> jax.Array:
  """epsilon = 1 / logit_scale: the entropic regulariser is CLIP's temperature (Sec. 3).

  A concrete scale must be a finite scalar > 0 (InputError otherwise); a traced one is not
  inspected here (the losses turn a non-positive traced scale into a NaN loss).
  """
  check_scalar(logit_scale, "logit_scale")
  check_positive(logit_scale, "logit_scale", got=True)
  return 1.0 / jnp.asarray(logit_scale, dtype)
