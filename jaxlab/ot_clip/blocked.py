"""The OT-CLIP losses on the coupling's rows (``rows.CouplingRows``): sharded over devices or chunked on one.

Each function here computes the same loss as its dense definition (``contrastive``, ``ot_losses``)
from row and column reductions only, so that no program holds more of the B x B coupling than its
rows (or a block of them). Same updates, same order, same starting point; only where a float32
sum is rounded differs (tests/ot_clip/test_coupling_rows.py bounds the difference).

Every Sinkhorn-type plan is solved by **log-domain Sinkhorn with row-local potential updates**
(Shi, Fan & Yan, ICML 2024, Sec. 4; the g-then-f updates of ``plans.unrolled_sinkhorn_log_plan``
on potentials divided by eps): beta_j = tau_b (log b_j - LSE_i(log K_ij + alpha_i)) is a column
reduction (a partial LSE per block, combined over the devices), alpha_i = tau_a (log a_i -
LSE_j(log K_ij + beta_j)) is local to row i. The dense balanced solver's absorbed
matrix-vector updates are the same updates in another form; here every update is a log-sum-exp,
exact at any logit scale. Inputs are already checked and normalised (``coupling.py``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxlab.ot_clip.plans import is_balanced
from jaxlab.ot_clip import potentials
from jaxlab.ot_clip.rows import BlockFn, CouplingRows, Kernel
from jaxlab.registry import Registry

#: The row-blocked form of each loss of ``registry.LOSSES``, by the same name:
#: ``fn(rows, logit_scale, logit_bias, **hyper) -> loss``.
ROW_BLOCKED: Registry = Registry("row-blocked OT-CLIP loss")


def _negative_cost(x_c: jax.Array, sim_c: jax.Array, params: Any) -> jax.Array:
  del x_c, params
  return sim_c - 1.0


def _similarity(x_c: jax.Array, sim_c: jax.Array, params: Any) -> jax.Array:
  del x_c, params
  return sim_c


def _log_kernel(scale: jax.Array) -> Kernel:
  """log K = -C / eps = (S - 1) * logit_scale with C = 1 - S (Sec. 3)."""
  return Kernel(_negative_cost, (), scale)


def _log_kernel_diag(rows: CouplingRows, scale: jax.Array) -> jax.Array:
  return (rows.diag_sim() - 1.0) * scale


def _kl_from_identity(rows: CouplingRows, log_plan_diag: jax.Array) -> jax.Array:
  """KL(I/n | P) = -1/n sum_i log P_ii - log n (``ot_losses.kl_from_identity``) from the rows' log P_ii."""
  return -rows.mean_over_rows(log_plan_diag) - jnp.log(jnp.asarray(rows.num_rows, log_plan_diag.dtype))


def sinkhorn_potentials(rows: CouplingRows, kernel: Kernel, *, tau_a: Any = 1.0, tau_b: Any = 1.0,
                        num_iterations: int = 5, row_args: tuple[jax.Array, ...] = (), with_mass: bool = False
                        ) -> tuple[jax.Array, ...]:
  """(alpha [r], beta [B]): ``num_iterations`` log-domain Sinkhorn updates from zero potentials (Sec. 4).

  Uniform marginals a = b = 1/B; tau < 1 relaxes a marginal to a KL penalty (unbalanced OT). The
  potentials are divided by eps, so log P_ij = alpha_i + beta_j + log K_ij (``potentials.solve``).
  ``with_mass``: also sum_ij P_ij, the generalised KL's mass term.
  """
  dtype = rows.y.dtype
  log_n = -jnp.log(jnp.asarray(rows.num_rows, dtype))
  params = {"tau_a": jnp.asarray(tau_a, dtype), "tau_b": jnp.asarray(tau_b, dtype), "log_a": log_n, "log_b": log_n}
  return potentials.solve(rows, kernel, row_args, update="sinkhorn", params=params, num_iterations=num_iterations,
                          with_mass=with_mass)


@ROW_BLOCKED.register("infonce")
def infonce(rows: CouplingRows, logit_scale: Any, logit_bias: Any = None) -> jax.Array:
  """Symmetric InfoNCE (``contrastive.clip_loss``): row and column LSEs of the logits s S."""
  del logit_bias
  scale = jnp.asarray(logit_scale, rows.y.dtype)
  row_lse, col_lse = potentials.lse_pair(rows, Kernel(_similarity, (), scale))
  diag = scale * rows.diag_sim()
  i2t = rows.mean_over_rows(row_lse - diag)
  t2i = jnp.mean(col_lse) - rows.mean_over_rows(diag)
  return 0.5 * (i2t + t2i)


