"""Where a loss's B x B coupling lives: whole (the dense definition), chunked, or split by rows over a mesh axis.

``get_loss`` calls :func:`call_loss`, which picks the form from where it runs:

1. inside ``jax.shard_map`` (or ``pmap``) whose manual axis is ``axis_name``: the embeddings are
   this device's rows and the loss is the global batch's, from explicit collectives
   (``rows.CouplingRows``; open_clip's ``gather_with_grad``, for every loss);
2. under ``jax.jit`` with the rows split over a mesh axis, named by ``axis_name`` (with a mesh from
   ``jax.set_mesh`` or ``mesh=``) or read from the embeddings' type (an ``Explicit`` mesh axis): the
   per-device form of 1, wrapped in ``jax.shard_map`` over that axis, so each device holds its
   rows of the coupling [B/n, B];
3. otherwise ``chunk_size`` rows at a time (no B x B array), or, with neither, the dense definition.

All three compute the same loss as the dense definition (tests/ot_clip/test_coupling_rows.py).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Hashable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.errors import InputError, check_int, is_traced
from jaxlab.ot_clip.contrastive import guard_logit_scale
from jaxlab.ot_clip.ot_losses import MAX_SCALE_RTOL
from jaxlab.ot_clip.rows import AxisName, CouplingRows
from jaxlab.ot_clip.similarity import normalized_pair

# Options of the dense form that solve on the whole cost with ott (no row-split form).
WHOLE_COST_OPTIONS = ("implicit", "use_ott")


def check_chunk_size(chunk_size: Any) -> int | None:
  """None, or an int >= 1 (InputError naming the value otherwise)."""
  if chunk_size is None:
    return None
  return check_int(chunk_size, "chunk_size", 1, "rows of the coupling per block; None: no chunking", got=True)


def check_axis_name(axis_name: Any) -> tuple[Hashable, ...] | None:
  """None, a mesh axis name, or a tuple of names, as a tuple (InputError otherwise)."""
  if axis_name is None:
    return None
  names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
  if not names or not all(isinstance(n, str) and n for n in names):
    raise InputError(f"axis_name must be a mesh axis name (e.g. 'data') or a tuple of names, got {axis_name!r}")
  return names


def check_row_form(name: str, hyper: dict[str, Any]) -> None:
  """InputError if a hyper-parameter asks for a whole-cost solver, which has no chunked or sharded form."""
  for key in WHOLE_COST_OPTIONS:
    if hyper.get(key):
      raise InputError(f"loss {name!r}: {key}=True solves with ott on the whole B x B cost, which has no chunked "
                       f"or row-sharded form; allowed with chunk_size or axis_name: {key}=False")


def _spec_axes(entry: Any) -> tuple[Hashable, ...]:
  if entry is None:
    return ()
  return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def explicit_row_axes(x: Any) -> tuple[tuple[Hashable, ...], Any]:
  """(the Explicit mesh axes that split ``x``'s rows, their mesh) from ``x``'s type; ((), None) if none."""
  sharding = getattr(jax.typeof(x), "sharding", None)
  if sharding is None or sharding.mesh.empty or not sharding.spec:
    return (), None
  axes = _spec_axes(sharding.spec[0])
  if not axes or any(a not in sharding.mesh.explicit_axes for a in axes):
    return (), None
  return axes, sharding.mesh


def _axis_product(mesh: Any, axes: tuple[Hashable, ...]) -> int:
  return math.prod(int(mesh.shape[a]) for a in axes)


def _row_spec(axes: tuple[Hashable, ...]) -> P:
  return P(axes[0] if len(axes) == 1 else axes)


def _mesh_for(axes: tuple[Hashable, ...], mesh: Any, x: Any) -> Any:
  """The mesh whose ``axes`` split the rows: ``mesh=``, else ``jax.set_mesh``'s, else the embeddings' type's."""
  candidates = [mesh, jax.sharding.get_abstract_mesh(), explicit_row_axes(x)[1]]
  for m in candidates:
    if m is not None and not m.empty and all(a in m.axis_names for a in axes):
      return m
  given = ", ".join(repr(a) for a in axes)
  raise InputError(f"axis_name={given} names no axis of the mesh in use (set_mesh: "
                   f"{tuple(jax.sharding.get_abstract_mesh().axis_names) or 'none'}); call the loss inside "
                   "jax.shard_map over that axis, or under jax.set_mesh(mesh) (or with get_loss(..., mesh=mesh)) "
                   "whose mesh has it")


def on_rows(dense: Callable[..., Any], per_rows: Callable[..., Any], x: Any, y: Any, scalars: tuple[Any, ...], *,
            chunk_size: int | None, axis_name: tuple[Hashable, ...] | None, mesh: Any = None) -> Any:
  """``dense(x, y, *scalars)``, or ``per_rows(rows, *scalars)`` on the coupling's rows where they are split or chunked.

  ``per_rows`` gets a :class:`~jaxlab.ot_clip.rows.CouplingRows` of the normalised embeddings
  and returns what ``dense`` returns, the same on every device. ``None`` scalars stay None.
  """
  form = _form(x, axis_name, mesh)
  if form is None and chunk_size is None:
    return dense(x, y, *scalars)

  def local(x, y, scalars, axis):
    x, y = normalized_pair(x, y)
    return per_rows(CouplingRows.build(x, y, axis_name=axis, chunk_size=chunk_size), *scalars)

  if form is None:
    return local(x, y, scalars, None)
  if form[0] == "manual":
    return local(x, y, scalars, _axis(form[1]))
  _, axes, m = form
  spec = _row_spec(axes)
  given = tuple(jnp.asarray(s) for s in scalars if s is not None)

  def sharded(x, y, *given):
    it = iter(given)
    return local(x, y, tuple(None if s is None else next(it) for s in scalars), _axis(axes))

  if any(a in m.explicit_axes for a in axes):  # sharding in types: shard_map takes the rows as they are split
    x, y = (jax.sharding.reshard(v, NamedSharding(m, spec)) for v in (x, y))
  return jax.shard_map(sharded, mesh=m, in_specs=(spec, spec) + (P(),) * len(given), out_specs=P())(x, y, *given)


def call_loss(dense: Callable[..., jax.Array], blocked: Callable[..., jax.Array], x: Any, y: Any,
              logit_scale: Any, logit_bias: Any, hyper: dict[str, Any], *, chunk_size: int | None,
              axis_name: tuple[Hashable, ...] | None, mesh: Any = None) -> jax.Array:
  """The loss ``dense(x, y, logit_scale, logit_bias, **hyper)`` in the form that fits where it runs (module doc)."""
  if _form(x, axis_name, mesh) is None and chunk_size is None:
    return dense(x, y, logit_scale, logit_bias, **hyper)
  # The dense definition's checks (shapes, dtypes, a concrete scale and bias), without computing it.
  jax.eval_shape(lambda a, b: dense(a, b, logit_scale, logit_bias, **hyper),
                 jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)),
                 jax.ShapeDtypeStruct(np.shape(y), jnp.result_type(y)))
  loss = on_rows(lambda *a: None, lambda rows, s, b: blocked(rows, s, b, **hyper), x, y, (logit_scale, logit_bias),
                 chunk_size=chunk_size, axis_name=axis_name, mesh=mesh)
  bound = hyper.get("max_logit_scale")
  if bound is not None and is_traced(logit_scale):  # the dense form's promise (``ot_losses.unbalanced_ot_loss``)
    loss = jnp.where(logit_scale <= bound * (1 + MAX_SCALE_RTOL), loss, jnp.nan)
  return guard_logit_scale(loss, logit_scale)


