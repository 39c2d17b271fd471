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

Differentiated by a ``jax.custom_vjp`` that is the reverse-mode derivative of exactly these unrolled
updates (equal to autodiff of the dense solvers to rounding; tests/ot_clip/test_coupling_rows.py):
the forward pass keeps the potentials and the LSEs of each half-step (vectors only); the backward
pass sweeps the half-steps in reverse, recomputing each softmax piece by piece and reducing the
column cotangents with one ``psum`` of a B-vector per half-step. The cotangent of log K is
accumulated in one [r, B] array when the rows' similarities are kept (no ``chunk_size``), or, chunked,
pulled back into the embeddings' cotangents piece by piece, so nothing of size B x B is held.
Plain autodiff of the unrolled updates kept about one [r, B] array per iteration (7-9 for 5
iterations at B = 8192 on 8 devices) and, chunked, one [B, d] cotangent per visit; this form keeps
~3 blocks, chunked ~4 [B, d] arrays and a few [chunk, B] pieces.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxlab.ot_clip.rows import CouplingRows, Kernel, as_varying, replicated_cotangent

UpdateMaps = tuple[Callable[[jax.Array], jax.Array], Callable[[jax.Array], jax.Array]]
#: The kept [r, B] block is visited in this many row pieces (if they divide r): every softmax is an
#: [r / pieces, B] transient beside the block (and, backwards, its cotangent).
PIECES = 4


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
  static = (kernel.fn, update, int(num_iterations), rows.axis_name, rows.chunk_size, with_mass)
  args = as_varying((kernel.params, kernel.scale, tuple(row_args), params), rows.axis_name)
  out = _solve(static, rows.x, rows.y, rows.sim, *args)
  return out if with_mass else out[:2]


def lse_pair(rows: CouplingRows, kernel: Kernel) -> tuple[jax.Array, jax.Array]:
  """(LSE_j log K_ij for the rows held here [r], LSE_i log K_ij over every row [B]): InfoNCE's two directions.

  With the same custom VJP: both softmaxes are recomputed piece by piece in the backward pass
  (plain autodiff of the two reductions kept ~1 more [r, B] array).
  """
  kparams, scale = as_varying((kernel.params, kernel.scale), rows.axis_name)
  return _lse((kernel.fn, rows.axis_name, rows.chunk_size), rows.x, rows.y, rows.sim, kparams, scale)


