"""Dual potentials of the Sinkhorn-type plans on the coupling's rows: log-domain updates with row-local potentials.

Shi, Fan & Yan, ICML 2024, Sec. 4: every plan here is log P_ij = alpha_i + beta_j + log K_ij with
potentials (divided by eps) from alternating half-steps

  column:  beta_j  = g(LSE_i(log K_ij + alpha_i))   (a column reduction: partial LSEs, combined over devices)
  row:     alpha_i = f(LSE_j(log K_ij + beta_j))     (local to row i)

* ``"sinkhorn"`` (entropic and unbalanced OT; ``plans.unrolled_sinkhorn_log_plan``'s g-then-f updates):
  g(c) = tau_b (log b - c), f(r) = tau_a (log a - r), from alpha = 0, ``num_iterations`` x (column, row);
* ``"dbot"`` (``plans.dbot_log_plan``'s dual block-coordinate ascent): g(c) = max(log lo - c,
  min(0, log hi - c)), f(r) = log a - r, from beta = 0: one row half-step, then ``num_iterations``
  x (column, row).

Two ways to differentiate the same updates (equal to rounding; tests/ot_clip/test_coupling_rows.py):

* the rows' similarities are kept ([r, B], no ``chunk_size``): a ``jax.custom_vjp`` whose forward
  pass keeps only the potentials and the LSEs of each half-step (vectors) and whose backward pass
  sweeps the half-steps in reverse, recomputing each softmax from the kept block, accumulating the
  cotangent of log K in one [r, B] array and reducing column cotangents with one ``psum`` of a
  B-vector per half-step. Plain autodiff of the unrolled updates kept about one [r, B] array per
  iteration (7-8 for 5 iterations at B = 8192 on 8 devices; this form keeps ~3);
* chunked: autodiff through ``CouplingRows``' checkpointed visits (each block recomputed).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxlab.ot_clip.rows import CouplingRows, Kernel, as_varying

UpdateMaps = tuple[Callable[[jax.Array], jax.Array], Callable[[jax.Array], jax.Array]]


def update_maps(update: str, params: dict[str, jax.Array]) -> UpdateMaps:
  """(f, g): the row and column half-step maps of ``update`` (module doc) with their parameters."""
  if update == "sinkhorn":
    return (lambda r: params["tau_a"] * (params["log_a"] - r)), (lambda c: params["tau_b"] * (params["log_b"] - c))
  if update == "dbot":
    lo, hi = params["log_lo"], params["log_hi"]
    return (lambda r: params["log_a"] - r), (lambda c: jnp.maximum(lo - c, jnp.minimum(0.0, hi - c)))
  raise ValueError(f"unknown update {update!r}")  # internal: the losses name it


def solve(rows: CouplingRows, kernel: Kernel, row_args: tuple[jax.Array, ...], *, update: str,
          params: dict[str, jax.Array], num_iterations: int, with_mass: bool = False) -> tuple[jax.Array, ...]:
  """(alpha [r], beta [B]) after ``num_iterations`` (column, row) half-steps of ``update`` (module doc).

  ``with_mass``: also sum_ij P_ij (the unbalanced losses' generalised KL term), a third output.
  """
  lead = update == "dbot"
  if rows.sim is not None:
    static = (kernel.fn, update, lead, int(num_iterations), rows.axis_name, with_mass)
    kparams, scale, row_args, params = as_varying((kernel.params, kernel.scale, tuple(row_args), params),
                                                  rows.axis_name)
    out = _kept(static, rows.x, rows.sim, kparams, scale, row_args, params)
    return out if with_mass else out[:2]
  f, g = update_maps(update, params)
  if lead:
    alpha = f(rows.row_lse(kernel, None, *row_args))
  else:
    alpha = jnp.zeros((rows.local_rows,), rows.y.dtype)

  def iteration(alpha: jax.Array) -> tuple[jax.Array, jax.Array]:
    beta = g(rows.col_lse(kernel, alpha, *row_args))
    return f(rows.row_lse(kernel, beta, *row_args)), beta

  alpha, beta = iteration(alpha)
  if num_iterations > 1:
    alpha, betas = jax.lax.scan(lambda a, _: iteration(a), alpha, None, length=int(num_iterations) - 1)
    beta = betas[-1]
  if not with_mass:
    return alpha, beta
  mass = rows.total(lambda x_c, sim_c, a_c, *ra: jnp.exp(kernel(x_c, sim_c, *ra) + a_c[:, None] + beta[None, :]),
                    alpha, *row_args)
  return alpha, beta, mass


def lse_pair(rows: CouplingRows, kernel: Kernel) -> tuple[jax.Array, jax.Array]:
  """(LSE_j log K_ij for the rows held here [r], LSE_i log K_ij over every row [B]): InfoNCE's two directions.

  On the kept block a custom VJP recomputes both softmaxes piece by piece in the backward pass (plain
  autodiff of the two visits kept ~1 more [r, B] array); chunked, the rows' visits.
  """
  if rows.sim is None:
    return rows.row_lse(kernel), rows.col_lse(kernel)
  kparams, scale = as_varying((kernel.params, kernel.scale), rows.axis_name)
  return _kept_lse((kernel.fn, rows.axis_name), rows.x, rows.sim, kparams, scale)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _kept_lse(static: tuple, x: jax.Array, sim: jax.Array, kparams: Any, scale: jax.Array
              ) -> tuple[jax.Array, jax.Array]:
  return _kept_lse_fwd(static, x, sim, kparams, scale)[0]


def _kept_lse_fwd(static: tuple, x: jax.Array, sim: jax.Array, kparams: Any, scale: jax.Array):
  fn, axis_name = static
  block = _Pieces(fn, x, sim, kparams, scale, (), axis_name)
  r = block.row_lse(None, sim[:, 0])
  c = block.col_lse(jnp.zeros_like(sim[:, 0]), sim[0, :])
  return (r, c), (x, sim, kparams, scale, r, c)


def _kept_lse_bwd(static: tuple, residuals: tuple, cotangents: tuple[jax.Array, jax.Array]) -> tuple:
  fn, axis_name = static
  x, sim, kparams, scale, r, c = residuals
  r_bar, c_bar = cotangents
  block = _Pieces(fn, x, sim, kparams, scale, (), axis_name)

  def body(i, acc):
    scale_sum, k_bar = acc
    lk = block.log_k(i)
    r_i, r_bar_i = block.take(i, r, r_bar)
    k_i = r_bar_i[:, None] * jnp.exp(lk - r_i[:, None]) + c_bar[None, :] * jnp.exp(lk - c[None, :])
    return scale_sum + jnp.sum(k_i * lk), block.put(k_bar, i, k_i)

  k_bar = as_varying(jnp.zeros_like(sim), axis_name)
  scale_sum, k_bar = block.loop(body, (jnp.zeros_like(scale), k_bar))
  x_bar, sim_bar, kparams_bar = jax.vjp(fn, x, sim, kparams)[1](scale * k_bar)
  return x_bar, sim_bar, kparams_bar, scale_sum / scale


_kept_lse.defvjp(_kept_lse_fwd, _kept_lse_bwd)


#: The kept [r, B] block is visited in this many row pieces (if they divide r): every softmax is an
#: [r / pieces, B] transient beside the block (and, backwards, its cotangent).
PIECES = 4


class _Pieces:
  """log K of the kept block, piece by piece: row and column log-sum-exps, and cotangent updates."""

  def __init__(self, fn: Callable[..., jax.Array], x: jax.Array, sim: jax.Array, kparams: Any, scale: jax.Array,
               row_args: tuple, axis_name: Any):
    self.fn, self.x, self.sim, self.kparams, self.scale, self.row_args = fn, x, sim, kparams, scale, row_args
    self.axis_name = axis_name
    rows = sim.shape[0]
    self.count = next(p for p in (PIECES, 2, 1) if rows % p == 0)
    self.size = rows // self.count

  def take(self, i: jax.Array, *arrays: jax.Array) -> list[jax.Array]:
    return [jax.lax.dynamic_slice_in_dim(a, i * self.size, self.size) for a in arrays]

  def put(self, whole: jax.Array, i: jax.Array, part: jax.Array) -> jax.Array:
    return jax.lax.dynamic_update_slice_in_dim(whole, part, i * self.size, 0)

  def log_k(self, i: jax.Array) -> jax.Array:
    x_i, sim_i, *ra_i = self.take(i, self.x, self.sim, *self.row_args)
    return self.scale * self.fn(x_i, sim_i, self.kparams, *ra_i)

  def loop(self, body: Callable[[jax.Array, Any], Any], init: Any) -> Any:
    return jax.lax.fori_loop(0, self.count, body, init)

  def row_lse(self, beta: jax.Array | None, like: jax.Array) -> jax.Array:
    """LSE_j(log K_ij + beta_j) for the rows held here."""
    def body(i, out):
      lk = self.log_k(i)
      return self.put(out, i, jax.nn.logsumexp(lk if beta is None else lk + beta[None, :], axis=1))
    return self.loop(body, jnp.zeros_like(like))

  def plan(self, i: jax.Array, alpha: jax.Array, beta: jax.Array) -> jax.Array:
    """P = exp(log K + alpha_i + beta_j) of piece ``i``."""
    (alpha_i,) = self.take(i, alpha)
    return jnp.exp(self.log_k(i) + alpha_i[:, None] + beta[None, :])

  def col_lse(self, alpha: jax.Array, like: jax.Array) -> jax.Array:
    """LSE_i(log K_ij + alpha_i) over every row (online over the pieces, then over the devices)."""
    def body(i, acc):
      top, total = acc
      (alpha_i,) = self.take(i, alpha)
      part = self.log_k(i) + alpha_i[:, None]
      new_top = jnp.maximum(top, jnp.max(part, axis=0))
      return new_top, total * jnp.exp(top - new_top) + jnp.sum(jnp.exp(part - new_top[None, :]), axis=0)

    top, total = self.loop(body, (jnp.full_like(like, -jnp.inf), jnp.zeros_like(like)))
    lse = top + jnp.log(total)
    if self.axis_name is None:
      return lse
    top = jax.lax.pmax(lse, self.axis_name)
    return top + jnp.log(jax.lax.psum(jnp.exp(lse - top), self.axis_name))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _kept(static: tuple, x: jax.Array, sim: jax.Array, kparams: Any, scale: jax.Array, row_args: tuple,
          params: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
  return _kept_fwd(static, x, sim, kparams, scale, row_args, params)[0]


def _kept_fwd(static: tuple, x: jax.Array, sim: jax.Array, kparams: Any, scale: jax.Array, row_args: tuple,
              params: Any):
  fn, update, lead, num_iterations, axis_name, with_mass = static
  block = _Pieces(fn, x, sim, kparams, scale, row_args, axis_name)
  f, g = update_maps(update, params)
  rows_like, cols_like = sim[:, 0], sim[0, :]
  r0 = block.row_lse(None, rows_like) if lead else None
  alpha = f(r0) if lead else jnp.zeros_like(rows_like)

  def iteration(alpha: jax.Array, _: Any) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    c = block.col_lse(alpha, cols_like)
    beta = g(c)
    r = block.row_lse(beta, rows_like)
    return f(r), (alpha, c, beta, r)

  alpha, kept = jax.lax.scan(iteration, alpha, None, length=num_iterations)
  beta = kept[2][-1]
  mass = jnp.zeros_like(scale)
  if with_mass:
    mass = block.loop(lambda i, total: total + jnp.sum(block.plan(i, alpha, beta)), mass)
    mass = mass if axis_name is None else jax.lax.psum(mass, axis_name)
  return (alpha, beta, mass), (x, sim, kparams, scale, row_args, params, kept, r0, alpha)


def _kept_bwd(static: tuple, residuals: tuple, cotangents: tuple[jax.Array, jax.Array]) -> tuple:
  """The reverse sweep: per iteration the row and column softmaxes recomputed from the kept block, piece by
  piece, their cotangents accumulated into one [r, B] array, and one psum of a B-vector."""
  fn, update, lead, _, axis_name, with_mass = static
  x, sim, kparams, scale, row_args, params, kept, r0, alpha = residuals
  alpha_bar, beta_bar, mass_bar = cotangents
  block = _Pieces(fn, x, sim, kparams, scale, row_args, axis_name)
  f, g = update_maps(update, params)

  def add(k_bar: jax.Array, i: jax.Array, part: jax.Array) -> jax.Array:
    (old,) = block.take(i, k_bar)
    return block.put(k_bar, i, old + part)

  k_bar = as_varying(jnp.zeros(sim.shape[:1] + beta_bar.shape, sim.dtype), axis_name)
  if with_mass:  # mass = sum_ij P_ij: d P = mass_bar, into log K, alpha and beta (a per-device part)
    def mass_terms(i, acc):
      a_bar, b_bar, k_bar = acc
      plan = mass_bar * block.plan(i, alpha, kept[2][-1])
      (a_i,) = block.take(i, a_bar)
      return block.put(a_bar, i, a_i + jnp.sum(plan, axis=1)), b_bar + jnp.sum(plan, axis=0), add(k_bar, i, plan)

    alpha_bar, beta_bar, k_bar = block.loop(mass_terms, (alpha_bar, beta_bar, k_bar))

  def back(carry: tuple[jax.Array, ...], half_steps: tuple[jax.Array, ...]) -> tuple[tuple[jax.Array, ...], None]:
    a_bar, b_out, k_bar = carry  # cotangents of this iteration's alpha, of its beta (a per-device part), of log K
    alpha_prev, c, beta, r = half_steps
    r_bar = jax.vjp(f, r)[1](a_bar)[0]                      # alpha = f(r), r_i = LSE_j(log K_ij + beta_j)

    def rows_softmax(i, acc):
      b_part, k_bar = acc
      r_i, r_bar_i = block.take(i, r, r_bar)
      w = jnp.exp(block.log_k(i) + beta[None, :] - r_i[:, None])
      return b_part + r_bar_i @ w, add(k_bar, i, r_bar_i[:, None] * w)

    b_part, k_bar = block.loop(rows_softmax, (b_out, k_bar))
    b_bar = b_part if axis_name is None else as_varying(jax.lax.psum(b_part, axis_name), axis_name)
    # beta = g(c), c_j = LSE_i(log K_ij + alpha_i); c as varying, or the VJP would sum the full b_bar over devices
    c_bar = jax.vjp(g, as_varying(c, axis_name))[1](b_bar)[0]

    def columns_softmax(i, acc):
      a_prev_bar, k_bar = acc
      (alpha_i,) = block.take(i, alpha_prev)
      v = jnp.exp(block.log_k(i) + alpha_i[:, None] - c[None, :])
      return block.put(a_prev_bar, i, v @ c_bar), add(k_bar, i, c_bar[None, :] * v)

    a_prev_bar, k_bar = block.loop(columns_softmax, (jnp.zeros_like(a_bar), k_bar))
    return (a_prev_bar, jnp.zeros_like(b_out), k_bar), None

  (a_bar, _, k_bar), _ = jax.lax.scan(back, (alpha_bar, beta_bar, k_bar), kept, reverse=True)
  r_bar = jax.vjp(f, r0)[1](a_bar)[0] if lead else None   # alpha_0 = f(LSE_j log K_ij), from beta = 0

  def finish(i, acc):
    # log K = scale * fn(...): d scale = sum(k_bar * log K) / scale; the rest through fn's VJP below.
    scale_sum, k_bar = acc
    lk = block.log_k(i)
    if lead:
      r0_i, r_bar_i = block.take(i, r0, r_bar)
      k_bar = add(k_bar, i, r_bar_i[:, None] * jnp.exp(lk - r0_i[:, None]))
    (k_i,) = block.take(i, k_bar)
    return scale_sum + jnp.sum(k_i * lk), k_bar

  scale_sum, k_bar = block.loop(finish, (jnp.zeros_like(scale), k_bar))
  x_bar, sim_bar, kparams_bar, row_args_bar = jax.vjp(lambda *a: fn(a[0], a[1], a[2], *a[3]), x, sim, kparams,
                                                      row_args)[1](scale * k_bar)
  return x_bar, sim_bar, kparams_bar, scale_sum / scale, row_args_bar, jax.tree.map(jnp.zeros_like, params)


_kept.defvjp(_kept_fwd, _kept_bwd)
