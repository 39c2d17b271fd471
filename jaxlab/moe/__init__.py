"""Mixture-of-experts layers: Soft MoE (Puigcerver et al., ICLR 2024) and a Top-1 MoE baseline.

Pure functions (``soft_moe``, ``top1_moe`` and their ``init_*``) over parameter dicts with the
expert axis leading (``experts/{w1,b1,w2,b2}``); flax linen modules in ``jaxlab.moe.modules`` and
haiku modules in ``jaxlab.moe.haiku_modules`` wrap the same functions. One public name per
thing: the Soft MoE is ``soft_moe`` (pure function) and ``SoftMoE`` (flax module); its implementation
module is private (``_soft_moe``); ``"softmoe"`` is only a config value (``network.head``, ``model.mlp``).
Flax NNX modules of both layers, same names and parameter layout, are in ``jaxlab.moe.nnx``
(imported on first use).
"""

from jaxlab.lazy_submodules import lazy_submodules as _lazy_submodules

from jaxlab.moe.experts import apply_experts, init_experts, init_noisy_experts, noisy_expert_weights
from jaxlab.moe.modules import SoftMoE, Top1MoE
from jaxlab.moe._soft_moe import (combine_spread, init_router, init_soft_moe, num_slots, soft_moe,
                                  soft_moe_einsum, soft_moe_stats)
from jaxlab.moe.top1 import capacity, init_top1_moe, top1_moe

#: Sharding rule for expert parallelism: every expert parameter (and its optimizer moments) has
#: the expert axis first; use with :func:`jaxlab.train.tree_shardings`.
EXPERT_PARALLEL_RULES = ((r"experts/", ("expert",)),)

__all__ = [
    "EXPERT_PARALLEL_RULES", "SoftMoE", "Top1MoE", "apply_experts", "capacity", "combine_spread",
    "init_experts",
    "init_noisy_experts", "init_router", "init_soft_moe", "init_top1_moe", "nnx", "noisy_expert_weights", "num_slots",
    "soft_moe", "soft_moe_einsum", "soft_moe_stats", "top1_moe",
]


__getattr__, __dir__ = _lazy_submodules(__name__, ("nnx",), __all__)  # flax.nnx only for who uses it
