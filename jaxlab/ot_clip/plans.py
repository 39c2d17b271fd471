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

Inputs: the cost must be a non-empty float [n, m] matrix (bfloat16/float16 costs are computed in
float32, see ``checks.py``); concrete hyper-parameters are checked (InputError naming the value).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check_bool, check_int, check_positive, check_range, check_scalar, is_traced
from jaxlab.ot_clip.checks import check_floating, compute_dtype

if TYPE_CHECKING:  # ott-jax (with equinox, jaxopt, scipy) is imported where a function uses it, not with the package
  import ott.solvers.linear.sinkhorn


# See ``absorbed_updates_are_safe``: (1 - min tau) * log-kernel range up to which unbalanced
# problems keep the absorbed updates.
ABSORBED_MAX_DEFECT = 30.0


def uniform(n: int, dtype: Any = jnp.float32) -> jax.Array:
  if n < 1:
    raise InputError(f"a uniform marginal needs at least one point, got n={n}")
  return jnp.full((n,), 1.0 / n, dtype)


def _check_iterations(name: str, value: int) -> None:
  check_int(value, name, 1, got=True)


def check_cost(cost: Any) -> jax.Array:
  """The cost as a float array of at least float32; InputError unless it is a non-empty [n, m] matrix."""
  shape = tuple(np.shape(cost))
  if len(shape) != 2 or min(shape) < 1:
    raise InputError(f"cost must be a non-empty 2-D [n, m] matrix, got shape {shape}")
  check_floating(cost, "cost")
  cost = jnp.asarray(cost)
  return cost.astype(compute_dtype(cost))


def check_epsilon(epsilon: Any) -> None:
  check_scalar(epsilon, "epsilon")
  check_positive(epsilon, "epsilon", got=True)


def check_tau(tau_a: Any, tau_b: Any) -> None:
  """tau = lambda / (lambda + eps) in (0, 1]: 1 is a hard marginal, -> 0 drops it."""
  check_range(tau_a, "tau_a", 0, 1, low_open=True, got=True)
  check_range(tau_b, "tau_b", 0, 1, low_open=True, got=True)


def check_marginal(name: str, weights: Any, size: int, dtype: Any, *, positive: bool = False) -> jax.Array:
  """A marginal of shape (size,), finite and non-negative (positive if asked) when concrete, in ``dtype``.

  The unrolled solvers need positive masses (a zero mass row is 0/0 in their scalings); ott's
  solver (``implicit=True`` or ``use_ott=True``) and inference accept zeros.
  """
  if tuple(np.shape(weights)) != (size,):
    raise InputError(f"{name} has shape {tuple(np.shape(weights))}, expected ({size},)")
  if not is_traced(weights):
    arr = np.asarray(weights, np.float64)
    ok = np.isfinite(arr) & ((arr > 0) if positive else (arr >= 0))
    if not np.all(ok):
      what = "positive (the unrolled solver; implicit=True accepts zeros)" if positive else "non-negative"
      raise InputError(f"{name} must be finite and {what}, got {arr[~ok][0]:.6g} at index {int(np.flatnonzero(~ok)[0])}")
  return jnp.asarray(weights, dtype)


def is_balanced(tau_a: Any, tau_b: Any) -> bool:
  """Static: both marginals hard (tau = 1). A traced tau counts as unbalanced."""
  return not (is_traced(tau_a) or is_traced(tau_b)) and float(tau_a) == 1.0 and float(tau_b) == 1.0


def one_sided_log_plan(cost: jax.Array, epsilon: Any, a: jax.Array | None = None,
                       axis: int = 1) -> jax.Array:
  """log P for the entropic OT problem with only one marginal constrained (Sec. 3.1).

  With only P 1 = a (axis=1), the Lagrangian decouples per row and
  P_ij = a_i exp(-C_ij / eps) / sum_k exp(-C_ik / eps) = a_i softmax_j(S_ij / eps) for C = 1 - S.
  ``axis=0`` constrains the columns instead (the text -> image direction).
  """
  cost = check_cost(cost)
  check_epsilon(epsilon)
  if axis not in (0, 1):
    raise InputError(f"axis must be 0 or 1, got {axis!r}")
  n = cost.shape[1 - axis]
  a = uniform(n, cost.dtype) if a is None else check_marginal("a", a, n, cost.dtype)
  log_a = jnp.expand_dims(jnp.log(a), axis)
  return log_a + jax.nn.log_softmax(-cost / epsilon, axis=axis)


