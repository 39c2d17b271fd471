"""OT-CLIP's loss family: KL between the ground-truth coupling I/n and an entropic OT plan.

Shi, Fan & Yan, ICML 2024, Sec. 3 (inverse OT): training CLIP fits the cost C = 1 - S so that the
inner entropic plan P^eps(C) matches the ground-truth coupling P~ = I/n,

  L = KL(P~ | P) = sum_i (1/n) log((1/n) / P_ii)  [+ sum_ij P_ij - 1 if P is unnormalised],

with eps = 1 / logit_scale. Only the inner constraint set changes across the family (Sec. 3.1,
Sec. 4); with the row marginal alone the loss *is* InfoNCE (``one_sided_ot_loss``). The KL is the
paper's objective; the official code instead feeds P to a cross-entropy as if it were logits.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxlab.ot_clip.gromov import fgw_log_plan
from jaxlab.ot_clip.plans import dbot_log_plan, one_sided_log_plan, sinkhorn_log_plan
from jaxlab.ot_clip.similarity import (check_embeddings, cosine_cost, epsilon_from_logit_scale,
                                       gather_batch, l2_normalize)


def kl_from_identity(log_plan: jax.Array, unnormalized: bool = False) -> jax.Array:
  """KL(I/n | P) from log P (Sec. 3, eq. for the outer loss of inverse OT).

  KL(I/n | P) = -1/n sum_i log P_ii - log n. For an unbalanced plan whose mass is not 1 we use
  the generalised KL between positive measures, which adds sum(P) - 1 (and equals the former
  when the mass is 1).
  """
  n, m = log_plan.shape
  if n != m:
    raise ValueError(f"the ground-truth coupling I/n needs a square plan, got {log_plan.shape}")
  kl = -jnp.mean(jnp.diagonal(log_plan)) - jnp.log(jnp.asarray(n, log_plan.dtype))
  if unnormalized:
    kl = kl + jnp.sum(jnp.exp(log_plan)) - 1.0
  return kl


def _cost_and_eps(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any) -> tuple[jax.Array, jax.Array]:
  return cosine_cost(image_emb, text_emb), epsilon_from_logit_scale(logit_scale)


def one_sided_ot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any,
                      symmetric: bool = True) -> jax.Array:
  """KL(I/n | P) for the row-constrained plan P = (1/n) softmax_j(S / eps) (Sec. 3.1).

  Equals InfoNCE image->text exactly; ``symmetric`` averages it with the column-constrained
  (text->image) problem, which is CLIP's symmetric loss.
  """
  cost, eps = _cost_and_eps(image_emb, text_emb, logit_scale)
  loss = kl_from_identity(one_sided_log_plan(cost, eps, axis=1))
  if symmetric:
    loss = 0.5 * (loss + kl_from_identity(one_sided_log_plan(cost, eps, axis=0)))
  return loss


def entropic_ot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
                     num_iterations: int = 5, implicit: bool = False, **kwargs: Any) -> jax.Array:
  """KL(I/n | P) for the two-sided Sinkhorn plan in U(1/n, 1/n) (Sec. 4, entropic OT).

  Both marginals are constrained, so one loss covers both directions: at convergence the plan
  of C^T is the transpose of the plan of C.
  """
  cost, eps = _cost_and_eps(image_emb, text_emb, logit_scale)
  log_plan = sinkhorn_log_plan(cost, eps, num_iterations=num_iterations, implicit=implicit, **kwargs)
  return kl_from_identity(log_plan)


def unbalanced_ot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
                       tau_a: float = 0.9, tau_b: float = 0.9, num_iterations: int = 5,
                       implicit: bool = False, **kwargs: Any) -> jax.Array:
  """Generalised KL(I/n | P) for the unbalanced plan, marginals penalised by KL (Sec. 4).

  tau = lambda / (lambda + eps) in ott's convention; tau = 1 recovers ``entropic_ot_loss``.
  """
  cost, eps = _cost_and_eps(image_emb, text_emb, logit_scale)
  log_plan = sinkhorn_log_plan(cost, eps, tau_a=tau_a, tau_b=tau_b, num_iterations=num_iterations,
                               implicit=implicit, **kwargs)
  return kl_from_identity(log_plan, unnormalized=True)


def dbot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
              lower: float = 0.5, upper: float = 2.0, num_iterations: int = 5) -> jax.Array:
  """KL(I/n | P) for the double-bounded plan: rows exact, columns within [lower, upper] / n (Sec. 4)."""
  cost, eps = _cost_and_eps(image_emb, text_emb, logit_scale)
  log_plan = dbot_log_plan(cost, eps, lower=lower, upper=upper, num_iterations=num_iterations)
  return kl_from_identity(log_plan)


def fgw_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *, alpha: float = 0.5,
             num_outer: int = 3, num_iterations: int = 5, implicit: bool = False,
             tau_a: float = 1.0, tau_b: float = 1.0, **kwargs: Any) -> jax.Array:
  """KL(I/n | P) for the fused Gromov-Wasserstein plan (Sec. 4, FGW); tau < 1 gives U-FG."""
  check_embeddings(image_emb, text_emb)
  cost, eps = _cost_and_eps(image_emb, text_emb, logit_scale)
  # Structure: within-batch cosine similarities, passed as their factors (normalised embeddings).
  feat_x, feat_y = l2_normalize(gather_batch(image_emb)), l2_normalize(gather_batch(text_emb))
  log_plan = fgw_log_plan(cost, feat_x, feat_y, eps, alpha=alpha, tau_a=tau_a, tau_b=tau_b,
                          num_outer=num_outer, num_iterations=num_iterations, implicit=implicit,
                          **kwargs)
  return kl_from_identity(log_plan, unnormalized=tau_a < 1.0 or tau_b < 1.0)


def ufgw_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
              tau_a: float = 0.9, tau_b: float = 0.9, **kwargs: Any) -> jax.Array:
  """Generalised KL(I/n | P) for the unbalanced fused Gromov plan (Sec. 4, U-FG)."""
  return fgw_loss(image_emb, text_emb, logit_scale, tau_a=tau_a, tau_b=tau_b, **kwargs)