@ROW_BLOCKED.register("siglip")
def siglip(rows: CouplingRows, logit_scale: Any, logit_bias: Any) -> jax.Array:
  """SigLIP (``contrastive.siglip_loss``): -1/n [sum_ij log sigmoid(-l_ij) + sum_i l_ii], l = t S + b.

  log sigmoid(l) - log sigmoid(-l) = l, so the positives on the diagonal are a correction of the
  all-negative sum by the diagonal logits (the chunked form of Zhai et al., ICCV 2023, Sec. 3.3).
  """
  dtype = rows.y.dtype
  scale, bias = jnp.asarray(logit_scale, dtype), jnp.asarray(logit_bias, dtype)
  negatives = rows.total(lambda x_c, sim_c: jax.nn.log_sigmoid(-(scale * sim_c + bias)))
  diag = scale * rows.diag_sim() + bias
  return -(negatives + rows.psum(jnp.sum(diag))) / rows.num_rows


@ROW_BLOCKED.register("one_sided_ot")
def one_sided_ot(rows: CouplingRows, logit_scale: Any, logit_bias: Any = None, *,
                 symmetric: bool = True) -> jax.Array:
  """KL(I/n | P) for the row-constrained plan (Sec. 3.1): mean_i(LSE_j log K_ij - log K_ii); columns alike."""
  del logit_bias
  scale = jnp.asarray(logit_scale, rows.y.dtype)
  kernel, diag = _log_kernel(scale), _log_kernel_diag(rows, scale)
  if not symmetric:
    return rows.mean_over_rows(rows.row_lse(kernel) - diag)
  row_lse, col_lse = potentials.lse_pair(rows, kernel)
  return 0.5 * (rows.mean_over_rows(row_lse - diag) + jnp.mean(col_lse) - rows.mean_over_rows(diag))


@ROW_BLOCKED.register("entropic_ot")
def entropic_ot(rows: CouplingRows, logit_scale: Any, logit_bias: Any = None, *,
                num_iterations: int = 5, **unused: Any) -> jax.Array:
  """KL(I/n | P) for the two-sided Sinkhorn plan in U(1/n, 1/n) (Sec. 4, entropic OT)."""
  del logit_bias, unused  # the solver options of ott's path (threshold, max_iterations) do not apply
  scale = jnp.asarray(logit_scale, rows.y.dtype)
  alpha, beta = sinkhorn_potentials(rows, _log_kernel(scale), num_iterations=int(num_iterations))
  return _kl_from_identity(rows, alpha + rows.local(beta) + _log_kernel_diag(rows, scale))


@ROW_BLOCKED.register("unbalanced_ot")
def unbalanced_ot(rows: CouplingRows, logit_scale: Any, logit_bias: Any = None, *, tau_a: Any = 0.9,
                  tau_b: Any = 0.9, num_iterations: int = 5, **unused: Any) -> jax.Array:
  """Generalised KL(I/n | P) + sum P - 1 for the unbalanced plan, marginals penalised by KL (Sec. 4)."""
  del logit_bias, unused  # max_logit_scale's guard is the caller's; every update here is a log-sum-exp
  scale = jnp.asarray(logit_scale, rows.y.dtype)
  kernel = _log_kernel(scale)
  alpha, beta, mass = sinkhorn_potentials(rows, kernel, tau_a=tau_a, tau_b=tau_b,
                                          num_iterations=int(num_iterations), with_mass=True)
  return _kl_from_identity(rows, alpha + rows.local(beta) + _log_kernel_diag(rows, scale)) + mass - 1.0


@ROW_BLOCKED.register("dbot")
def dbot(rows: CouplingRows, logit_scale: Any, logit_bias: Any = None, *, lower: Any = 0.5,
         upper: Any = 2.0, num_iterations: int = 5) -> jax.Array:
  """KL(I/n | P) for the double-bounded plan (Sec. 4, DBOT), by ``plans.dbot_log_plan``'s dual ascent.

  Rows exact: alpha_i = log a_i - LSE_j(log K_ij + beta_j) (local); columns: beta_j moves the column
  mass s_j = exp(LSE_i(log K_ij + alpha_i)) onto [lower, upper] / n when it leaves them (a column
  reduction). Starts from beta = 0 and finishes on the row constraint.
  """
  del logit_bias
  dtype = rows.y.dtype
  scale = jnp.asarray(logit_scale, dtype)
  n = rows.num_rows
  params = {"log_a": -jnp.log(jnp.asarray(n, dtype)), "log_lo": jnp.log(jnp.asarray(lower, dtype) / n),
            "log_hi": jnp.log(jnp.asarray(upper, dtype) / n)}
  alpha, beta = potentials.solve(rows, _log_kernel(scale), (), update="dbot", params=params,
                                 num_iterations=int(num_iterations))
  return _kl_from_identity(rows, alpha + rows.local(beta) + _log_kernel_diag(rows, scale))


