"""Top-1 (Switch-style) MoE baseline as pure functions over a parameter dict.

As dopamine's ``labs/moes/architectures/moe.py`` + ``routers.TopKRouter`` with k=1 (the "MoE"
baseline of Obando-Ceron et al., ICML 2024): router ``Dense(n, no bias) -> softmax``, each token
goes to its most probable expert, each expert takes at most ``ceil(m * capacity_factor / n)``
tokens per sample in token order (later tokens are dropped: zero output), and expert outputs are
scaled by the gate (the winning probability), which is how the router gets gradients.

Auxiliary losses (returned, not added; multiply by a weight and add to the loss yourself):
  importance_loss: squared coefficient of variation of the per-expert sum of router
    probabilities (Shazeer et al., ICLR 2017, Eq. 6; dopamine's ``importance_loss``).
  load_balancing_loss: ``n * sum_i f_i P_i`` with f_i the share of tokens whose top expert is i
    and P_i the mean router probability of i (Fedus et al., "Switch Transformers", JMLR 2022,
    Eq. 4); 1 when balanced.
Both are computed per sample (each sample is a routing group) and averaged over the batch.

Notation: b batch, m tokens per sample, d token dim, n experts, c capacity (slots per expert),
h expert hidden dim.

Parameters::

  {"router": {"kernel": [d, n]},
   "experts": {"w1": [n, d, h], "b1": [n, h], "w2": [n, h, d], "b2": [n, d]}}
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxlab import errors
from jaxlab.errors import check
from jaxlab.moe import experts as experts_lib

Params = dict


def capacity(num_tokens: int, num_experts: int, capacity_factor: float = 1.0) -> int:
  """Tokens each expert takes per sample: ``ceil(m * capacity_factor / n)`` (dopamine's rule)."""
  return experts_lib.per_expert(num_tokens, num_experts, capacity_factor, "tokens per expert", "capacity 0")


def init_top1_moe(key: jax.Array, token_dim: int, num_experts: int, expert_hidden: int,
                  dtype: jnp.dtype = jnp.float32) -> Params:
  """Router (:func:`init_router`) and the expert MLPs."""
  k_router, k_experts = jax.random.split(key)
  return {"router": init_router(k_router, token_dim, num_experts, dtype),
          "experts": experts_lib.init_experts(k_experts, num_experts, token_dim, expert_hidden,
                                              dtype)}


def init_router(key: jax.Array, token_dim: int, num_experts: int,
                dtype: jnp.dtype = jnp.float32) -> dict[str, jax.Array]:
  """Router kernel [d, n], LeCun normal (flax Dense's default, which dopamine's router uses)."""
  errors.check_int(num_experts, "num_experts")
  errors.check_int(token_dim, "token_dim")
  return {"kernel": jax.nn.initializers.lecun_normal()(key, (token_dim, num_experts), dtype)}


def _cv_squared(v: jax.Array) -> jax.Array:
  return jnp.var(v, axis=-1) / jnp.square(jnp.mean(v, axis=-1))


def top1_moe(params: Params, x: jax.Array, *, capacity_factor: float = 1.0
             ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Top-1 MoE on tokens ``x`` [b, m, d] -> (outputs [b, m, d], aux).

  aux: ``importance_loss`` and ``load_balancing_loss`` (differentiable scalars), and the
  statistics ``expert_load`` [n] (share of tokens routed to each expert before capacity),
  ``dropped_fraction`` (tokens over capacity), ``router_entropy`` (mean entropy of the router
  distribution / log n) under ``stop_gradient``.
  """
  check(x.ndim == 3 and min(x.shape[1:]) >= 1,
        f"top1_moe tokens have shape {x.shape}; need [batch, tokens, dim] with tokens, dim >= 1")
  kernel = params["router"]["kernel"]
  check(kernel.ndim == 2 and kernel.shape[0] == x.shape[-1],
        f"tokens have dim {x.shape[-1]} but the router kernel has shape {kernel.shape}")
  n, _ = experts_lib.check_experts(params["experts"], x.shape[-1])
  check(kernel.shape[1] == n, f"router has {kernel.shape[1]} experts but the experts have {n}")
  b, m, d = x.shape
  c = capacity(m, n, capacity_factor)

  probs = jax.nn.softmax(jnp.einsum("bmd,dn->bmn", x, kernel), axis=-1)  # [b, m, n]
  expert = jnp.argmax(probs, axis=-1)  # [b, m]
  gate = jnp.max(probs, axis=-1)  # [b, m]; differentiable path to the router
  chosen = jax.nn.one_hot(expert, n, dtype=x.dtype)  # [b, m, n]
  position = jnp.cumsum(chosen.astype(jnp.int32), axis=1) - 1  # place in its expert's queue
  kept = chosen * (position < c)  # the first c tokens (in token order) of each expert
  dispatch = kept[..., None] * jax.nn.one_hot(position, c, dtype=x.dtype)  # [b, m, n, c]
  expert_in = jnp.einsum("bmnc,bmd->nbcd", dispatch, x).reshape(n, b * c, d)
  expert_out = experts_lib.apply_experts(params["experts"], expert_in).reshape(n, b, c, d)
  y = jnp.einsum("bmnc,nbcd->bmd", dispatch, expert_out) * gate[..., None]

  routed = jnp.mean(chosen, axis=1)  # [b, n]: f_i per sample
  aux = {
      "importance_loss": jnp.mean(_cv_squared(jnp.sum(probs, axis=1))),
      "load_balancing_loss": jnp.mean(n * jnp.sum(routed * jnp.mean(probs, axis=1), axis=-1)),
  }
  stats = {
      "expert_load": jnp.mean(routed, axis=0),
      "dropped_fraction": jnp.sum(chosen - kept) / (b * m),
      "router_entropy": jnp.mean(-jnp.sum(probs * jnp.log(jnp.maximum(probs, 1e-30)), -1))
                        / (math.log(n) if n > 1 else 1.0),
  }
  aux.update(jax.lax.stop_gradient(stats))
  return y, aux
