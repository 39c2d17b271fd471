"""Tokenised penultimate layers without a mixture: the ablation heads of "Don't flatten, tokenize!".

Sokar, Obando-Ceron, Courville, Larochelle, Castro, "Don't flatten, tokenize! Unlocking the key to
SoftMoE's efficacy in deep RL", ICLR 2025 (arXiv 2410.01930), ask which part of a Soft-MoE head
carries its gain over the flatten -> dense baseline: the tokenised encoder output, the soft
combination of tokens into slots, or the number of experts. These heads keep the tokens and drop
the router, so that a study can separate the first from the others:

* :class:`TokenDense` (``QNetwork(head="token_dense")``): the baseline's penultimate layer
  ``Dense(W) + ReLU`` applied to every token with shared weights, then flattened -> Q head. It is
  the dense baseline with the flatten moved after the layer instead of before it.
* :class:`TokenMLP` (``head="token_mlp"``): one Soft-MoE expert (``Dense(h) -> ReLU -> Dense(d)``,
  ``jaxlab.moe.experts``, the same parameter layout ``w1 [1, d, h] ...``) applied to every token,
  then flattened. This is a one-expert Soft MoE whose dispatch and combine weights are the identity
  (one slot per token, each slot one token), i.e. "SoftMoE-1" with its router removed; its parameters
  are exactly SoftMoE-1's (``capacity_factor=1``) minus the router's ``phi [d, 1, m]``.

Both return the post-ReLU hidden activations so that :mod:`jaxlab.rl.diagnostics` can score them.
"""

from __future__ import annotations

import flax.linen as nn
import jax

from jaxlab.errors import check, check_int
from jaxlab.moe import experts as experts_lib

_INIT = nn.initializers.xavier_uniform()


def _check_tokens(module: str, x: jax.Array) -> None:
  check(x.ndim == 3 and min(x.shape[1:]) >= 1, f"{module} takes tokens [batch, m, d]; got shape {x.shape}")


def token_mlp(experts: dict[str, jax.Array], x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """One expert MLP (``experts``: ``w1 [1, d, h]``, ``b1``, ``w2``, ``b2``) on every token of ``x`` [b, m, d].

  Returns (outputs [b, m, d], post-ReLU hidden activations [b, m, h]), computed in ``x``'s dtype.
  """
  b, m, d = x.shape
  experts_lib.check_experts(experts, d)
  rows = x.reshape(1, b * m, d)  # every token its own slot of the one expert
  hidden = nn.relu(rows @ experts["w1"].astype(x.dtype) + experts["b1"][:, None, :].astype(x.dtype))
  out = hidden @ experts["w2"].astype(x.dtype) + experts["b2"][:, None, :].astype(x.dtype)
  return out.reshape(b, m, d), hidden.reshape(b, m, hidden.shape[-1])


class TokenDense(nn.Module):
  """Tokens [b, m, d] -> (outputs [b, m, width], the same post-ReLU activations): ``relu(x W + c)`` per token.

  Attributes:
    width: units of the shared layer (the dense baseline's width times its multiplier).
  """

  width: int = 512

  @nn.compact
  def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    check_int(self.width, "TokenDense.width", meaning="units of the per-token layer")
    _check_tokens("TokenDense", x)
    h = nn.relu(nn.Dense(self.width, kernel_init=_INIT)(x))
    return h, h


class TokenMLP(nn.Module):
  """Tokens [b, m, d] -> (outputs [b, m, d], hidden [b, m, hidden]): one expert MLP per token, no router.

  Parameters ``{"w1": [1, d, h], "b1": [1, h], "w2": [1, h, d], "b2": [1, d]}`` under ``experts``,
  initialised as a Soft-MoE expert (:func:`jaxlab.moe.init_experts`).

  Attributes:
    hidden: the expert's hidden width (``QNetwork.expert_hidden``).
  """

  hidden: int = 512

  @nn.compact
  def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    check_int(self.hidden, "TokenMLP.hidden", meaning="hidden width of the per-token expert")
    _check_tokens("TokenMLP", x)
    d = x.shape[-1]
    init = lambda key: experts_lib.init_experts(key, 1, d, self.hidden)
    return token_mlp(self.param("experts", init), x)