def i2t_accuracy(x: jax.Array, y: jax.Array, *, chunk_size: int | None = None,
                 axis_name: tuple[Hashable, ...] | None = None, mesh: Any = None) -> jax.Array:
  """The in-batch image->text retrieval accuracy: the share of rows i whose most similar text (cosine) is y_i."""
  def dense(x, y):
    x, y = normalized_pair(x, y)
    return jnp.mean(jnp.argmax(x @ y.T, axis=1) == jnp.arange(x.shape[0]))

  def per_rows(rows):
    hits = rows.row_argmax() == rows.offset() + jnp.arange(rows.local_rows)
    return rows.mean_over_rows(hits.astype(rows.y.dtype))

  return on_rows(dense, per_rows, x, y, (), chunk_size=chunk_size, axis_name=axis_name, mesh=mesh)


def _axis(axes: tuple[Hashable, ...]) -> AxisName:
  return axes[0] if len(axes) == 1 else axes


def _form(x: Any, axis_name: tuple[Hashable, ...] | None, mesh: Any
          ) -> tuple[str, tuple[Hashable, ...]] | tuple[str, tuple[Hashable, ...], Any] | None:
  """("manual", axes) inside shard_map; ("shard", axes, mesh) to wrap in one; None: the rows are all here."""
  context = jax.sharding.get_abstract_mesh()
  if axis_name is not None:
    if all(a in context.manual_axes for a in axis_name):
      return "manual", axis_name
    m = _mesh_for(axis_name, mesh, x)
  else:
    axis_name, m = explicit_row_axes(x)
    if not axis_name:
      return None
  if _axis_product(m, axis_name) == 1:
    return None
  return "shard", axis_name, m
