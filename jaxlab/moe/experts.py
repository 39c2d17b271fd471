"""Stacked expert MLPs: ``Dense(h) -> ReLU -> Dense(d)`` per expert, weights on a leading expert axis.

As dopamine's ``ExpertModel`` (labs/moes/architectures/networks.py) under ``nn.vmap`` over experts:
Glorot-uniform kernels (fan-in/out of each expert's own matrix), zero biases, own parameters per
expert. Layout ``{"w1": [n, d, h], "b1": [n, h], "w2": [n, h, d], "b2": [n, d]}``, so one sharding
rule such as ``(r"experts/", ("expert",))`` splits every expert parameter over a mesh axis.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from jaxlab import errors
from jaxlab.errors import check, check_int

ExpertParams = dict  # {"w1", "b1", "w2", "b2"}

_glorot_per_expert = jax.nn.initializers.glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(0,))


def init_experts(key: jax.Array, num_experts: int, token_dim: int, hidden_dim: int,
                 dtype: jnp.dtype = jnp.float32) -> ExpertParams:
  """Parameters of ``num_experts`` MLPs ``token_dim -> hidden_dim -> token_dim``."""
  check_int(num_experts, "num_experts")
  check_int(token_dim, "token_dim")
  check_int(hidden_dim, "expert hidden_dim", meaning="width of each expert MLP")
  k1, k2 = jax.random.split(key)
  n, d, h = num_experts, token_dim, hidden_dim
  return {"w1": _glorot_per_expert(k1, (n, d, h), dtype), "b1": jnp.zeros((n, h), dtype),
          "w2": _glorot_per_expert(k2, (n, h, d), dtype), "b2": jnp.zeros((n, d), dtype)}


def check_experts(experts: ExpertParams, token_dim: int) -> tuple[int, int]:
  """Validates the expert parameter shapes; returns (num_experts, hidden_dim)."""
  check(set(experts) == {"w1", "b1", "w2", "b2"},
        f"expert params have keys {sorted(experts)}; need ['b1', 'b2', 'w1', 'w2']")
  check(experts["w1"].ndim == 3, f"expert w1 has shape {tuple(experts['w1'].shape)}; need [experts, dim, hidden]")
  n, d, h = experts["w1"].shape
  check(n >= 1 and h >= 1, f"expert w1 has shape {(n, d, h)}; need >= 1 expert and hidden width >= 1")
  check(d == token_dim, f"expert w1 has token dim {d} but the tokens have dim {token_dim}")
  shapes = {k: tuple(v.shape) for k, v in experts.items()}
  want = {"w1": (n, d, h), "b1": (n, h), "w2": (n, h, d), "b2": (n, d)}
  check(shapes == want, f"expert param shapes {shapes}; need {want}")
  return n, h


def apply_experts(experts: ExpertParams, inputs: jax.Array) -> jax.Array:
  """Each expert's MLP on its own rows: inputs [n, c, d] -> [n, c, d]."""
  hidden = jax.nn.relu(jnp.einsum("ncd,ndh->nch", inputs, experts["w1"])
                       + experts["b1"][:, None, :])
  return jnp.einsum("nch,nhd->ncd", hidden, experts["w2"]) + experts["b2"][:, None, :]


def per_expert(num_tokens: int, num_experts: int, capacity_factor: float, what: str, zero: str) -> int:
  """``ceil(m * capacity_factor / n)`` (dopamine's rule for Soft-MoE slots and Top-1 capacity), >= 1.

  ``what`` names the count in the factor's message, ``zero`` how a 0 result reads.
  """
  check_int(num_experts, "num_experts")
  check_int(num_tokens, "num_tokens")
  errors.check_positive(capacity_factor, "capacity_factor", f"{what} = ceil(tokens * factor / experts)")
  count = int(math.ceil(num_tokens * capacity_factor / num_experts))
  check(count >= 1, f"capacity_factor={capacity_factor} with {num_tokens} tokens and {num_experts} "
        f"experts gives {zero}; need >= 1")
  return count
