"""The rows of the B x B coupling that one program holds, visited in blocks: the reductions every OT-CLIP loss is made of.

Every loss of Shi, Fan & Yan (ICML 2024, Sec. 3-4) reads the log-kernel log K_ij = -C_ij / eps of
C = 1 - X Y^T (or InfoNCE's logits) only through

* row reductions, LSE_j(log K_ij + beta_j), which need one row and every column;
* column reductions, LSE_i(log K_ij + alpha_i), which need every row;
* totals, sum_ij f(log K_ij), and the diagonal log K_ii.

So the coupling can be held by rows. :class:`CouplingRows` holds the rows ``x`` of this program
([r, d]: the device's share of the batch inside ``jax.shard_map``, or the whole batch) and every
column ``y`` ([B, d]: the texts all-gathered once, as open_clip's ``gather_with_grad``; the
gradient of the gather is a reduce-scatter). A row reduction stays local; a column reduction is a
partial LSE over the rows held here, combined over the devices with one ``pmax`` and one ``psum``
of a B-vector. Within a program the rows are visited in blocks of ``chunk_size`` (``lax.map``),
each block's similarities recomputed from the embeddings; with no ``chunk_size`` the rows form one
block whose similarities ``x y^T`` are computed once and kept ([r, B]: the coupling's share).

Each visit (SigLIP's total, FGW's moments, a one-sided LSE) is ``jax.checkpoint``-ed: the backward
pass recomputes a block's exponentials from its inputs (the block of similarities or the embeddings,
and vectors), so autodiff keeps no B x B array per visit. The Sinkhorn-type solves and InfoNCE's
pair of LSEs have their own reverse sweep (``potentials.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable

import jax
import jax.numpy as jnp

from jaxlab.errors import InputError

AxisName = Hashable | tuple[Hashable, ...]
# A block's log-kernel (or logits) from (x block [c, d], similarities x_c y^T [c, B], row arguments [c, ...]).
BlockFn = Callable[..., jax.Array]


def as_varying(tree: Any, axis_name: AxisName | None) -> Any:
  """``tree`` with every leaf typed as varying over ``axis_name`` (inside ``shard_map``; identity for None).

  A custom VJP returns one cotangent per input with the input's type; marking the replicated
  inputs varying first makes every cotangent a per-device partial, which ``pcast``'s transpose sums.
  """
  if axis_name is None:
    return tree
  axes = tuple(axis_name) if isinstance(axis_name, tuple) else (axis_name,)

  def cast(leaf: jax.Array) -> jax.Array:
    varying = getattr(getattr(jax.typeof(leaf), "mat", None), "varying", frozenset())
    missing = tuple(a for a in axes if a not in varying)
    return jax.lax.pcast(leaf, missing, to="varying") if missing else leaf

  return jax.tree.map(cast, tree)


def replicated_cotangent(cotangent: Any, x: jax.Array, axis_name: AxisName | None) -> Any:
  """The whole cotangent of an output that every device holds alike (a column LSE, a total), given this copy's.

  Inside ``jax.shard_map`` values carry their varying type (``x``, this device's rows, varies over
  ``axis_name``) and such an output's cotangent is already the whole one. Inside ``pmap`` (or
  ``shard_map(check_vma=False)``) nothing is typed and ``psum`` transposes to ``psum``: each device's
  copy of the output gets its own cotangent, and the output's is their sum over the devices. (So
  there a device's gradient is n times its share, as for every ``psum``-ed loss in ``pmap``: a
  ``pmean`` of the parameters' gradients gives the global batch's.)
  """
  if axis_name is None:
    return cotangent
  axes = tuple(axis_name) if isinstance(axis_name, tuple) else (axis_name,)
  varying = getattr(getattr(jax.typeof(x), "mat", None), "varying", frozenset())
  return cotangent if all(a in varying for a in axes) else jax.lax.psum(cotangent, axis_name)


@dataclasses.dataclass(frozen=True)
class Kernel:
  """A block's log-kernel ``scale * fn(x_c, sim_c, params, *row_args_c)``: a module-level ``fn``, arrays ``params``.

  ``scale`` is 1 / eps (the logit scale). Called as a :data:`BlockFn`; the explicit form lets a
  custom VJP differentiate it (``potentials.py``): the cotangent of ``scale`` is then
  sum(cotangent * log K) / scale, with no other B x B array.
  """
  fn: Callable[..., jax.Array]
  params: Any
  scale: jax.Array

  def __call__(self, x_c: jax.Array, sim_c: jax.Array, *row_args: jax.Array) -> jax.Array:
    return self.scale * self.fn(x_c, sim_c, self.params, *row_args)


@dataclasses.dataclass(frozen=True)
class CouplingRows:
  """The coupling rows held here: ``x`` [r, d] against all columns ``y`` [B, d], both L2-normalised.

  Attributes:
    x: this program's rows of the (normalised, compute-dtype) image embeddings.
    y: every column's (normalised) text embedding.
    y_rows: the text embeddings of the rows held here (the diagonal partners of ``x``).
    axis_name: the manual mesh axis (or axes) the rows are split over; None if all rows are here.
    chunk_size: rows per block; None for one block whose similarities ``sim`` are kept.
    sim: ``x @ y.T`` when kept (``chunk_size`` None), else None.
  """
  x: jax.Array
  y: jax.Array
  y_rows: jax.Array
  axis_name: AxisName | None
  chunk_size: int | None
  sim: jax.Array | None

  @classmethod
  def build(cls, x: jax.Array, y_rows: jax.Array, *, axis_name: AxisName | None = None,
            chunk_size: int | None = None) -> CouplingRows:
    """Rows from normalised local embeddings: gathers the texts over ``axis_name``; checks ``chunk_size``."""
    rows = x.shape[0]
    if chunk_size is not None and chunk_size < rows and rows % chunk_size:
      where = f"the {rows} rows each device holds" if axis_name is not None else f"the batch's {rows} rows"
      raise InputError(f"chunk_size={chunk_size} must divide {where} (or be >= them); "
                       f"allowed: a divisor of {rows}, e.g. {_largest_divisor(rows, chunk_size)}")
    if chunk_size is not None and chunk_size >= rows:
      chunk_size = rows
    y = y_rows if axis_name is None else jax.lax.all_gather(y_rows, axis_name, tiled=True)
    sim = x @ y.T if chunk_size is None else None
    return cls(x, y, y_rows, axis_name, chunk_size, sim)

  @property
  def num_rows(self) -> int:
    """B, the global batch (all rows of the coupling)."""
    return self.y.shape[0]

  @property
  def local_rows(self) -> int:
    return self.x.shape[0]

  def offset(self) -> jax.Array | int:
    """The global index of the first row held here."""
    if self.axis_name is None:
      return 0
    return jax.lax.axis_index(self.axis_name) * self.local_rows

  def local(self, column_vector: jax.Array) -> jax.Array:
    """The entries of a column [B] vector at the rows held here (their diagonal partners)."""
    if self.axis_name is None:
      return column_vector
    return jax.lax.dynamic_slice_in_dim(column_vector, self.offset(), self.local_rows)

  def diag_sim(self) -> jax.Array:
    """S_ii = <x_i, y_i> for the rows held here (from the embeddings: no B x B array)."""
    return jnp.sum(self.x * self.y_rows, axis=1)

  # --- one visit of every block -------------------------------------------------------------

  def visit(self, fn: Callable[..., tuple[Any, Any]], *row_args: jax.Array) -> tuple[Any, Any]:
    """``fn(x_c, sim_c, *row_args_c) -> (row_out, col_part)`` on every block of rows.

    Returns the row outputs for the rows held here (blocks concatenated) and the column parts
    stacked over the blocks ([blocks, ...]); either may be None. ``fn`` is checkpointed.
    """
    if self.chunk_size is None:
      row_out, col_part = jax.checkpoint(fn)(self.x, self.sim, *row_args)
      return row_out, jax.tree.map(lambda c: c[None], col_part)
    c, blocks, y = self.chunk_size, self.local_rows // self.chunk_size, self.y
    # The block's similarities are computed inside the checkpoint: recomputed, never saved.
    body = jax.checkpoint(lambda args: fn(args[0], args[0] @ y.T, *args[1:]))
    split = [a.reshape((blocks, c) + a.shape[1:]) for a in (self.x,) + row_args]
    if blocks == 1:
      row_out, col_part = jax.tree.map(lambda v: v[None], body([a[0] for a in split]))
    else:
      row_out, col_part = jax.lax.map(body, split)
    row_out = jax.tree.map(lambda r: r.reshape((self.local_rows,) + r.shape[2:]), row_out)
    return row_out, col_part

  # --- reductions ------------------------------------------------------------------------------

  def psum(self, value: Any) -> Any:
    """A sum over the devices holding rows (identity with all rows here)."""
    return value if self.axis_name is None else jax.lax.psum(value, self.axis_name)

  def lse_over_rows(self, parts: jax.Array) -> jax.Array:
    """LSE over blocks [blocks, B] and devices: the column log-sum-exp over every row."""
    lse = jax.nn.logsumexp(parts, axis=0) if parts.shape[0] > 1 else parts[0]
    if self.axis_name is None:
      return lse
    top = jax.lax.pmax(jax.lax.stop_gradient(lse), self.axis_name)  # any shift is exact; this one is safe
    return top + jnp.log(jax.lax.psum(jnp.exp(lse - top), self.axis_name))

  def row_lse(self, kernel: BlockFn, beta: jax.Array | None = None, *row_args: jax.Array) -> jax.Array:
    """LSE_j(log K_ij + beta_j) for the rows held here ([r]); ``beta`` [B] or None for 0."""
    def fn(x_c, sim_c, *ra):
      logk = kernel(x_c, sim_c, *ra)
      return jax.nn.logsumexp(logk if beta is None else logk + beta[None, :], axis=1), None
    return self.visit(fn, *row_args)[0]

  def col_lse(self, kernel: BlockFn, alpha: jax.Array | None = None, *row_args: jax.Array) -> jax.Array:
    """LSE_i(log K_ij + alpha_i) over every row of the coupling ([B]); ``alpha`` [r] or None for 0."""
    if alpha is None:
      def fn(x_c, sim_c, *ra):
        return None, jax.nn.logsumexp(kernel(x_c, sim_c, *ra), axis=0)
      return self.lse_over_rows(self.visit(fn, *row_args)[1])

    def fn_alpha(x_c, sim_c, a_c, *ra):
      return None, jax.nn.logsumexp(kernel(x_c, sim_c, *ra) + a_c[:, None], axis=0)
    return self.lse_over_rows(self.visit(fn_alpha, alpha, *row_args)[1])

  def total(self, entry: BlockFn, *row_args: jax.Array) -> jax.Array:
    """sum_ij entry(...)_ij over the whole coupling (a scalar, the same on every device)."""
    def fn(x_c, sim_c, *ra):
      return None, jnp.sum(entry(x_c, sim_c, *ra))
    return self.psum(jnp.sum(self.visit(fn, *row_args)[1]))

  def mean_over_rows(self, per_row: jax.Array) -> jax.Array:
    """1/B sum_i v_i over every row, from this program's [r] entries."""
    return self.psum(jnp.sum(per_row)) / self.num_rows

  def row_argmax(self) -> jax.Array:
    """argmax_j S_ij for the rows held here (global column indices)."""
    return self.visit(lambda x_c, sim_c: (jnp.argmax(sim_c, axis=1), None))[0]


def _largest_divisor(n: int, at_most: int) -> int:
  return max(k for k in range(1, min(n, at_most) + 1) if n % k == 0)
