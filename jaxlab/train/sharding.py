"""Shardings for train-state pytrees (from regex rules) and for batches (over the "data" axis).

A rule is ``(regex, spec)``: the first regex that ``re.search``-es a leaf's path
(``"params/Dense_0/kernel"``, ``"opt_state/0/mu/Dense_0/kernel"``) gives its ``PartitionSpec``;
leaves no rule matches are replicated. Because optimizer moments live under the same names as
their parameters, one rule shards a parameter and its moments alike.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

Rules = Sequence[tuple[str, Sequence[str | None] | P]]


def path_name(path: tuple[Any, ...]) -> str:
  """``(GetAttrKey('params'), DictKey('Dense_0'), ...)`` -> ``"params/Dense_0/..."``."""
  parts = []
  for key in path:
    for attr in ("name", "key", "idx"):
      if hasattr(key, attr):
        parts.append(str(getattr(key, attr)))
        break
    else:
      parts.append(str(key))
  return "/".join(parts)


def _check_fits(name: str, shape: tuple[int, ...], spec: P, mesh: Mesh) -> None:
  if len(spec) > len(shape):
    raise ValueError(f"sharding rule gives {name} (shape {shape}) spec {spec} with more axes than the array has")
  for dim, axes in zip(shape, spec):
    if axes is None:
      continue
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    size = 1
    for a in axes:
      if a not in mesh.shape:
        raise ValueError(f"sharding rule for {name} names mesh axis {a!r}; mesh axes are {tuple(mesh.shape)}")
      size *= mesh.shape[a]
    if dim % size:
      raise ValueError(
          f"sharding rule gives {name} (shape {shape}) spec {spec}: dimension {dim} is not divisible "
          f"by mesh size {size} of {axes}")


def tree_shardings(tree: Any, mesh: Mesh, rules: Rules = ()) -> Any:
  """A pytree of ``NamedSharding`` matching ``tree`` (arrays or ``ShapeDtypeStruct``s)."""
  compiled = [(re.compile(pattern), P(*spec)) for pattern, spec in rules]

  def leaf_sharding(path, leaf):
    name = path_name(path)
    shape = tuple(getattr(leaf, "shape", ()))
    for pattern, spec in compiled:
      if pattern.search(name):
        _check_fits(name, shape, spec, mesh)
        return NamedSharding(mesh, spec)
    return NamedSharding(mesh, P())

  return jax.tree_util.tree_map_with_path(leaf_sharding, tree)


def data_axis_size(mesh: Mesh, axis: str = "data") -> int:
  return mesh.shape[axis] if axis in mesh.shape else 1


def batch_sharding(mesh: Mesh, axis: str = "data") -> NamedSharding:
  """Leading (batch) axis split over ``axis``; other axes replicated."""
  return NamedSharding(mesh, P(axis if axis in mesh.shape else None))


def check_batch_divisible(global_batch_size: int, mesh: Mesh, axis: str = "data") -> None:
  n = data_axis_size(mesh, axis)
  num_processes = jax.process_count()
  if global_batch_size % n:
    raise ValueError(
        f"global batch size {global_batch_size} is not divisible by the {axis!r} mesh axis size {n}")
  if global_batch_size % num_processes:
    raise ValueError(
        f"global batch size {global_batch_size} is not divisible by the process count {num_processes}")


def host_to_global(local_batch: Any, sharding: NamedSharding) -> Any:
  """Per-process batch slices -> one global ``jax.Array`` per leaf (multi-host safe).

  On one process this is ``device_put``; on many, each process passes only its own rows.
  """
  return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), local_batch)