def make_sinkhorn(num_iterations: int = 5, implicit: bool = False, threshold: float = 1e-6,
                  max_iterations: int = 2000) -> ott.solvers.linear.sinkhorn.Sinkhorn:
  """An ott Sinkhorn solver that does what its arguments say.

  Unrolled (default, as in training): exactly ``num_iterations`` (g, f) updates, gradients by
  backpropagating through them (``max_iterations // inner_iterations`` is 1, never 0).
  Implicit: run to ``threshold`` (at most ``max_iterations``) and differentiate the optimality
  conditions (ott's ImplicitDiff), which is only right once the solver has converged.
  """
  from ott.solvers.linear import implicit_differentiation, sinkhorn
  check_bool(implicit, "implicit", got=True)
  check_positive(threshold, "threshold", got=True)
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
  from ott.geometry import geometry
  from ott.problems.linear import linear_problem
  geom = geometry.Geometry(cost_matrix=cost, epsilon=epsilon)
  prob = linear_problem.LinearProblem(geom, a=a, b=b, tau_a=tau_a, tau_b=tau_b)
  out = make_sinkhorn(num_iterations, implicit, threshold, max_iterations)(prob)
  return out.f, out.g


def absorbed_updates_are_safe(tau_a: Any, tau_b: Any, log_kernel_range: float | None) -> bool:
  """Static: may ``unrolled_sinkhorn_log_plan`` use the absorbed (matrix-vector) updates?

  Always for a balanced problem. For an unbalanced one only given a static bound on
  max(log K) - min(log K) (i.e. (C_max - C_min) / eps) with (1 - min tau) * bound <= 30: the
  plan's masses then stay far inside float32's range. A stress test (random, aligned, clustered
  and anti-aligned embeddings, n 16-256, d 3-32, tau 0.5-1) found the absorbed and log-domain
  losses and gradients equal to 1e-6 at 30 and 40, and the first NaN at 60.
  """
  if is_balanced(tau_a, tau_b):
    return True
  if log_kernel_range is None or is_traced(tau_a) or is_traced(tau_b):
    return False
  return (1.0 - min(float(tau_a), float(tau_b))) * float(log_kernel_range) <= ABSORBED_MAX_DEFECT


