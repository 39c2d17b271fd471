"""OT-CLIP's loss family: KL between the ground-truth coupling I/n and an entropic OT plan.

Shi, Fan & Yan, ICML 2024, Sec. 3 (inverse OT): training CLIP fits the cost C = 1 - S so that the
inner entropic plan P^eps(C) matches the ground-truth coupling P~ = I/n,

  L = KL(P~ | P) = sum_i (1/n) log((1/n) / P_ii)  [+ sum_ij P_ij - 1 if P is unnormalised],

with eps = 1 / logit_scale. Only the inner constraint set changes across the family (Sec. 3.1,
Sec. 4); with the row marginal alone the loss *is* InfoNCE (``one_sided_ot_loss``). The KL is the
paper's objective; the official code instead feeds P to a cross-entropy as if it were logits.

Inputs (every loss): non-empty float [n, d] embeddings of equal shapes, computed in at least
float32 (bf16/f16 are upcast; the loss is float32 then, the gradients have the embeddings'
dtype). A concrete logit scale must be a finite scalar > 0 and every concrete hyper-parameter is
checked (InputError naming it); a traced scale that is <= 0 or not finite gives a NaN loss.
Finite values and gradients at logit scales 1 to 1e4 (the unbalanced plans in the log domain).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check_bool, check_option_names, check_positive, check_scalar, is_traced
from jaxlab.ot_clip.checks import compute_dtype
from jaxlab.ot_clip.contrastive import check_logit_scale, guard_logit_scale
from jaxlab.ot_clip.gromov import fgw_log_plan
from jaxlab.ot_clip.plans import check_tau, dbot_log_plan, is_balanced, one_sided_log_plan, sinkhorn_log_plan
from jaxlab.ot_clip.similarity import epsilon_from_logit_scale, normalized_pair

# Solver options the Sinkhorn-based losses pass through to ``plans.sinkhorn_log_plan``.
SINKHORN_OPTIONS = ("use_ott", "threshold", "max_iterations")
# C = 1 - cos lies in [0, 2], so log K = -C * logit_scale spans at most 2 * logit_scale.
COST_RANGE = 2.0
# Relative slack of the max_logit_scale promise (exp(log 100) in float32 is 100.00001).
MAX_SCALE_RTOL = 1e-4


def kl_from_identity(log_plan: jax.Array, unnormalized: bool = False) -> jax.Array:
  """KL(I/n | P) from log P (Sec. 3, eq. for the outer loss of inverse OT).

  KL(I/n | P) = -1/n sum_i log P_ii - log n. For an unbalanced plan whose mass is not 1 we use
  the generalised KL between positive measures, which adds sum(P) - 1 (and equals the former
  when the mass is 1). Computed in at least float32.
  """
  shape = tuple(np.shape(log_plan))
  if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
    raise InputError(f"the ground-truth coupling I/n needs a non-empty square [n, n] plan, got shape {shape}")
  log_plan = jnp.asarray(log_plan)
  log_plan = log_plan.astype(compute_dtype(log_plan))
  n = shape[0]
  kl = -jnp.mean(jnp.diagonal(log_plan)) - jnp.log(jnp.asarray(n, log_plan.dtype))
  if unnormalized:
    kl = kl + jnp.sum(jnp.exp(log_plan)) - 1.0
  return kl


def _cost_and_eps(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any
                  ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """(cost, eps, normalised x, normalised y), all in the compute dtype."""
  check_logit_scale(logit_scale)
  x, y = normalized_pair(image_emb, text_emb)
  cost = 1.0 - x @ y.T
  return cost, epsilon_from_logit_scale(logit_scale, cost.dtype), x, y


def _check_sinkhorn_options(loss: str, options: dict[str, Any]) -> None:
  check_option_names(options, loss, SINKHORN_OPTIONS)


def one_sided_ot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any,
                      symmetric: bool = True) -> jax.Array:
  """KL(I/n | P) for the row-constrained plan P = (1/n) softmax_j(S / eps) (Sec. 3.1).

  Equals InfoNCE image->text exactly; ``symmetric`` averages it with the column-constrained
  (text->image) problem, which is CLIP's symmetric loss.
  """
  check_bool(symmetric, "symmetric", got=True)
  cost, eps, _, _ = _cost_and_eps(image_emb, text_emb, logit_scale)
  loss = kl_from_identity(one_sided_log_plan(cost, eps, axis=1))
  if symmetric:
    loss = 0.5 * (loss + kl_from_identity(one_sided_log_plan(cost, eps, axis=0)))
  return guard_logit_scale(loss, logit_scale)


def entropic_ot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
                     num_iterations: int = 5, implicit: bool = False, **sinkhorn_options: Any) -> jax.Array:
  """KL(I/n | P) for the two-sided Sinkhorn plan in U(1/n, 1/n) (Sec. 4, entropic OT).

  Both marginals are constrained, so one loss covers both directions: at convergence the plan
  of C^T is the transpose of the plan of C. ``sinkhorn_options``: use_ott, threshold,
  max_iterations (see ``plans.sinkhorn_log_plan``).
  """
  _check_sinkhorn_options("entropic_ot_loss", sinkhorn_options)
  cost, eps, _, _ = _cost_and_eps(image_emb, text_emb, logit_scale)
  log_plan = sinkhorn_log_plan(cost, eps, num_iterations=num_iterations, implicit=implicit, **sinkhorn_options)
  return guard_logit_scale(kl_from_identity(log_plan), logit_scale)


def unbalanced_ot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
                       tau_a: float = 0.9, tau_b: float = 0.9, num_iterations: int = 5,
                       implicit: bool = False, max_logit_scale: float | None = None,
                       **sinkhorn_options: Any) -> jax.Array:
  """Generalised KL(I/n | P) for the unbalanced plan, marginals penalised by KL (Sec. 4).

  tau = lambda / (lambda + eps) in (0, 1] (ott's convention); tau = 1 recovers
  ``entropic_ot_loss``. Finite at any logit scale: the unrolled updates run in the log domain
  unless the scale is known to keep the faster absorbed updates in float32's range
  ((1 - min tau) * 2 * scale <= 30, ``plans.absorbed_updates_are_safe``): a concrete scale is
  known; a traced one only through ``max_logit_scale``, a static promise scale <= max_logit_scale
  (``make_two_tower_loss`` passes the model's clamp, 100) that turns the loss into NaN if broken.
  """
  _check_sinkhorn_options("unbalanced_ot_loss", sinkhorn_options)
  check_tau(tau_a, tau_b)
  if max_logit_scale is not None:
    check_scalar(max_logit_scale, "max_logit_scale")
    check_positive(max_logit_scale, "max_logit_scale", got=True)
  cost, eps, _, _ = _cost_and_eps(image_emb, text_emb, logit_scale)
  scale_bound = max_logit_scale if is_traced(logit_scale) else logit_scale
  kernel_range = None if scale_bound is None else COST_RANGE * float(scale_bound) * (1 + MAX_SCALE_RTOL)
  log_plan = sinkhorn_log_plan(cost, eps, tau_a=tau_a, tau_b=tau_b, num_iterations=num_iterations,
                               implicit=implicit, log_kernel_range=kernel_range, **sinkhorn_options)
  loss = kl_from_identity(log_plan, unnormalized=True)
  if max_logit_scale is not None and is_traced(logit_scale):
    loss = jnp.where(logit_scale <= max_logit_scale * (1 + MAX_SCALE_RTOL), loss, jnp.nan)
  return guard_logit_scale(loss, logit_scale)


def dbot_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
              lower: float = 0.5, upper: float = 2.0, num_iterations: int = 5) -> jax.Array:
  """KL(I/n | P) for the double-bounded plan: rows exact, columns within [lower, upper] / n (Sec. 4).

  0 < lower <= 1 <= upper (upper may be inf), scalars or one per column.
  """
  cost, eps, _, _ = _cost_and_eps(image_emb, text_emb, logit_scale)
  log_plan = dbot_log_plan(cost, eps, lower=lower, upper=upper, num_iterations=num_iterations)
  return guard_logit_scale(kl_from_identity(log_plan), logit_scale)


def fgw_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *, alpha: float = 0.5,
             num_outer: int = 3, num_iterations: int = 5, implicit: bool = False,
             tau_a: float = 1.0, tau_b: float = 1.0, **sinkhorn_options: Any) -> jax.Array:
  """KL(I/n | P) for the fused Gromov-Wasserstein plan (Sec. 4, FGW); tau < 1 gives U-FG.

  alpha in [0, 1] weighs the structure term; num_outer >= 1 linearisation steps.
  """
  _check_sinkhorn_options("fgw_loss", sinkhorn_options)
  check_tau(tau_a, tau_b)
  cost, eps, feat_x, feat_y = _cost_and_eps(image_emb, text_emb, logit_scale)
  # Structure: within-batch cosine similarities, passed as their factors (normalised embeddings).
  log_plan = fgw_log_plan(cost, feat_x, feat_y, eps, alpha=alpha, tau_a=tau_a, tau_b=tau_b,
                          num_outer=num_outer, num_iterations=num_iterations, implicit=implicit,
                          **sinkhorn_options)
  loss = kl_from_identity(log_plan, unnormalized=not is_balanced(tau_a, tau_b))
  return guard_logit_scale(loss, logit_scale)


def ufgw_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, *,
              tau_a: float = 0.9, tau_b: float = 0.9, **kwargs: Any) -> jax.Array:
  """Generalised KL(I/n | P) for the unbalanced fused Gromov plan (Sec. 4, U-FG).

  Takes ``fgw_loss``'s other hyper-parameters (alpha, num_outer, num_iterations, implicit and
  the Sinkhorn options).
  """
  return fgw_loss(image_emb, text_emb, logit_scale, tau_a=tau_a, tau_b=tau_b, **kwargs)
