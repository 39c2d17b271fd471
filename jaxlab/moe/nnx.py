"""Flax NNX modules of the Soft MoE and Top-1 MoE layers, over the same pure functions as the linen ones.

``SoftMoE`` runs :func:`jaxlab.moe.soft_moe` and ``Top1MoE`` :func:`jaxlab.moe.top1_moe` on
parameters in the linen modules' layout (``router/phi`` [d, n, p], ``experts/{w1,b1,w2,b2}`` with
the expert axis leading; :mod:`jaxlab.nnx_params`), so ``EXPERT_PARALLEL_RULES`` shards them and
a linen ``params`` tree loads with ``load_linen_params``. An NNX module is built with its shapes:
the token dim ``d`` and, for Soft MoE, the slot count (from ``num_tokens`` or ``num_slots``),
which the linen modules read from their first input.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from flax import nnx

from jaxlab import errors
from jaxlab.errors import check
from jaxlab.moe import _soft_moe as soft_lib
from jaxlab.moe import experts as experts_lib
from jaxlab.moe import top1 as top1_lib
from jaxlab.moe.modules import check_moe_settings, check_tokens
from jaxlab.nnx_params import LinenLayout, param_dict, param_values

__all__ = ["SoftMoE", "Top1MoE"]


class SoftMoE(LinenLayout):
  """Soft MoE layer (Puigcerver et al., ICLR 2024, Eqs. 1-3): the NNX twin of :class:`jaxlab.moe.SoftMoE`.

  Parameters ``router/phi`` [d, n, p] (and ``router/scale`` with ``normalize``) and
  ``experts/{w1, b1, w2, b2}``, initialised as the linen module's (:func:`jaxlab.moe.init_router`,
  :func:`jaxlab.moe.init_experts`) from ``rngs.params()``.

  Args:
    token_dim: d, the width of each token.
    num_experts: n.
    expert_hidden: hidden width h of each expert MLP.
    num_tokens: m, the tokens per sample the slots are sized for: slots per expert
      p = ceil(m * capacity_factor / n), as the linen module computes from its first input.
      The layer then takes any number of tokens. Needed unless ``num_slots`` is given.
    capacity_factor: see ``num_tokens``.
    num_slots: slots per expert p (an int >= 1), overriding ``num_tokens`` and ``capacity_factor``.
    normalize: l2-normalise tokens and phi for the logits, with a learned scale.
    single_exponential: see :func:`jaxlab.moe.soft_moe` (only with ``impl="cpu_kernel"``).
    impl: ``"auto"``, ``"cpu_kernel"`` or ``"einsum"``; see :func:`jaxlab.moe.soft_moe`.
    param_dtype: dtype of the parameters.
    noisy_experts: each expert's first layer is a factorised noisy linear layer
      (:func:`jaxlab.moe.init_noisy_experts`, dopamine's ``ExpertModel(noisy=True)``); a call takes the
      noise draw all experts and slots share as ``expert_noise``, as the linen module.
    rngs: the ``params`` stream initialises the parameters.

  Raises:
    InputError: for a size or setting that builds no layer (as the linen module's messages).

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.moe.nnx import SoftMoE
    >>> layer = SoftMoE(8, num_experts=4, expert_hidden=16, num_tokens=6, rngs=nnx.Rngs(0))
    >>> layer.router["phi"].shape  # p = ceil(6 / 4)
    (8, 4, 2)
    >>> y, stats = layer(jnp.ones((3, 6, 8)))
    >>> y.shape, stats["expert_load"].shape
    ((3, 6, 8), (4,))
  """

  def __init__(self, token_dim: int, num_experts: int, expert_hidden: int, *, num_tokens: Optional[int] = None,
               capacity_factor: float = 1.0, num_slots: Optional[int] = None, normalize: bool = False,
               single_exponential: bool = False, impl: str = "auto", param_dtype: jnp.dtype = jnp.float32,
               noisy_experts: bool = False, rngs: nnx.Rngs):
    check_moe_settings("SoftMoE", num_experts, expert_hidden, capacity_factor, num_slots)
    errors.check_bool(noisy_experts, "SoftMoE.noisy_experts")
    soft_lib.check_impl(impl, single_exponential, "SoftMoE.impl", "SoftMoE.single_exponential")
    errors.check_int(token_dim, "SoftMoE.token_dim", meaning="width of each token")
    check(num_slots is not None or num_tokens is not None,
          "SoftMoE needs num_tokens (slots per expert = ceil(num_tokens * capacity_factor / num_experts)) "
          "or num_slots; both are None")
    if num_slots is None:
      errors.check_int(num_tokens, "SoftMoE.num_tokens", meaning="tokens per sample the slots are sized for")
      num_slots = soft_lib.num_slots(num_tokens, num_experts, capacity_factor)
    self.router = param_dict(soft_lib.init_router(rngs.params(), token_dim, num_experts, num_slots, normalize,
                                                  param_dtype))
    init = experts_lib.init_noisy_experts if noisy_experts else experts_lib.init_experts
    self.experts = param_dict(init(rngs.params(), num_experts, token_dim, expert_hidden, param_dtype))
    self.normalize, self.single_exponential, self.impl = normalize, single_exponential, impl
    self.noisy_experts = noisy_experts

  def __call__(self, x: jax.Array, expert_noise: tuple[jax.Array, jax.Array] | None = None
               ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Tokens [b, m, d] -> (outputs [b, m, d], routing statistics); see :func:`jaxlab.moe.soft_moe`.

    Args:
      x: tokens [batch, tokens, token_dim].
      expert_noise: with ``noisy_experts``, the draw ``(f_p [d, 1], f_q [1, h])`` all experts share
        (``jaxlab.rl.rainbow_layers.factorised_noise``), or None for the means.

    Returns:
      ``(y, stats)`` as :func:`jaxlab.moe.soft_moe` returns them.
    """
    check(self.noisy_experts or expert_noise is None,
          "SoftMoE got expert_noise but noisy_experts=False; set SoftMoE.noisy_experts=True for noisy experts")
    check_tokens("SoftMoE", x)
    experts = param_values(self.experts)
    if self.noisy_experts:
      experts = experts_lib.noisy_expert_weights(experts, *(expert_noise or (None, None)))
    params = {"router": param_values(self.router), "experts": experts}
    return soft_lib.soft_moe(params, x, normalize=self.normalize, single_exponential=self.single_exponential,
                             impl=self.impl)


class Top1MoE(LinenLayout):
  """Top-1 MoE baseline (dopamine's ``MoE`` with a top-1 router): the NNX twin of :class:`jaxlab.moe.Top1MoE`.

  Parameters ``router/kernel`` [d, n] and ``experts/{w1, b1, w2, b2}``, initialised as the linen
  module's from ``rngs.params()``.

  Args:
    token_dim: d, the width of each token.
    num_experts: n.
    expert_hidden: hidden width h of each expert MLP.
    capacity_factor: each expert takes ceil(m * capacity_factor / n) tokens per sample.
    param_dtype: dtype of the parameters.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.moe.nnx import Top1MoE
    >>> layer = Top1MoE(8, num_experts=4, expert_hidden=16, rngs=nnx.Rngs(0))
    >>> y, aux = layer(jnp.ones((3, 6, 8)))
    >>> y.shape, sorted(aux)[:2]
    ((3, 6, 8), ['dropped_fraction', 'expert_load'])
  """

  def __init__(self, token_dim: int, num_experts: int, expert_hidden: int, *, capacity_factor: float = 1.0,
               param_dtype: jnp.dtype = jnp.float32, rngs: nnx.Rngs):
    check_moe_settings("Top1MoE", num_experts, expert_hidden, capacity_factor)
    errors.check_int(token_dim, "Top1MoE.token_dim", meaning="width of each token")
    self.router = param_dict(top1_lib.init_router(rngs.params(), token_dim, num_experts, param_dtype))
    self.experts = param_dict(experts_lib.init_experts(rngs.params(), num_experts, token_dim, expert_hidden,
                                                       param_dtype))
    self.capacity_factor = capacity_factor

  def __call__(self, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Tokens [b, m, d] -> (outputs [b, m, d], aux losses and statistics); see :func:`jaxlab.moe.top1.top1_moe`.

    Args:
      x: tokens [batch, tokens, token_dim].

    Returns:
      ``(y, aux)`` as :func:`jaxlab.moe.top1_moe` returns them.
    """
    check_tokens("Top1MoE", x)
    params = {"router": param_values(self.router), "experts": param_values(self.experts)}
    return top1_lib.top1_moe(params, x, capacity_factor=self.capacity_factor)