def unrolled_sinkhorn_log_plan(log_kernel: jax.Array, log_a: jax.Array, log_b: jax.Array, *,
                               tau_a: float = 1.0, tau_b: float = 1.0, num_iterations: int = 5,
                               log_kernel_range: float | None = None) -> jax.Array:
  """log P after exactly ``num_iterations`` Sinkhorn updates, written for backprop.

  The same (g, then f) updates as ott's ``Sinkhorn.lse_step`` from zero potentials, on potentials
  divided by eps: beta = tau_b (log b - LSE_i(log K_ij + alpha_i)), alpha = tau_a (log a -
  LSE_j(log K_ij + beta_j)) (Cuturi 2013; Chizat et al. 2018 for the unbalanced exponent tau).

  Balanced (tau_a = tau_b = 1): the first update runs in the log domain; its plan
  P0 = exp(log K + alpha0 + beta0) has rows of mass a_i and columns of mass >= b_j min_i a_i
  (the row update can only shrink a column by the factor a_i / row mass >= a_i), so nothing
  underflows and the remaining updates act on P0 through log-scalings (lu, lv) with
  matrix-vector products instead of B^2 exponentials (absorbing once, as in Schmitzer 2019's
  stabilised kernel). Under jax.grad this keeps ~6 B x B floats live instead of ~13 and costs
  ~1.5 InfoNCE losses at batch 4096 on CPU (benchmarks/ot_clip_step_time.py).

  Unbalanced (any tau < 1, or a traced tau): the plan's row and column masses scale like
  exp(-(1 - tau) C / eps), which leaves float32's range once (1 - tau) * logit_scale is a few
  tens (logit scale 1000 at tau = 0.9): the absorbed form would take log(0) and return NaN. So
  the updates run in the log domain (B^2 exponentials per update, 3-5x the absorbed loss on CPU,
  exact at any scale) unless ``log_kernel_range``, a static bound on max(log K) - min(log K),
  shows the absorbed form is safe (``absorbed_updates_are_safe``; the OT-CLIP losses derive it
  from the logit scale, C = 1 - cos lies in [0, 2]).
  tests/ot_clip/test_plans.py checks both against ott's forward pass and finite differences.
  """
  _check_iterations("num_iterations", num_iterations)
  num_iterations = int(num_iterations)
  if not absorbed_updates_are_safe(tau_a, tau_b, log_kernel_range):
    return _log_domain_sinkhorn_log_plan(log_kernel, log_a, log_b, tau_a, tau_b, num_iterations)
  beta0 = tau_b * (log_b - jax.nn.logsumexp(log_kernel, axis=0))
  alpha0 = tau_a * (log_a - jax.nn.logsumexp(log_kernel + beta0[None, :], axis=1))
  log_plan0 = alpha0[:, None] + beta0[None, :] + log_kernel
  if num_iterations == 1:
    return log_plan0
  plan0 = jnp.exp(log_plan0)

  def body(lu: jax.Array, _: Any) -> tuple[jax.Array, jax.Array]:
    # Total potentials are (alpha0 + lu, beta0 + lv), and
    # LSE_i(log K_ij + alpha0_i + lu_i) = log (e^lu P0)_j - beta0_j. Written e^lu @ P0, not
    # P0.T @ e^lu: XLA:CPU materialises the transpose on every use (20x slower at B = 1024).
    lv = tau_b * (log_b + beta0 - jnp.log(jnp.exp(lu) @ plan0)) - beta0
    lu = tau_a * (log_a + alpha0 - jnp.log(plan0 @ jnp.exp(lv))) - alpha0
    return lu, lv

  lu, lvs = jax.lax.scan(body, jnp.zeros_like(alpha0), None, length=num_iterations - 1,
                         unroll=num_iterations <= 10)
  return lu[:, None] + lvs[-1][None, :] + log_plan0


def _log_domain_sinkhorn_log_plan(log_kernel: jax.Array, log_a: jax.Array, log_b: jax.Array,
                                  tau_a: Any, tau_b: Any, num_iterations: int) -> jax.Array:
  """The same updates as ``unrolled_sinkhorn_log_plan``, each one a log-sum-exp (stable at any eps)."""

  def update(alpha: jax.Array) -> tuple[jax.Array, jax.Array]:
    beta = tau_b * (log_b - jax.nn.logsumexp(log_kernel + alpha[:, None], axis=0))
    alpha = tau_a * (log_a - jax.nn.logsumexp(log_kernel + beta[None, :], axis=1))
    return alpha, beta

  alpha, beta = update(jnp.zeros_like(log_a))
  if num_iterations > 1:
    alpha, betas = jax.lax.scan(lambda al, _: update(al), alpha, None, length=num_iterations - 1,
                                unroll=num_iterations <= 10)
    beta = betas[-1]
  return alpha[:, None] + beta[None, :] + log_kernel


def log_plan_from_potentials(f: jax.Array, g: jax.Array, cost: jax.Array, epsilon: Any) -> jax.Array:
  return (f[:, None] + g[None, :] - cost) / epsilon


