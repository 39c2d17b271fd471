"""Entropic transport plans of OT-CLIP's inner problem, returned as log P (stable for small epsilon).

Every solver here returns log P with P = exp((f_i + g_j - C_ij) / epsilon) for dual potentials f, g,
so a loss can read log P_ii without exponentiating and re-taking logs. Shi, Fan & Yan, ICML 2024,
Sec. 3-4: CLIP's inner problem is min_P <C, P> - epsilon H(P) over a constraint set; the set decides
the loss:

* one-sided (only P 1 = a): closed form, recovers InfoNCE (Sec. 3.1);
* two-sided U(a, b): Sinkhorn (Sec. 4, "entropic OT");
* unbalanced: KL marginal penalties (ott's tau_a, tau_b) (Sec. 4);
* DBOT: P 1 = a with lower <= P^T 1 <= upper (Sec. 4, double-bounded OT).

ott-jax 0.6 pitfalls guarded here: (1) its loop runs ``max_iterations // inner_iterations`` blocks,
so the default ``inner_iterations=10`` with 5 iterations silently runs *zero*; (2) ``epsilon=None``
picks a stop-gradiented data-dependent default, so we always pass epsilon; (3) with
``min_iterations == max_iterations`` its unrolled backward pass visits the checkpoints in the
wrong order (wrong gradients beyond one block). Training therefore unrolls its own few updates
(the same updates as ott's, cheaper to differentiate); ott solves to convergence with implicit
differentiation, and runs inference.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ott.geometry import geometry
from ott.problems.linear import linear_problem
from ott.solvers.linear import implicit_differentiation, sinkhorn

from jaxlab.ot_clip.similarity import check_positive


def uniform(n: int, dtype: Any = jnp.float32) -> jax.Array:
  return jnp.full((n,), 1.0 / n, dtype)


def _check_iterations(name: str, value: int) -> None:
  if int(value) < 1:
    raise ValueError(f"{name} must be >= 1, got {value}")


def one_sided_log_plan(cost: jax.Array, epsilon: Any, a: jax.Array | None = None,
                       axis: int = 1) -> jax.Array:
  """log P for the entropic OT problem with only one marginal constrained (Sec. 3.1).

  With only P 1 = a (axis=1), the Lagrangian decouples per row and
  P_ij = a_i exp(-C_ij / eps) / sum_k exp(-C_ik / eps) = a_i softmax_j(S_ij / eps) for C = 1 - S.
  ``axis=0`` constrains the columns instead (the text -> image direction).
  """
  check_positive("epsilon", epsilon)
  n = cost.shape[1 - axis]
  a = uniform(n, cost.dtype) if a is None else a
  log_a = jnp.expand_dims(jnp.log(a), axis)
  return log_a + jax.nn.log_softmax(-cost / epsilon, axis=axis)


def make_sinkhorn(num_iterations: int = 5, implicit: bool = False, threshold: float = 1e-6,
                  max_iterations: int = 2000) -> sinkhorn.Sinkhorn:
  """An ott Sinkhorn solver that does what its arguments say.

  Unrolled (default, as in training): exactly ``num_iterations`` (g, f) updates, gradients by
  backpropagating through them (``max_iterations // inner_iterations`` is 1, never 0).
  Implicit: run to ``threshold`` (at most ``max_iterations``) and differentiate the optimality
  conditions (ott's ImplicitDiff), which is only right once the solver has converged.
  """
  if implicit:
    _check_iterations("max_iterations", max_iterations)
    return sinkhorn.Sinkhorn(threshold=threshold, max_iterations=max_iterations, inner_iterations=10,
                             min_iterations=0, implicit_diff=implicit_differentiation.ImplicitDiff())
  _check_iterations("num_iterations", num_iterations)
  # One block of exactly num_iterations: min_iterations=0 < max keeps ott on its while-loop path,
  # whose backward pass replays the checkpointed states correctly. With min == max (the "scan"
  # path) ott 0.6's backward starts from iteration 0 instead of the last block and returns wrong
  # gradients for more than one block (tests/ot_clip/test_plans.py checks against finite
  # differences). inner_iterations == max_iterations means the loop condition is first checked
  # after the block, so the count is exact whatever the threshold.
  return sinkhorn.Sinkhorn(min_iterations=0, max_iterations=num_iterations,
                           inner_iterations=num_iterations, implicit_diff=None, threshold=threshold)


def ott_sinkhorn_potentials(cost: jax.Array, epsilon: Any, a: jax.Array, b: jax.Array, *,
                            tau_a: float = 1.0, tau_b: float = 1.0, num_iterations: int = 5,
                            implicit: bool = False, threshold: float = 1e-6,
                            max_iterations: int = 2000) -> tuple[jax.Array, jax.Array]:
  """Dual potentials (f, g) from ott's Sinkhorn, with epsilon always passed explicitly."""
  geom = geometry.Geometry(cost_matrix=cost, epsilon=epsilon)
  prob = linear_problem.LinearProblem(geom, a=a, b=b, tau_a=tau_a, tau_b=tau_b)
  out = make_sinkhorn(num_iterations, implicit, threshold, max_iterations)(prob)
  return out.f, out.g


def unrolled_sinkhorn_log_plan(log_kernel: jax.Array, log_a: jax.Array, log_b: jax.Array, *,
                               tau_a: float = 1.0, tau_b: float = 1.0,
                               num_iterations: int = 5) -> jax.Array:
  """log P after exactly ``num_iterations`` Sinkhorn updates, written for backprop.

  The same (g, then f) updates as ott's ``Sinkhorn.lse_step`` from zero potentials, on potentials
  divided by eps: beta = tau_b (log b - LSE_i(log K_ij + alpha_i)), alpha = tau_a (log a -
  LSE_j(log K_ij + beta_j)) (Cuturi 2013; Chizat et al. 2018 for the unbalanced exponent tau).
  The first update runs in the log domain; its plan P0 = exp(log K + alpha0 + beta0) has rows of
  mass ~a_i and no column that underflows, so the remaining updates act on P0 through log-scalings
  (lu, lv) with matrix-vector products instead of B^2 exponentials (absorbing once, as in
  Schmitzer 2019's stabilised kernel). Under jax.grad this keeps ~6 B x B floats live instead of
  ~13 and costs ~1.5 InfoNCE losses at batch 4096 on CPU (benchmarks/ot_clip_step_time.py).
  tests/ot_clip/test_plans.py checks it against ott's forward pass and finite differences.
  """
  _check_iterations("num_iterations", num_iterations)
  beta0 = tau_b * (log_b - jax.nn.logsumexp(log_kernel, axis=0))
  alpha0 = tau_a * (log_a - jax.nn.logsumexp(log_kernel + beta0[None, :], axis=1))
  log_plan0 = alpha0[:, None] + beta0[None, :] + log_kernel
  if int(num_iterations) == 1:
    return log_plan0
  plan0 = jnp.exp(log_plan0)

  def body(lu: jax.Array, _: Any) -> tuple[jax.Array, jax.Array]:
    # Total potentials are (alpha0 + lu, beta0 + lv), and
    # LSE_i(log K_ij + alpha0_i + lu_i) = log (e^lu P0)_j - beta0_j. Written e^lu @ P0, not
    # P0.T @ e^lu: XLA:CPU materialises the transpose on every use (20x slower at B = 1024).
    lv = tau_b * (log_b + beta0 - jnp.log(jnp.exp(lu) @ plan0)) - beta0
    lu = tau_a * (log_a + alpha0 - jnp.log(plan0 @ jnp.exp(lv))) - alpha0
    return lu, lv

  lu, lvs = jax.lax.scan(body, jnp.zeros_like(alpha0), None, length=int(num_iterations) - 1,
                         unroll=int(num_iterations) <= 10)
  return lu[:, None] + lvs[-1][None, :] + log_plan0


def log_plan_from_potentials(f: jax.Array, g: jax.Array, cost: jax.Array, epsilon: Any) -> jax.Array:
  return (f[:, None] + g[None, :] - cost) / epsilon


def sinkhorn_log_plan(cost: jax.Array, epsilon: Any, a: jax.Array | None = None,
                      b: jax.Array | None = None, *, tau_a: float = 1.0, tau_b: float = 1.0,
                      num_iterations: int = 5, implicit: bool = False, use_ott: bool = False,
                      threshold: float = 1e-6, max_iterations: int = 2000) -> jax.Array:
  """log P of min_P <C, P> - eps H(P) over U(a, b), or unbalanced if tau < 1 (Sec. 4).

  tau = lambda / (lambda + eps) (ott's convention): 1 is the hard constraint P 1 = a; smaller
  values relax it to a penalty lambda KL(P 1 | a) (unbalanced OT). Modes:
  * default: ``num_iterations`` unrolled updates, differentiated by backprop (as in training);
  * ``implicit=True``: ott's Sinkhorn run to ``threshold`` and differentiated implicitly
    (ott's ImplicitDiff); only correct once converged;
  * ``use_ott=True``: ott's Sinkhorn unrolled for ``num_iterations`` (reference/cross-check).
  g is updated before f, so after any number of balanced iterations P 1 = a holds exactly.
  """
  check_positive("epsilon", epsilon)
  n, m = cost.shape
  a = uniform(n, cost.dtype) if a is None else a
  b = uniform(m, cost.dtype) if b is None else b
  if implicit or use_ott:
    f, g = ott_sinkhorn_potentials(cost, epsilon, a, b, tau_a=tau_a, tau_b=tau_b,
                                   num_iterations=num_iterations, implicit=implicit,
                                   threshold=threshold, max_iterations=max_iterations)
    return log_plan_from_potentials(f, g, cost, epsilon)
  return unrolled_sinkhorn_log_plan(-cost / epsilon, jnp.log(a), jnp.log(b), tau_a=tau_a, tau_b=tau_b,
                                    num_iterations=num_iterations)


def dbot_log_plan(cost: jax.Array, epsilon: Any, a: jax.Array | None = None, *,
                  lower: jax.Array | float = 0.5, upper: jax.Array | float = 2.0,
                  num_iterations: int = 5) -> jax.Array:
  """log P of double-bounded OT: P 1 = a and lower_j <= (P^T 1)_j <= upper_j (Sec. 4, DBOT).

  ``lower`` and ``upper`` are multiples of the uniform column mass 1/m. Solved by exact block
  coordinate ascent on the dual: given f, the column dual g_j is 0 if the column mass s_j of
  exp((f - C)/eps) lies inside the bounds, and otherwise moves it onto the violated bound:
  g_j / eps = max(log l_j - log s_j, min(0, log u_j - log s_j)). Recomputing g_j from scratch
  (not multiplying the previous plan) lets a bound become inactive again, which the iterated
  clipping of the official code cannot do.
  """
  check_positive("epsilon", epsilon)
  check_positive("lower", lower)
  _check_iterations("num_iterations", num_iterations)
  if not (isinstance(lower, jax.core.Tracer) or isinstance(upper, jax.core.Tracer)):
    if not (np.all(np.asarray(lower) <= 1.0) and np.all(np.asarray(upper) >= 1.0)):
      # Total mass is sum(a) = 1, so the column bounds must bracket the uniform mass 1/m.
      raise ValueError(f"DBOT needs lower <= 1 <= upper (multiples of 1/m), got lower={lower}, upper={upper}")
  n, m = cost.shape
  a = uniform(n, cost.dtype) if a is None else a
  log_lo = jnp.log(jnp.broadcast_to(jnp.asarray(lower, cost.dtype) / m, (m,)))
  log_hi = jnp.log(jnp.broadcast_to(jnp.asarray(upper, cost.dtype) / m, (m,)))
  log_k = -cost / epsilon
  log_a = jnp.log(a)

  def column_dual(log_s: jax.Array) -> jax.Array:
    return jnp.maximum(log_lo - log_s, jnp.minimum(0.0, log_hi - log_s))

  # First update in the log domain from beta = 0; later ones on the absorbed plan P0 with
  # matrix-vector products, as in ``unrolled_sinkhorn_log_plan``:
  # LSE_j(log K_ij + beta_j) = log (P0 e^(beta - beta0))_i - alpha0_i, and likewise for columns.
  alpha0 = log_a - jax.nn.logsumexp(log_k, axis=1)
  beta0 = column_dual(jax.nn.logsumexp(log_k + alpha0[:, None], axis=0))
  plan0 = jnp.exp(log_k + alpha0[:, None] + beta0[None, :])

  def row_dual(beta: jax.Array) -> jax.Array:
    return log_a + alpha0 - jnp.log(plan0 @ jnp.exp(beta - beta0))

  def body(beta: jax.Array, _: Any) -> tuple[jax.Array, None]:
    alpha = row_dual(beta)
    return column_dual(jnp.log(jnp.exp(alpha - alpha0) @ plan0) - beta0), None

  beta, _ = jax.lax.scan(body, beta0, None, length=int(num_iterations) - 1,
                         unroll=int(num_iterations) <= 10)
  alpha = row_dual(beta)  # finish on the equality constraint, like ott's Sinkhorn
  return alpha[:, None] + beta[None, :] + log_k
