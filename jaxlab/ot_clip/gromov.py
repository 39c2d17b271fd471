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
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxlab.ot_clip.plans import sinkhorn_log_plan, uniform
from jaxlab.ot_clip.similarity import check_positive


def gw_linearization(plan: jax.Array, sim_x: jax.Array, sim_y: jax.Array) -> jax.Array:
  """L(P) of the square-loss GW term (Peyre et al. 2016, Prop. 1): [n, m] from an [n, m] plan."""
  row_mass, col_mass = plan.sum(axis=1), plan.sum(axis=0)
  return ((sim_x * sim_x) @ row_mass)[:, None] + ((sim_y * sim_y) @ col_mass)[None, :] - 2.0 * (
      sim_x @ plan @ sim_y.T)


def fgw_log_plan(cost: jax.Array, sim_x: jax.Array, sim_y: jax.Array, epsilon: Any,
                 a: jax.Array | None = None, b: jax.Array | None = None, *, alpha: float = 0.5,
                 tau_a: float = 1.0, tau_b: float = 1.0, num_outer: int = 3,
                 num_iterations: int = 5, implicit: bool = False, **sinkhorn_kwargs: Any) -> jax.Array:
  """log P of the (unbalanced, if tau < 1) fused Gromov-Wasserstein plan (Sec. 4, FGW / U-FG).

  Starts from the independent coupling a b^T and runs ``num_outer`` linearise-then-Sinkhorn steps
  of ``num_iterations`` Sinkhorn iterations each. All steps are differentiated through (unrolled);
  with ``implicit=True`` each inner Sinkhorn is solved to convergence and differentiated
  implicitly, the outer steps still by unrolling.
  """
  check_positive("epsilon", epsilon)
  if alpha < 0:
    raise ValueError(f"alpha must be >= 0, got {alpha}")
  if int(num_outer) < 1:
    raise ValueError(f"num_outer must be >= 1, got {num_outer}")
  n, m = cost.shape
  if sim_x.shape != (n, n) or sim_y.shape != (m, m):
    raise ValueError(f"structure matrices {sim_x.shape} and {sim_y.shape} do not fit cost {cost.shape}")
  a = uniform(n, cost.dtype) if a is None else a
  b = uniform(m, cost.dtype) if b is None else b
  plan = a[:, None] * b[None, :]
  for _ in range(int(num_outer)):
    cost_t = cost + alpha * gw_linearization(plan, sim_x, sim_y)
    log_plan = sinkhorn_log_plan(cost_t, epsilon, a, b, tau_a=tau_a, tau_b=tau_b,
                                 num_iterations=num_iterations, implicit=implicit, **sinkhorn_kwargs)
    plan = jnp.exp(log_plan)
  return log_plan