def sinkhorn_log_plan(cost: jax.Array, epsilon: Any, a: jax.Array | None = None,
                      b: jax.Array | None = None, *, tau_a: float = 1.0, tau_b: float = 1.0,
                      num_iterations: int = 5, implicit: bool = False, use_ott: bool = False,
                      threshold: float = 1e-6, max_iterations: int = 2000,
                      log_kernel_range: float | None = None) -> jax.Array:
  """log P of min_P <C, P> - eps H(P) over U(a, b), or unbalanced if tau < 1 (Sec. 4).

  tau = lambda / (lambda + eps) (ott's convention): 1 is the hard constraint P 1 = a; smaller
  values relax it to a penalty lambda KL(P 1 | a) (unbalanced OT). Modes:
  * default: ``num_iterations`` unrolled updates, differentiated by backprop (as in training);
  * ``implicit=True``: ott's Sinkhorn run to ``threshold`` and differentiated implicitly
    (ott's ImplicitDiff); only correct once converged;
  * ``use_ott=True``: ott's Sinkhorn unrolled for ``num_iterations`` (reference/cross-check).
  g is updated before f, so after any number of balanced iterations P 1 = a holds exactly.
  Concrete epsilon, tau, iteration counts and marginals are checked (InputError).
  ``log_kernel_range``: optional static bound on (C_max - C_min) / eps that lets unbalanced
  problems keep the faster absorbed updates (``unrolled_sinkhorn_log_plan``); a concrete cost
  and epsilon give it exactly.
  """
  cost = check_cost(cost)
  check_epsilon(epsilon)
  check_tau(tau_a, tau_b)
  check_bool(implicit, "implicit", got=True)
  check_bool(use_ott, "use_ott", got=True)
  _check_iterations("num_iterations", num_iterations)
  n, m = cost.shape
  unrolled = not (implicit or use_ott)
  a = uniform(n, cost.dtype) if a is None else check_marginal("a", a, n, cost.dtype, positive=unrolled)
  b = uniform(m, cost.dtype) if b is None else check_marginal("b", b, m, cost.dtype, positive=unrolled)
  epsilon = jnp.asarray(epsilon, cost.dtype)
  if implicit or use_ott:
    f, g = ott_sinkhorn_potentials(cost, epsilon, a, b, tau_a=tau_a, tau_b=tau_b,
                                   num_iterations=num_iterations, implicit=implicit,
                                   threshold=threshold, max_iterations=max_iterations)
    return log_plan_from_potentials(f, g, cost, epsilon)
  if log_kernel_range is None and not (is_balanced(tau_a, tau_b) or is_traced(cost) or is_traced(epsilon)):
    log_kernel_range = float(jnp.max(cost) - jnp.min(cost)) / float(epsilon)
  return unrolled_sinkhorn_log_plan(-cost / epsilon, jnp.log(a), jnp.log(b), tau_a=tau_a, tau_b=tau_b,
                                    num_iterations=num_iterations, log_kernel_range=log_kernel_range)


def check_dbot_bounds(lower: Any, upper: Any, m: int | None = None) -> None:
  """0 < lower <= 1 <= upper (inf allowed), scalars or per-column [m] arrays, when concrete.

  The total mass is sum(a) = 1, so the column bounds (multiples of 1/m) must bracket the
  uniform mass; lower = 0 would take log 0.
  """
  for name, value in (("lower", lower), ("upper", upper)):
    shape = tuple(np.shape(value))
    if shape not in ((),) + (((m,),) if m is not None else ()):
      allowed = "a scalar" + (f" or shape ({m},) (one per column)" if m is not None else "")
      raise InputError(f"DBOT {name} must be {allowed}, got shape {shape}")
  if is_traced(lower) or is_traced(upper):
    return
  lo, hi = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
  if not np.all((lo > 0) & (lo <= 1)):
    raise InputError(f"DBOT lower must be in (0, 1] (a multiple of the uniform column mass 1/m), got {lower}")
  if not np.all((hi >= 1) & ~np.isnan(hi)):
    raise InputError(f"DBOT upper must be in [1, inf] (a multiple of the uniform column mass 1/m), got {upper}")


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
  cost = check_cost(cost)
  check_epsilon(epsilon)
  _check_iterations("num_iterations", num_iterations)
  n, m = cost.shape
  check_dbot_bounds(lower, upper, m)
  a = uniform(n, cost.dtype) if a is None else check_marginal("a", a, n, cost.dtype, positive=True)
  epsilon = jnp.asarray(epsilon, cost.dtype)
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