def _fgw_block(x_c: jax.Array, sim_c: jax.Array, params: dict[str, jax.Array], row_term_c: jax.Array) -> jax.Array:
  """-(C + alpha L(P_t)) = eps log K_t, FGW's linearised cost (``gromov.fgw_log_plan``), per block.

  L(P)_ij = row_term_i + col_term_j - 2 (X core Y^T)_ij with core = X^T P Y (Peyre et al. 2016,
  Prop. 1); the block's X core Y^T is recomputed from the embeddings ([c, d] @ [d, d] @ [d, B]).
  """
  structure = row_term_c[:, None] + params["col_term"][None, :] - 2.0 * (x_c @ params["core"]) @ params["y"].T
  return -((1.0 - sim_c) + params["alpha"] * structure)


@ROW_BLOCKED.register("fgw")
def fgw(rows: CouplingRows, logit_scale: Any, logit_bias: Any = None, *, alpha: Any = 0.5, num_outer: int = 3,
        num_iterations: int = 5, tau_a: Any = 1.0, tau_b: Any = 1.0, **unused: Any) -> jax.Array:
  """KL(I/n | P) for the fused Gromov-Wasserstein plan (Sec. 4, FGW; U-FG for tau < 1), rows split.

  Mirror descent on the linearisation as ``gromov.fgw_log_plan``: from P = a b^T, ``num_outer``
  times C_t = C + alpha L(P_t) and a Sinkhorn solve. L(P) needs the plan's row masses (local), its
  column masses and the [d, d] matrices X^T P Y and X^T diag(P 1) X (sums over every row: one psum
  each), so the structure is carried as vectors and [d, d] matrices, never as a B x B array.
  """
  del logit_bias, unused
  dtype = rows.y.dtype
  scale = jnp.asarray(logit_scale, dtype)
  x, y, n = rows.x, rows.y, rows.num_rows
  # The independent coupling a b^T: masses 1/n per row and column, X^T P Y = (X^T a)(b^T Y).
  row_mass = jnp.full((rows.local_rows,), 1.0 / n, dtype)
  col_mass = jnp.full((n,), 1.0 / n, dtype)
  core = jnp.outer(rows.psum(jnp.sum(x, axis=0)) / n, jnp.sum(y, axis=0) / n)
  for step in range(int(num_outer)):
    m_x = rows.psum(x.T @ (row_mass[:, None] * x))
    m_y = y.T @ (col_mass[:, None] * y)
    row_term = jnp.sum((x @ m_x) * x, axis=1)
    col_term = jnp.sum((y @ m_y) * y, axis=1)
    kernel = Kernel(_fgw_block, {"alpha": jnp.asarray(alpha, dtype), "col_term": col_term, "core": core, "y": y},
                    scale)
    last = step + 1 == int(num_outer)
    f, g, *mass = sinkhorn_potentials(rows, kernel, tau_a=tau_a, tau_b=tau_b, num_iterations=int(num_iterations),
                                      row_args=(row_term,), with_mass=last and not is_balanced(tau_a, tau_b))
    if not last:
      row_mass, col_mass, core = _plan_moments(rows, kernel, f, g, row_term)
  diag_structure = row_term + rows.local(col_term) - 2.0 * jnp.sum((x @ core) * rows.y_rows, axis=1)
  log_plan_diag = f + rows.local(g) - ((1.0 - rows.diag_sim()) + alpha * diag_structure) * scale
  loss = _kl_from_identity(rows, log_plan_diag)
  if mass:
    loss = loss + mass[0] - 1.0
  return loss


def _plan_moments(rows: CouplingRows, kernel: BlockFn, f: jax.Array, g: jax.Array, row_term: jax.Array
                  ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(P 1 for the rows here, P^T 1, X^T P Y) of log P = f_i + g_j + log K_ij, in one visit."""
  y = rows.y

  def fn(x_c, sim_c, f_c, rt_c):
    plan = jnp.exp(kernel(x_c, sim_c, rt_c) + f_c[:, None] + g[None, :])
    return jnp.sum(plan, axis=1), (jnp.sum(plan, axis=0), x_c.T @ (plan @ y))

  row_mass, (col_parts, core_parts) = rows.visit(fn, f, row_term)
  return row_mass, rows.psum(jnp.sum(col_parts, axis=0)), rows.psum(jnp.sum(core_parts, axis=0))


@ROW_BLOCKED.register("ufgw")
def ufgw(rows: CouplingRows, logit_scale: Any, logit_bias: Any = None, *, tau_a: Any = 0.9, tau_b: Any = 0.9,
         **kwargs: Any) -> jax.Array:
  """Generalised KL(I/n | P) for the unbalanced fused Gromov plan (Sec. 4, U-FG): ``fgw`` with tau < 1."""
  return fgw(rows, logit_scale, logit_bias, tau_a=tau_a, tau_b=tau_b, **kwargs)

