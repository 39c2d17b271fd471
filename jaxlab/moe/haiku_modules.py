"""Haiku wrappers of the Soft MoE and Top-1 MoE pure functions (same parameter layout).

Parameters land in ``<module>/router`` (``phi`` or ``kernel``) and ``<module>/experts``
(``w1, b1, w2, b2``), so the path of an expert weight is ``soft_moe/experts/w1`` and the same
sharding rule ``(r"experts/", ("expert",))`` applies as for the flax modules.
"""

from __future__ import annotations

from typing import Callable, Optional

import haiku as hk
import jax
import jax.numpy as jnp

from jaxlab.moe import experts as experts_lib
from jaxlab.moe import _soft_moe as soft_lib
from jaxlab.moe import top1 as top1_lib
from jaxlab.moe.modules import check_moe_settings, check_tokens


def _get_group(scope: str, init: Callable[[jax.Array], dict[str, jax.Array]]) -> dict:
  """Haiku parameters ``scope/<name>`` for every array of ``init(key)``; ``init`` runs at most
  once, on ``hk.transform``'s init."""
  cache: dict[str, dict] = {}

  def leaf_init(name):
    def initializer(shape, dtype):
      if "arrays" not in cache:
        cache["arrays"] = init(hk.next_rng_key())
      return cache["arrays"][name]
    return initializer

  shapes = jax.eval_shape(init, jax.random.key(0))
  with hk.name_scope(scope):
    return {name: hk.get_parameter(name, s.shape, s.dtype, init=leaf_init(name))
            for name, s in shapes.items()}


class SoftMoE(hk.Module):
  """Soft MoE layer (Puigcerver et al., ICLR 2024): tokens [b, m, d] -> ([b, m, d], stats).

  Same arguments as :class:`jaxlab.moe.modules.SoftMoE`.
  """

  def __init__(self, num_experts: int, expert_hidden: int, capacity_factor: float = 1.0,
               num_slots: Optional[int] = None, normalize: bool = False,
               single_exponential: bool = False, impl: str = "auto",
               param_dtype: jnp.dtype = jnp.float32, name: Optional[str] = "soft_moe"):
    super().__init__(name=name)
    check_moe_settings("SoftMoE", num_experts, expert_hidden, capacity_factor, num_slots)
    soft_lib.check_impl(impl, single_exponential, "SoftMoE.impl", "SoftMoE.single_exponential")
    self.num_experts, self.expert_hidden = num_experts, expert_hidden
    self.capacity_factor, self.num_slots = capacity_factor, num_slots
    self.normalize, self.single_exponential, self.impl = normalize, single_exponential, impl
    self.param_dtype = param_dtype

  def __call__(self, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    check_tokens("SoftMoE", x)
    d = x.shape[-1]
    p = self.num_slots if self.num_slots is not None else soft_lib.num_slots(
        x.shape[1], self.num_experts, self.capacity_factor)
    router = _get_group("router", lambda key: soft_lib.init_router(
        key, d, self.num_experts, p, self.normalize, self.param_dtype))
    experts = _get_group("experts", lambda key: experts_lib.init_experts(
        key, self.num_experts, d, self.expert_hidden, self.param_dtype))
    return soft_lib.soft_moe({"router": router, "experts": experts}, x, normalize=self.normalize,
                             single_exponential=self.single_exponential, impl=self.impl)


class Top1MoE(hk.Module):
  """Top-1 MoE baseline -> ([b, m, d], aux); see :func:`jaxlab.moe.top1.top1_moe`."""

  def __init__(self, num_experts: int, expert_hidden: int, capacity_factor: float = 1.0,
               param_dtype: jnp.dtype = jnp.float32, name: Optional[str] = "top1_moe"):
    super().__init__(name=name)
    check_moe_settings("Top1MoE", num_experts, expert_hidden, capacity_factor)
    self.num_experts, self.expert_hidden = num_experts, expert_hidden
    self.capacity_factor, self.param_dtype = capacity_factor, param_dtype

  def __call__(self, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    check_tokens("Top1MoE", x)
    d = x.shape[-1]
    router = _get_group("router", lambda key: top1_lib.init_router(
        key, d, self.num_experts, self.param_dtype))
    experts = _get_group("experts", lambda key: experts_lib.init_experts(
        key, self.num_experts, d, self.expert_hidden, self.param_dtype))
    return top1_lib.top1_moe({"router": router, "experts": experts}, x,
                             capacity_factor=self.capacity_factor)
