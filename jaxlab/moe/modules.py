"""Flax linen wrappers of the Soft MoE and Top-1 MoE pure functions (same parameter layout).

``SoftMoE(...)(x)`` creates ``params/<name>/router/phi`` [d, n, p] and ``params/<name>/experts/
{w1,b1,w2,b2}`` (leading expert axis) and returns ``(y, stats)`` from
:func:`jaxlab.moe.softmoe.soft_moe`; ``Top1MoE`` likewise over :func:`jaxlab.moe.top1.top1_moe`.
"""

from __future__ import annotations

from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check
from jaxlab.moe import experts as experts_lib
from jaxlab.moe import softmoe as soft_lib
from jaxlab.moe import top1 as top1_lib


class SoftMoE(nn.Module):
  """Soft MoE layer (Puigcerver et al., ICLR 2024) on tokens [b, m, d] -> ([b, m, d], stats).

  Attributes:
    num_experts: n.
    expert_hidden: hidden width h of each expert MLP (dopamine: ``expert_hidden_units``).
    capacity_factor: slots per expert p = ceil(m * capacity_factor / n), unless ``num_slots``.
    num_slots: slots per expert, overriding ``capacity_factor``.
    normalize: l2-normalise tokens and phi for the logits, with a learned scale.
    single_exponential: see :func:`jaxlab.moe.softmoe.soft_moe`.
    param_dtype: dtype of the parameters.
  """

  num_experts: int
  expert_hidden: int
  capacity_factor: float = 1.0
  num_slots: Optional[int] = None
  normalize: bool = False
  single_exponential: bool = False
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    check(x.ndim == 3, f"SoftMoE tokens have shape {x.shape}; need [batch, tokens, dim]")
    d = x.shape[-1]
    p = self.num_slots or soft_lib.num_slots(x.shape[1], self.num_experts, self.capacity_factor)
    router = self.param("router", lambda key: soft_lib.init_router(
        key, d, self.num_experts, p, self.normalize, self.param_dtype))
    experts = self.param("experts", lambda key: experts_lib.init_experts(
        key, self.num_experts, d, self.expert_hidden, self.param_dtype))
    return soft_lib.soft_moe({"router": router, "experts": experts}, x, normalize=self.normalize,
                             single_exponential=self.single_exponential)


class Top1MoE(nn.Module):
  """Top-1 MoE baseline (dopamine's ``MoE`` with a top-1 router) -> ([b, m, d], aux)."""

  num_experts: int
  expert_hidden: int
  capacity_factor: float = 1.0
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    check(x.ndim == 3, f"Top1MoE tokens have shape {x.shape}; need [batch, tokens, dim]")
    d = x.shape[-1]
    router = self.param("router", lambda key: top1_lib.init_router(
        key, d, self.num_experts, self.param_dtype))
    experts = self.param("experts", lambda key: experts_lib.init_experts(
        key, self.num_experts, d, self.expert_hidden, self.param_dtype))
    return top1_lib.top1_moe({"router": router, "experts": experts}, x,
                             capacity_factor=self.capacity_factor)