class _Pieces:
  """log K of the rows held here, piece by piece (pieces of the kept block, or chunks recomputed from x y^T).

  Backwards, ``pull`` takes a piece's cotangent of log K: kept, into the block's cotangent; chunked,
  straight into the cotangents of the embeddings, of the kernel's parameters and of the scale.
  """

  def __init__(self, fn: Callable[..., jax.Array], x: jax.Array, y: jax.Array, sim: jax.Array | None, kparams: Any,
               scale: jax.Array, row_args: tuple, axis_name: Any, chunk_size: int | None):
    self.fn, self.x, self.y, self.sim, self.kparams, self.scale, self.row_args = fn, x, y, sim, kparams, scale, row_args
    self.axis_name = axis_name
    rows = x.shape[0]
    self.size = chunk_size if sim is None else rows // next(p for p in (PIECES, 2, 1) if rows % p == 0)
    self.count = rows // self.size

  def take(self, i: jax.Array, *arrays: jax.Array) -> list[jax.Array]:
    return [jax.lax.dynamic_slice_in_dim(a, i * self.size, self.size) for a in arrays]

  def put(self, whole: jax.Array, i: jax.Array, part: jax.Array) -> jax.Array:
    return jax.lax.dynamic_update_slice_in_dim(whole, part, i * self.size, 0)

  def add(self, whole: jax.Array, i: jax.Array, part: jax.Array) -> jax.Array:
    (old,) = self.take(i, whole)
    return self.put(whole, i, old + part)

  def sim_of(self, i: jax.Array) -> jax.Array:
    if self.sim is not None:
      return self.take(i, self.sim)[0]
    (x_i,) = self.take(i, self.x)
    return x_i @ self.y.T

  def log_k(self, i: jax.Array) -> jax.Array:
    x_i, *ra_i = self.take(i, self.x, *self.row_args)
    return self.scale * self.fn(x_i, self.sim_of(i), self.kparams, *ra_i)

  def loop(self, body: Callable[[jax.Array, Any], Any], init: Any) -> Any:
    return jax.lax.fori_loop(0, self.count, body, init)

  def plan(self, i: jax.Array, alpha: jax.Array, beta: jax.Array) -> jax.Array:
    """P = exp(log K + alpha_i + beta_j) of piece ``i``."""
    (alpha_i,) = self.take(i, alpha)
    return jnp.exp(self.log_k(i) + alpha_i[:, None] + beta[None, :])

  def row_lse(self, beta: jax.Array | None) -> jax.Array:
    """LSE_j(log K_ij + beta_j) for the rows held here."""
    def body(i, out):
      lk = self.log_k(i)
      return self.put(out, i, jax.nn.logsumexp(lk if beta is None else lk + beta[None, :], axis=1))
    return self.loop(body, jnp.zeros_like(self.x[:, 0]))

  def col_lse(self, alpha: jax.Array | None) -> jax.Array:
    """LSE_i(log K_ij + alpha_i) over every row (online over the pieces, then over the devices)."""
    def body(i, acc):
      top, total = acc
      part = self.log_k(i)
      if alpha is not None:
        part = part + self.take(i, alpha)[0][:, None]
      new_top = jnp.maximum(top, jnp.max(part, axis=0))
      return new_top, total * jnp.exp(top - new_top) + jnp.sum(jnp.exp(part - new_top[None, :]), axis=0)

    like = jnp.zeros_like(self.x[:1, 0]) + jnp.zeros_like(self.y[:, 0])  # [B], varying where x is
    top, total = self.loop(body, (like - jnp.inf, like))
    lse = top + jnp.log(total)
    if self.axis_name is None:
      return lse
    top = jax.lax.pmax(lse, self.axis_name)
    return top + jnp.log(jax.lax.psum(jnp.exp(lse - top), self.axis_name))

  # --- backwards ---------------------------------------------------------------------------------

  def zero_cotangents(self) -> dict[str, Any]:
    if self.sim is not None:
      return {"k": jnp.zeros_like(self.sim), "scale": as_varying(jnp.zeros_like(self.scale), self.axis_name)}
    zeros = jax.tree.map(jnp.zeros_like, {"x": self.x, "y": self.y, "kparams": self.kparams,
                                          "row_args": self.row_args, "scale": self.scale})
    return as_varying(zeros, self.axis_name)

  def pull(self, acc: dict[str, Any], i: jax.Array, k_i: jax.Array) -> dict[str, Any]:
    """Adds piece ``i``'s cotangent of log K."""
    if self.sim is not None:  # log K = scale * fn(...): d scale = sum(d log K * log K) / scale
      return {"k": self.add(acc["k"], i, k_i), "scale": acc["scale"] + jnp.sum(k_i * self.log_k(i))}
    x_i, *ra_i = self.take(i, self.x, *self.row_args)
    sim_i = x_i @ self.y.T
    out, vjp = jax.vjp(lambda x_, s_, kp, ra: self.fn(x_, s_, kp, *ra), x_i, sim_i, self.kparams, tuple(ra_i))
    x_bar, sim_bar, kp_bar, ra_bar = vjp(self.scale * k_i)
    x_bar = x_bar + sim_bar @ self.y
    return {"x": self.add(acc["x"], i, x_bar), "y": acc["y"] + sim_bar.T @ x_i,
            "kparams": jax.tree.map(jnp.add, acc["kparams"], kp_bar),
            "row_args": tuple(self.add(a, i, b) for a, b in zip(acc["row_args"], ra_bar)),
            "scale": acc["scale"] + jnp.sum(k_i * out)}

  def finish(self, acc: dict[str, Any]) -> tuple[jax.Array, jax.Array, jax.Array | None, Any, jax.Array, tuple]:
    """(x_bar, y_bar, sim_bar, kparams_bar, scale_bar, row_args_bar) from the accumulated cotangents."""
    if self.sim is None:
      return acc["x"], acc["y"], None, acc["kparams"], acc["scale"], acc["row_args"]
    k_bar, scale_bar = acc["k"], acc["scale"] / self.scale
    x_bar, sim_bar, kp_bar, ra_bar = jax.vjp(lambda x_, s_, kp, ra: self.fn(x_, s_, kp, *ra), self.x, self.sim,
                                             self.kparams, self.row_args)[1](self.scale * k_bar)
    return x_bar, jnp.zeros_like(self.y), sim_bar, kp_bar, scale_bar, ra_bar


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _solve(static: tuple, x: jax.Array, y: jax.Array, sim: jax.Array | None, kparams: Any, scale: jax.Array,
           row_args: tuple, params: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
  return _solve_fwd(static, x, y, sim, kparams, scale, row_args, params)[0]


def _solve_fwd(static: tuple, x: jax.Array, y: jax.Array, sim: jax.Array | None, kparams: Any, scale: jax.Array,
               row_args: tuple, params: Any):
  fn, update, num_iterations, axis_name, chunk_size, with_mass = static
  block = _Pieces(fn, x, y, sim, kparams, scale, row_args, axis_name, chunk_size)
  f, g = update_maps(update, params)
  lead = update == "dbot"
  r0 = block.row_lse(None) if lead else None
  alpha = f(r0) if lead else jnp.zeros_like(x[:, 0])

  def iteration(alpha: jax.Array, _: Any) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    c = block.col_lse(alpha)
    beta = g(c)
    r = block.row_lse(beta)
    return f(r), (alpha, c, beta, r)

  alpha, kept = jax.lax.scan(iteration, alpha, None, length=num_iterations)
  beta = kept[2][-1]
  mass = jnp.zeros_like(scale)
  if with_mass:
    mass = block.loop(lambda i, total: total + jnp.sum(block.plan(i, alpha, beta)), mass)
    mass = mass if axis_name is None else jax.lax.psum(mass, axis_name)
  return (alpha, beta, mass), (x, y, sim, kparams, scale, row_args, params, kept, r0, alpha)


def _solve_bwd(static: tuple, residuals: tuple, cotangents: tuple[jax.Array, jax.Array, jax.Array]) -> tuple:
  """The reverse sweep: per iteration the row and column softmaxes recomputed piece by piece, their
  cotangents pulled into ``acc``, and one psum of a B-vector."""
  fn, update, _, axis_name, chunk_size, with_mass = static
  x, y, sim, kparams, scale, row_args, params, kept, r0, alpha = residuals
  alpha_bar, beta_bar, mass_bar = cotangents
  block = _Pieces(fn, x, y, sim, kparams, scale, row_args, axis_name, chunk_size)
  f, g = update_maps(update, params)
  acc = block.zero_cotangents()

  if with_mass:  # mass = sum_ij P_ij: d P = mass_bar, into log K, alpha and beta (a per-device part)
    mass_bar = replicated_cotangent(mass_bar, x, axis_name)

    def mass_terms(i, carry):
      a_bar, b_bar, acc = carry
      plan = mass_bar * block.plan(i, alpha, kept[2][-1])
      return block.add(a_bar, i, jnp.sum(plan, axis=1)), b_bar + jnp.sum(plan, axis=0), block.pull(acc, i, plan)

    alpha_bar, beta_bar, acc = block.loop(mass_terms, (alpha_bar, beta_bar, acc))

  def back(carry: tuple[Any, ...], half_steps: tuple[jax.Array, ...]) -> tuple[tuple[Any, ...], None]:
    a_bar, b_out, acc = carry  # cotangents of this iteration's alpha, of its beta (a per-device part), pulled
    alpha_prev, c, beta, r = half_steps
    r_bar = jax.vjp(f, r)[1](a_bar)[0]                      # alpha = f(r), r_i = LSE_j(log K_ij + beta_j)

    def rows_softmax(i, carry):
      b_part, acc = carry
      r_i, r_bar_i = block.take(i, r, r_bar)
      w = jnp.exp(block.log_k(i) + beta[None, :] - r_i[:, None])
      return b_part + r_bar_i @ w, block.pull(acc, i, r_bar_i[:, None] * w)

    b_part, acc = block.loop(rows_softmax, (b_out, acc))
    b_bar = b_part if axis_name is None else as_varying(jax.lax.psum(b_part, axis_name), axis_name)
    # beta = g(c), c_j = LSE_i(log K_ij + alpha_i); c as varying, or the VJP would sum the full b_bar over devices
    c_bar = jax.vjp(g, as_varying(c, axis_name))[1](b_bar)[0]

    def columns_softmax(i, carry):
      a_prev_bar, acc = carry
      (alpha_i,) = block.take(i, alpha_prev)
      v = jnp.exp(block.log_k(i) + alpha_i[:, None] - c[None, :])
      return block.put(a_prev_bar, i, v @ c_bar), block.pull(acc, i, c_bar[None, :] * v)

    a_prev_bar, acc = block.loop(columns_softmax, (jnp.zeros_like(a_bar), acc))
    return (a_prev_bar, jnp.zeros_like(b_out), acc), None

  (a_bar, _, acc), _ = jax.lax.scan(back, (alpha_bar, beta_bar, acc), kept, reverse=True)
  if update == "dbot":  # alpha_0 = f(LSE_j log K_ij), from beta = 0
    r_bar = jax.vjp(f, r0)[1](a_bar)[0]

    def lead_softmax(i, acc):
      r0_i, r_bar_i = block.take(i, r0, r_bar)
      return block.pull(acc, i, r_bar_i[:, None] * jnp.exp(block.log_k(i) - r0_i[:, None]))

    acc = block.loop(lead_softmax, acc)
  x_bar, y_bar, sim_bar, kparams_bar, scale_bar, row_args_bar = block.finish(acc)
  return x_bar, y_bar, sim_bar, kparams_bar, scale_bar, row_args_bar, jax.tree.map(jnp.zeros_like, params)


_solve.defvjp(_solve_fwd, _solve_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _lse(static: tuple, x: jax.Array, y: jax.Array, sim: jax.Array | None, kparams: Any, scale: jax.Array
         ) -> tuple[jax.Array, jax.Array]:
  return _lse_fwd(static, x, y, sim, kparams, scale)[0]


def _lse_fwd(static: tuple, x: jax.Array, y: jax.Array, sim: jax.Array | None, kparams: Any, scale: jax.Array):
  fn, axis_name, chunk_size = static
  block = _Pieces(fn, x, y, sim, kparams, scale, (), axis_name, chunk_size)
  r, c = block.row_lse(None), block.col_lse(None)
  return (r, c), (x, y, sim, kparams, scale, r, c)


def _lse_bwd(static: tuple, residuals: tuple, cotangents: tuple[jax.Array, jax.Array]) -> tuple:
  fn, axis_name, chunk_size = static
  x, y, sim, kparams, scale, r, c = residuals
  r_bar, c_bar = cotangents
  c_bar = replicated_cotangent(c_bar, x, axis_name)
  block = _Pieces(fn, x, y, sim, kparams, scale, (), axis_name, chunk_size)

  def body(i, acc):
    lk = block.log_k(i)
    r_i, r_bar_i = block.take(i, r, r_bar)
    return block.pull(acc, i, r_bar_i[:, None] * jnp.exp(lk - r_i[:, None]) + c_bar[None, :] * jnp.exp(lk - c[None, :]))

  x_bar, y_bar, sim_bar, kparams_bar, scale_bar, _ = block.finish(block.loop(body, block.zero_cotangents()))
  return x_bar, y_bar, sim_bar, kparams_bar, scale_bar


_lse.defvjp(_lse_fwd, _lse_bwd)
