"""Host batches -> global sharded arrays, built from the batch sharding (any mesh, any process count).

A task's ``host_batch(step, rows, seed)`` returns numpy rows of global batch ``step``. Which
rows a process needs is read off the sharding (``addressable_devices_indices_map``), not
derived from ``jax.process_index()``, so a mesh whose "data" axis does not span the processes
(each process then holds every row, for its model shard) works as well as one that does. Each
device gets its slice with ``jax.make_array_from_single_device_arrays``. Dtypes are
canonicalised on the host (int64 -> int32, float64 -> float32 unless x64 is on), the next call's
batch is built in a background thread while the current step runs (``Prefetcher``).
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.sharding import NamedSharding

HostBatchFn = Callable[[int, np.ndarray, int], Any]


def canonicalize(x: Any) -> np.ndarray:
  """Numpy array in the dtype JAX would use (no silent retracing on int64 labels)."""
  x = np.asarray(x)
  return x.astype(jax.dtypes.canonicalize_dtype(x.dtype), copy=False)


def batch_spec(host_batch: HostBatchFn, batch_size: int, leading: Sequence[int] = (),
               seed: int = 0) -> Any:
  """The global batch's ``ShapeDtypeStruct``s: ``leading + (batch_size,) + row shape``."""
  row = jax.tree.map(canonicalize, host_batch(0, np.arange(1), seed))
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(tuple(leading) + (batch_size,) + x.shape[1:], x.dtype), row)


def assemble(host_batch: HostBatchFn, steps: Sequence[int], seeds: Sequence[int], batch_size: int,
             sharding: NamedSharding, spec: Any, *, step_axis: bool = False, run_axis: bool = False) -> Any:
  """One global batch ``[len(steps)?, len(seeds)?, batch_size, ...]`` as sharded ``jax.Array``s.

  ``step_axis`` / ``run_axis`` say whether the batch has a leading axis over ``steps``
  (``steps_per_call``) / over ``seeds`` (vmapped runs); without one, its list has one element.
  """
  steps, seeds = list(steps), list(seeds)
  if (not step_axis and len(steps) != 1) or (not run_axis and len(seeds) != 1):
    raise ValueError("without a step (run) axis, give exactly one step (seed)")
  lead = (len(steps),) * step_axis + (len(seeds),) * run_axis
  index_map = sharding.addressable_devices_indices_map(lead + (batch_size,))

  def coords(index: tuple[slice, ...]) -> tuple[list[int], list[int], np.ndarray]:
    parts = list(index)
    ks = list(range(*parts.pop(0).indices(len(steps)))) if step_axis else [0]
    rs = list(range(*parts.pop(0).indices(len(seeds)))) if run_axis else [0]
    return ks, rs, np.arange(batch_size)[parts.pop(0)]

  # The rows each (step, run) must materialise on this process: the union over its devices.
  needed: dict[tuple[int, int], set[int]] = {}
  for index in index_map.values():
    ks, rs, rows = coords(index)
    for k in ks:
      for r in rs:
        needed.setdefault((k, r), set()).update(rows.tolist())
  local = {}
  for (k, r), rows in needed.items():
    rows_arr = np.array(sorted(rows), dtype=np.int64)
    leaves = [canonicalize(x) for x in jax.tree.leaves(host_batch(steps[k], rows_arr, seeds[r]))]
    local[(k, r)] = (rows_arr, leaves)

  spec_leaves, treedef = jax.tree.flatten(spec)
  pieces: list[list[jax.Array]] = [[] for _ in spec_leaves]
  for device, index in index_map.items():
    ks, rs, rows = coords(index)
    for i, leaf_spec in enumerate(spec_leaves):
      blocks = [local[(k, r)][1][i][np.searchsorted(local[(k, r)][0], rows)] for k in ks for r in rs]
      piece = np.stack(blocks).reshape((len(ks),) * step_axis + (len(rs),) * run_axis + blocks[0].shape)
      row_shape = tuple(leaf_spec.shape[len(lead) + 1:])
      if piece.dtype != leaf_spec.dtype or piece.shape[len(lead) + 1:] != row_shape:
        raise ValueError(f"host_batch returned rows of {piece.dtype}{list(piece.shape[len(lead) + 1:])} for a "
                         f"batch leaf of {leaf_spec.dtype} rows {list(row_shape)} (it must not change "
                         "shape or dtype from step to step)")
      pieces[i].append(jax.device_put(piece, device))
  arrays = [jax.make_array_from_single_device_arrays(s.shape, sharding, p) for s, p in zip(spec_leaves, pieces)]
  return jax.tree.unflatten(treedef, arrays)


class Prefetcher:
  """Builds the batch of call ``i + 1`` in a background thread while call ``i`` runs."""

  def __init__(self, make: Callable[[int], Any], depth: int = 1):
    self._make = make
    self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1) if depth > 0 else None
    self._pending: dict[int, concurrent.futures.Future] = {}

  def get(self, i: int, next_i: int | None) -> Any:
    fut = self._pending.pop(i, None)
    batch = fut.result() if fut is not None else self._make(i)
    if self._pool is not None and next_i is not None and next_i not in self._pending:
      self._pending[next_i] = self._pool.submit(self._make, next_i)
    return batch

  def close(self) -> None:
    if self._pool is not None:
      self._pool.shutdown(wait=True, cancel_futures=True)
