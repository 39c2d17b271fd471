"""Fused Gromov-Wasserstein plans (FGW and unbalanced U-FG) for OT-CLIP, on ott's linear Sinkhorn.

Shi, Fan & Yan, ICML 2024, Sec. 4 ("fused Gromov OT"): besides the cross-modal cost C, the plan
should match the *structure* of the two batches, given by the within-batch similarity matrices
S_x = X X^T (images) and S_y = Y Y^T (texts). We solve

  min_P  <C, P> + (alpha / 2) sum_ijkl (S_x[i,k] - S_y[j,l])^2 P_ij P_kl - eps H(P)
         [+ lambda_a KL(P 1 | a) + lambda_b KL(P^T 1 | b) for U-FG]

by mirror descent on the linearisation (Peyre, Cuturi & Solomon, ICML 2016, eq. 6-8): at each
outer step the gradient C_t = C + alpha L(P_t) is used as the cost of an entropic OT solve, with

  L(P)_ij = sum_kl (S_x[i,k] - S_y[j,l])^2 P_kl
          = (S_x^2 P 1)_i + (S_y^2 P^T 1)_j - 2 (S_x P S_y)_ij     (S^2 elementwise).

For balanced marginals the first two terms are row/column constants that the Sinkhorn
potentials absorb, leaving the paper's structural cost -2 alpha S_x P S_y ("C - D_1 P D_2^T").
For U-FG they depend on the plan's marginals and keep the objective bounded below, which the
bare bilinear term is not once the mass may grow.

The structure matrices are Gram matrices of d-dimensional features (d << batch), so L(P) is
computed from the features in O(B^2 d) without forming S_x, S_y or the O(B^3) product S_x P S_y:
S_x P S_y = X (X^T P Y) Y^T and (S_x^2 r)_i = x_i^T (X^T diag(r) X) x_i.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check_int, check_probability
from jaxlab.ot_clip.checks import check_floating
from jaxlab.ot_clip.plans import check_cost, check_epsilon, check_marginal, check_tau, sinkhorn_log_plan, uniform


def gw_linearization(plan: jax.Array, feat_x: jax.Array, feat_y: jax.Array) -> jax.Array:
  """L(P) of the square-loss GW term (Peyre et al. 2016, Prop. 1) for S_x = X X^T, S_y = Y Y^T.

  [n, m] from an [n, m] plan and features X [n, d], Y [m, d'], in O(n m (d + d')).
  """
  row_mass, col_mass = plan.sum(axis=1), plan.sum(axis=0)
  m_x = feat_x.T @ (row_mass[:, None] * feat_x)  # X^T diag(r) X, [d, d]
  m_y = feat_y.T @ (col_mass[:, None] * feat_y)
  row_term = jnp.sum((feat_x @ m_x) * feat_x, axis=1)  # (S_x^2 r)_i
  col_term = jnp.sum((feat_y @ m_y) * feat_y, axis=1)
  core = (feat_x.T @ plan) @ feat_y                  # X^T P Y, [d, d']
  return row_term[:, None] + col_term[None, :] - 2.0 * (feat_x @ core) @ feat_y.T


def fgw_log_plan(cost: jax.Array, feat_x: jax.Array, feat_y: jax.Array, epsilon: Any,
                 a: jax.Array | None = None, b: jax.Array | None = None, *, alpha: float = 0.5,
                 tau_a: float = 1.0, tau_b: float = 1.0, num_outer: int = 3,
                 num_iterations: int = 5, implicit: bool = False, **sinkhorn_kwargs: Any) -> jax.Array:
  """log P of the (unbalanced, if tau < 1) fused Gromov-Wasserstein plan (Sec. 4, FGW / U-FG).

  The structure matrices are S_x = feat_x feat_x^T and S_y = feat_y feat_y^T (for OT-CLIP the
  L2-normalised embeddings, so S are the within-batch cosine similarities).

  Starts from the independent coupling a b^T and runs ``num_outer`` linearise-then-Sinkhorn steps
  of ``num_iterations`` Sinkhorn iterations each. All steps are differentiated through (unrolled);
  with ``implicit=True`` each inner Sinkhorn is solved to convergence and differentiated
  implicitly, the outer steps still by unrolling. ``alpha`` (the weight of the structure term)
  must be in [0, 1]; concrete hyper-parameters are checked (InputError).
  """
  cost = check_cost(cost)
  check_epsilon(epsilon)
  check_probability(alpha, "alpha", got=True)
  num_outer = check_int(num_outer, "num_outer", got=True)
  check_tau(tau_a, tau_b)
  n, m = cost.shape
  fx, fy = tuple(np.shape(feat_x)), tuple(np.shape(feat_y))
  if len(fx) != 2 or len(fy) != 2 or fx[0] != n or fy[0] != m:
    raise InputError(f"features {fx} and {fy} do not fit cost {cost.shape}: expected [{n}, d] and [{m}, d']")
  check_floating(feat_x, "feat_x")
  check_floating(feat_y, "feat_y")
  feat_x, feat_y = jnp.asarray(feat_x, cost.dtype), jnp.asarray(feat_y, cost.dtype)
  a = uniform(n, cost.dtype) if a is None else check_marginal("a", a, n, cost.dtype)
  b = uniform(m, cost.dtype) if b is None else check_marginal("b", b, m, cost.dtype)
  plan = a[:, None] * b[None, :]
  for _ in range(num_outer):
    cost_t = cost + alpha * gw_linearization(plan, feat_x, feat_y)
    log_plan = sinkhorn_log_plan(cost_t, epsilon, a, b, tau_a=tau_a, tau_b=tau_b,
                                 num_iterations=num_iterations, implicit=implicit, **sinkhorn_kwargs)
    plan = jnp.exp(log_plan)
  return log_plan
