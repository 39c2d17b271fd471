"""Shardings for train-state pytrees (regex rules, an FSDP strategy) and for batches.

A rule is ``(regex, spec)``: the first regex that ``re.search``-es a leaf's path
(``"params/Dense_0/kernel"``, ``"opt_state/0/mu/Dense_0/kernel"``) gives its ``PartitionSpec``.
Because optimizer moments live under the same names as their parameters, one rule shards a
parameter and its moments alike. Leaves no rule matches are sharded by the FSDP strategy when
one is given (``fsdp_axis``: every leaf of at least ``fsdp_min_size`` elements is split along its
largest dimension that the axis divides, as big_vision's ``fsdp`` rule does) and replicated
otherwise. ``sharding_report`` says which rules matched nothing and how many bytes stay
replicated.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxlab.errors import InputError

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


def _axes(entry: Any) -> tuple[str, ...]:
  if entry is None:
    return ()
  return (entry,) if isinstance(entry, str) else tuple(entry)


def _check_fits(name: str, shape: tuple[int, ...], spec: P, mesh: Mesh) -> None:
  if len(spec) > len(shape):
    raise InputError(f"sharding rule gives {name} (shape {shape}) spec {spec} with more axes than the array has")
  used = [a for entry in spec for a in _axes(entry)]
  if len(set(used)) != len(used):
    raise InputError(f"sharding spec {spec} for {name} uses a mesh axis twice")
  for dim, entry in zip(shape, spec):
    size = 1
    for a in _axes(entry):
      if a not in mesh.shape:
        raise InputError(f"sharding rule for {name} names mesh axis {a!r}; mesh axes are {tuple(mesh.shape)}")
      size *= mesh.shape[a]
    if dim % size:
      raise InputError(
          f"sharding rule gives {name} (shape {shape}) spec {spec}: dimension {dim} is not divisible "
          f"by mesh size {size} of {_axes(entry)}")


def compile_rules(rules: Rules) -> list[tuple[str, re.Pattern, P]]:
  """Checks and compiles rules; a bad regex or spec is an error naming the rule."""
  out = []
  for i, rule in enumerate(rules):
    if not (isinstance(rule, (tuple, list)) and len(rule) == 2 and isinstance(rule[0], str)):
      raise InputError(f"sharding rule {i} must be (regex, (mesh axes...)), got {rule!r}")
    pattern, spec = rule
    try:
      compiled = re.compile(pattern)
    except re.error as e:
      raise InputError(f"sharding rule {i} has an invalid regex {pattern!r}: {e}") from None
    if isinstance(spec, str) or not isinstance(spec, (tuple, list, P)):
      raise InputError(f"sharding rule {i} ({pattern!r}) needs a tuple of mesh axes (or None) per "
                       f"array dimension, e.g. (None, 'model'); got {spec!r}")
    out.append((pattern, compiled, P(*spec)))
  return out


def fsdp_spec(shape: tuple[int, ...], axis: str, mesh: Mesh, min_size: int) -> P:
  """The FSDP spec of one leaf: its largest dimension divisible by ``axis`` (else replicated)."""
  size = mesh.shape[axis]
  if math.prod(shape) < min_size or size == 1:
    return P()
  for dim in sorted(range(len(shape)), key=lambda d: -shape[d]):
    if shape[dim] % size == 0:
      return P(*([None] * dim + [axis]))
  return P()


def tree_shardings(tree: Any, mesh: Mesh, rules: Rules = (), *, fsdp_axis: str | None = None,
                   fsdp_min_size: int = 1 << 18, run_axis: str | None = None) -> Any:
  """A pytree of ``NamedSharding`` matching ``tree`` (arrays or ``jax.ShapeDtypeStruct`` leaves).

  Args:
    tree: the (abstract) train state or any pytree.
    mesh: the device mesh.
    rules: ``((regex, spec), ...)``, first match wins.
    fsdp_axis: shard unmatched leaves of at least ``fsdp_min_size`` elements over this axis.
    run_axis: every leaf has a leading run dimension (vmapped runs), sharded over this axis;
      rules and the FSDP strategy apply to the dimensions after it.
  """
  compiled = compile_rules(rules)
  if fsdp_axis is not None and fsdp_axis not in mesh.shape:
    raise InputError(f"fsdp_axis {fsdp_axis!r} is not a mesh axis; mesh axes are {tuple(mesh.shape)}")
  if run_axis is not None and run_axis not in mesh.shape:
    raise InputError(f"run axis {run_axis!r} is not a mesh axis; mesh axes are {tuple(mesh.shape)}")

  def leaf_sharding(path, leaf):
    name = path_name(path)
    shape = tuple(getattr(leaf, "shape", ()))
    if run_axis is not None:
      if not shape or shape[0] % mesh.shape[run_axis]:
        raise InputError(f"{name} (shape {shape}) has no leading run dimension divisible by the "
                         f"{run_axis!r} mesh axis size {mesh.shape[run_axis]}")
      shape = shape[1:]
    spec = None
    for _, pattern, rule_spec in compiled:
      if pattern.search(name):
        spec = rule_spec
        break
    if spec is None:
      spec = fsdp_spec(shape, fsdp_axis, mesh, fsdp_min_size) if fsdp_axis is not None else P()
    _check_fits(name, shape, spec, mesh)
    if run_axis is not None:
      spec = P(run_axis, *spec)
      _check_fits(name, tuple(getattr(leaf, "shape", ())), spec, mesh)
    return NamedSharding(mesh, spec)

  return jax.tree_util.tree_map_with_path(leaf_sharding, tree)


@dataclasses.dataclass
class ShardingReport:
  """What the rules did: unmatched rules, and bytes replicated vs total (per device)."""
  unmatched_rules: list[str]
  total_bytes: int
  replicated_bytes: int
  per_device_bytes: int
  largest_replicated: list[tuple[str, int]]

  def summary(self) -> str:
    mb = lambda b: f"{b / 2**20:.1f} MiB"
    parts = [f"{mb(self.total_bytes)} in all, {mb(self.per_device_bytes)} per device, "
             f"{mb(self.replicated_bytes)} replicated"]
    if self.largest_replicated:
      parts.append("largest replicated: " + ", ".join(f"{n} ({mb(b)})" for n, b in self.largest_replicated))
    if self.unmatched_rules:
      parts.append(f"rules matching nothing: {self.unmatched_rules}")
    return "; ".join(parts)


def sharding_report(tree: Any, shardings: Any, rules: Rules = (), top: int = 3) -> ShardingReport:
  """Rules that matched no leaf, and the bytes each device holds (total vs replicated)."""
  names, total, replicated, per_device, repl_leaves = [], 0, 0, 0, []
  flat = jax.tree_util.tree_flatten_with_path(tree)[0]
  for (path, leaf), sharding in zip(flat, jax.tree.leaves(shardings)):
    name = path_name(path)
    names.append(name)
    nbytes = int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
    total += nbytes
    shard = sharding.shard_shape(tuple(leaf.shape))
    per_device += int(np.prod(shard)) * np.dtype(leaf.dtype).itemsize
    if sharding.is_fully_replicated:
      replicated += nbytes
      repl_leaves.append((name, nbytes))
  unmatched = [pattern for pattern, compiled, _ in compile_rules(rules)
               if not any(compiled.search(n) for n in names)]
  repl_leaves.sort(key=lambda t: -t[1])
  return ShardingReport(unmatched, total, replicated, per_device, repl_leaves[:top])


def check_rules_match(tree: Any, rules: Rules) -> None:
  """An error naming any rule that matches no leaf (a typo would silently replicate)."""
  names = [path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
  for pattern, compiled, _ in compile_rules(rules):
    if not any(compiled.search(n) for n in names):
      examples = ", ".join(([n for n in names if n.startswith("params/")] or names)[:4])
      raise InputError(f"sharding rule {pattern!r} matches no leaf of the train state "
                       f"(paths look like: {examples})")


def data_axis_size(mesh: Mesh, axis: str = "data") -> int:
  return mesh.shape[axis] if axis in mesh.shape else 1


def batch_sharding(mesh: Mesh, axis: str = "data", leading: int = 0) -> NamedSharding:
  """Batch axis split over ``axis`` (after ``leading`` unsharded axes); other axes replicated."""
  return NamedSharding(mesh, P(*([None] * leading), axis if axis in mesh.shape else None))


def check_batch_divisible(global_batch_size: int, mesh: Mesh, axis: str = "data") -> None:
  n = data_axis_size(mesh, axis)
  if global_batch_size % n:
    raise InputError(
        f"global batch size {global_batch_size} is not divisible by the {axis!r} mesh axis size {n}")


def host_to_global(local_batch: Any, sharding: NamedSharding) -> Any:
  """Per-process batch slices -> one global ``jax.Array`` per leaf.

  Kept for callers that already hold their process's contiguous rows; the trainer builds batches
  from the sharding instead (``jaxlab.train.input_pipeline``), which works for any mesh.
  """
  return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), local_batch)
