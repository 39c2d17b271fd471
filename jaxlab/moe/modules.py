"""Flax linen wrappers of the Soft MoE and Top-1 MoE pure functions (same parameter layout).

``SoftMoE(...)(x)`` creates ``params/<name>/router/phi`` [d, n, p] and ``params/<name>/experts/
{w1,b1,w2,b2}`` (leading expert axis) and returns ``(y, stats)`` from
:func:`jaxlab.moe.soft_moe`; ``Top1MoE`` likewise over :func:`jaxlab.moe.top1.top1_moe`.
"""

from __future__ import annotations

from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab import errors
from jaxlab.errors import check
from jaxlab.moe import experts as experts_lib
from jaxlab.moe import _soft_moe as soft_lib
from jaxlab.moe import top1 as top1_lib


def check_moe_settings(module: str, num_experts: Any, expert_hidden: Any, capacity_factor: Any,
                       num_slots: Any = None) -> None:
  """InputError naming ``module.attribute`` for a size or factor that builds no layer (shared with haiku).

  All of these are static Python values, so the check runs at trace time even under ``jit``.
  """
  errors.check_int(num_experts, f"{module}.num_experts")
  errors.check_int(expert_hidden, f"{module}.expert_hidden", meaning="width of each expert MLP")
  errors.check_positive(capacity_factor, f"{module}.capacity_factor",
                             "capacity per expert = ceil(tokens * factor / experts)")
  # 0 is not "unset": None is (``num_slots or ...`` used to drop a 0 silently)
  check(num_slots is None or (errors.is_int(num_slots) and num_slots >= 1),
        f"{module}.num_slots={num_slots!r}; must be None (use capacity_factor) or an int >= 1")


def check_tokens(module: str, x: jax.Array) -> None:
  check(x.ndim == 3 and min(x.shape[1:]) >= 1,
        f"{module} tokens have shape {x.shape}; need [batch, tokens, dim] with tokens, dim >= 1")


class SoftMoE(nn.Module):
  """Soft MoE layer (Puigcerver et al., ICLR 2024) on tokens [b, m, d] -> ([b, m, d], stats).

  Attributes:
    num_experts: n.
    expert_hidden: hidden width h of each expert MLP (dopamine: ``expert_hidden_units``).
    capacity_factor: slots per expert p = ceil(m * capacity_factor / n), unless ``num_slots``.
    num_slots: slots per expert (an int >= 1), overriding ``capacity_factor``; None: from it.
    normalize: l2-normalise tokens and phi for the logits, with a learned scale.
    single_exponential: see :func:`jaxlab.moe.soft_moe` (only with ``impl="cpu_kernel"``).
    impl: ``"auto"`` (the CPU kernel on CPU, the einsum form elsewhere, chosen when the program
      is lowered), ``"cpu_kernel"`` or ``"einsum"``; see :func:`jaxlab.moe.soft_moe`.
    param_dtype: dtype of the parameters.
    noisy_experts: each expert's first layer is a factorised noisy linear layer (dopamine's
      ``ExpertModel(noisy=True)``): its parameters are :func:`jaxlab.moe.experts.init_noisy_experts`'
      (means ``w1``, ``b1`` and scales ``w1_sigma``, ``b1_sigma``), and each call takes the noise
      draw that all experts and slots share as ``expert_noise=(f_p [d, 1], f_q [1, h])``, or None
      for the means. Off: plain experts, and ``expert_noise`` must be None.
  """

  num_experts: int
  expert_hidden: int
  capacity_factor: float = 1.0
  num_slots: Optional[int] = None
  normalize: bool = False
  single_exponential: bool = False
  impl: str = "auto"
  param_dtype: jnp.dtype = jnp.float32
  noisy_experts: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, expert_noise: tuple[jax.Array, jax.Array] | None = None
               ) -> tuple[jax.Array, dict[str, jax.Array]]:
    check_moe_settings("SoftMoE", self.num_experts, self.expert_hidden, self.capacity_factor, self.num_slots)
    soft_lib.check_impl(self.impl, self.single_exponential, "SoftMoE.impl", "SoftMoE.single_exponential")
    errors.check_bool(self.noisy_experts, "SoftMoE.noisy_experts")
    check(self.noisy_experts or expert_noise is None,
          "SoftMoE got expert_noise but noisy_experts=False; set SoftMoE.noisy_experts=True for noisy experts")
    check_tokens("SoftMoE", x)
    d = x.shape[-1]
    p = self.num_slots if self.num_slots is not None else soft_lib.num_slots(
        x.shape[1], self.num_experts, self.capacity_factor)
    router = self.param("router", lambda key: soft_lib.init_router(
        key, d, self.num_experts, p, self.normalize, self.param_dtype))
    init = experts_lib.init_noisy_experts if self.noisy_experts else experts_lib.init_experts
    experts = self.param("experts", lambda key: init(key, self.num_experts, d, self.expert_hidden, self.param_dtype))
    if self.noisy_experts:
      experts = experts_lib.noisy_expert_weights(experts, *(expert_noise or (None, None)))
    return soft_lib.soft_moe({"router": router, "experts": experts}, x, normalize=self.normalize,
                             single_exponential=self.single_exponential, impl=self.impl)


class Top1MoE(nn.Module):
  """Top-1 MoE baseline (dopamine's ``MoE`` with a top-1 router) -> ([b, m, d], aux)."""

  num_experts: int
  expert_hidden: int
  capacity_factor: float = 1.0
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    check_moe_settings("Top1MoE", self.num_experts, self.expert_hidden, self.capacity_factor)
    check_tokens("Top1MoE", x)
    d = x.shape[-1]
    router = self.param("router", lambda key: top1_lib.init_router(
        key, d, self.num_experts, self.param_dtype))
    experts = self.param("experts", lambda key: experts_lib.init_experts(
        key, self.num_experts, d, self.expert_hidden, self.param_dtype))
    return top1_lib.top1_moe({"router": router, "experts": experts}, x,
                             capacity_factor=self.capacity_factor)
