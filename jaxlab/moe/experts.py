"""Stacked expert MLPs: ``Dense(h) -> ReLU -> Dense(d)`` per expert, weights on a leading expert axis.

As dopamine's ``ExpertModel`` (labs/moes/architectures/networks.py) under ``nn.vmap`` over experts:
Glorot-uniform kernels (fan-in/out of each expert's own matrix), zero biases, own parameters per
expert. Layout ``{"w1": [n, d, h], "b1": [n, h], "w2": [n, h, d], "b2": [n, d]}``, so one sharding
rule such as ``(r"experts/", ("expert",))`` splits every expert parameter over a mesh axis.

Noisy experts (dopamine's ``ExpertModel(noisy=True)``, whose first layer is a ``NoisyNetwork``;
Fortunato et al., "Noisy Networks for Exploration", ICLR 2018, Eqs. 8-11): ``init_noisy_experts``
adds the noise scales ``w1_sigma`` [n, d, h] and ``b1_sigma`` [n, h] beside the means ``w1``, ``b1``,
and ``noisy_expert_weights`` turns them into the plain layout for one noise draw, which every
expert and every slot shares (dopamine's key is a module attribute that neither the vmap over
experts nor the one over slots splits).
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


#: The noise scales a noisy expert layer adds to :data:`ExpertParams`.
NOISE_KEYS = ("w1_sigma", "b1_sigma")
#: Dopamine's initial noise scale, as ``jaxlab.rl.rainbow_layers.SIGMA_0``: sigma = 0.1 / sqrt(fan_in).
_SIGMA_0 = 0.1


def init_noisy_experts(key: jax.Array, num_experts: int, token_dim: int, hidden_dim: int,
                       dtype: jnp.dtype = jnp.float32) -> ExpertParams:
  r"""Parameters of ``num_experts`` MLPs whose first layer is a factorised noisy linear layer.

  As dopamine's ``ExpertModel(noisy=True)`` (labs/moes/architectures/networks.py:44-70 @ 5873f54)
  initialises them, per expert: the first layer's means ``w1`` [d, h] and ``b1`` [h] uniform on
  :math:`[-1/\sqrt{d}, 1/\sqrt{d}]` and its noise scales ``w1_sigma``, ``b1_sigma`` equal to
  :math:`0.1/\sqrt{d}` (``NoisyNetwork``, jax/networks.py:496-504; Fortunato et al. 2018, Sec. 3.2);
  the second layer Glorot-uniform with a zero bias, as :func:`init_experts`.

  Args:
    key: the PRNG key.
    num_experts: n.
    token_dim: d.
    hidden_dim: h.
    dtype: the parameters' dtype.

  Returns:
    ``{"w1", "b1", "w2", "b2", "w1_sigma", "b1_sigma"}``; :func:`noisy_expert_weights` makes the plain
    layout of one noise draw from it.

  Examples:
    >>> import jax
    >>> from jaxlab.moe import init_noisy_experts
    >>> p = init_noisy_experts(jax.random.key(0), num_experts=4, token_dim=64, hidden_dim=8)
    >>> sorted(p), p["w1_sigma"].shape
    (['b1', 'b1_sigma', 'b2', 'w1', 'w1_sigma', 'w2'], (4, 64, 8))
  """
  check_int(num_experts, "num_experts")
  check_int(token_dim, "token_dim")
  check_int(hidden_dim, "expert hidden_dim", meaning="width of each expert MLP")
  k_w1, k_b1, k_w2 = jax.random.split(key, 3)
  n, d, h = num_experts, token_dim, hidden_dim
  bound = 1.0 / math.sqrt(d)
  return {"w1": jax.random.uniform(k_w1, (n, d, h), dtype, -bound, bound),
          "b1": jax.random.uniform(k_b1, (n, h), dtype, -bound, bound),
          "w2": _glorot_per_expert(k_w2, (n, h, d), dtype), "b2": jnp.zeros((n, d), dtype),
          "w1_sigma": jnp.full((n, d, h), _SIGMA_0 * bound, dtype),
          "b1_sigma": jnp.full((n, h), _SIGMA_0 * bound, dtype)}


def noisy_expert_weights(experts: ExpertParams, f_p: jax.Array | None, f_q: jax.Array | None) -> ExpertParams:
  r"""The plain expert layout :math:`w_1 = \mu^w + \sigma^w \odot f_p f_q^\top`, :math:`b_1 = \mu^b +
  \sigma^b \odot f_q` for one noise draw shared by all experts (Fortunato et al. 2018, Eqs. 8-11).

  Args:
    experts: :func:`init_noisy_experts`' layout.
    f_p: [d, 1] the scaled input noise :math:`f(\epsilon_p)`, or None for the means.
    f_q: [1, h] the scaled output noise :math:`f(\epsilon_q)`, or None for the means.

  Returns:
    ``{"w1", "b1", "w2", "b2"}`` for :func:`apply_experts` or the Soft-MoE kernel, whose VJP gives
    ``w1``'s and ``b1``'s gradients; autodiff carries them to the means and the noise scales.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxlab.moe import init_noisy_experts, noisy_expert_weights
    >>> p = init_noisy_experts(jax.random.key(0), num_experts=4, token_dim=6, hidden_dim=8)
    >>> w = noisy_expert_weights(p, jnp.ones((6, 1)), jnp.ones((1, 8)))  # f_p f_q^T = 1: mu + sigma
    >>> sorted(w), bool(jnp.allclose(w["w1"], p["w1"] + p["w1_sigma"]))
    (['b1', 'b2', 'w1', 'w2'], True)
  """
  check(all(k in experts for k in NOISE_KEYS), f"noisy expert params need {list(NOISE_KEYS)}; got {sorted(experts)}")
  plain = {k: v for k, v in experts.items() if k not in NOISE_KEYS}
  if f_p is None:
    return plain
  return {**plain, "w1": experts["w1"] + experts["w1_sigma"] * (f_p * f_q)[None],
          "b1": experts["b1"] + experts["b1_sigma"] * f_q}


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
