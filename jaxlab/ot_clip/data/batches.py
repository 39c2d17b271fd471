"""Global batch ``step`` of a grain dataset as a pure function of (seed, step), read per process.

The order is grain's: an ``IndexSampler`` per process with ``ShardOptions(process_index,
process_count, drop_remainder=True)`` (each process owns a contiguous shard of the records,
shuffled by the seed, reshuffled every epoch) and local batches of ``batch_size /
process_count`` consecutive sampler positions, exactly what ``grain.DataLoader(sampler=...,
operations=[Batch(...)])`` yields on that process. The global batch is the processes' local
batches one after the other, so rows ``[p * local, (p + 1) * local)`` are process ``p``'s, read
from its own shard only.

Resume needs no iterator state: the sampler is random access, so the records of step ``s`` are
computed directly from ``s`` and the seed (as ``jaxlab.data.batching`` does for in-memory data),
and a resumed run reads exactly the batches an uninterrupted one would. Like grain's loader,
the stream runs on across epoch boundaries: a batch that spans one may hold a record twice.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from jaxlab.errors import InputError
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  import grain


class ShardedBatches:
  """``host_batch(step, rows, seed)`` for the trainer (``jaxlab.train.task.Task``) over grain records.

  Args:
    records: a ``grain.MapDataset`` whose element ``i`` is a dict of numpy arrays (one pair).
    batch_size: the global batch size.
    process_count: the number of processes sharing the data (``jax.process_count()``).

  Raises:
    InputError: ``batch_size`` is not a multiple of ``process_count``, or a process's shard
      holds fewer records than its local batch.
  """

  def __init__(self, records: grain.MapDataset, batch_size: int, process_count: int):
    if batch_size % process_count:
      raise InputError(f"batch_size={batch_size} is not a multiple of the {process_count} processes sharing the data")
    self.records = records
    self.batch_size = batch_size
    self.process_count = process_count
    self.local_batch = batch_size // process_count
    per_shard = len(records) // process_count
    if per_shard < self.local_batch:
      raise InputError(f"batch_size={batch_size} needs {self.local_batch} training pairs per process, but each of the "
                       f"{process_count} processes has {per_shard} (of {len(records)}); allowed: batch_size <= "
                       f"{per_shard * process_count}")
    self._samplers: dict[tuple[int, int], grain.samplers.IndexSampler] = {}
    self._lock = threading.Lock()  # the trainer builds the next batch in a background thread

  def sampler(self, shard: int, seed: int) -> grain.samplers.IndexSampler:
    """Process ``shard``'s grain sampler for ``seed`` (what its ``grain.DataLoader`` would use)."""
    with self._lock:
      key = (shard, seed)
      if key not in self._samplers:
        options = grain.sharding.ShardOptions(shard_index=shard, shard_count=self.process_count, drop_remainder=True)
        self._samplers[key] = grain.samplers.IndexSampler(len(self.records), shard_options=options, shuffle=True,
                                                          num_epochs=None, seed=int(seed))
      return self._samplers[key]

  def record_keys(self, step: int, rows: np.ndarray, seed: int) -> np.ndarray:
    """Record indices of rows ``rows`` of global batch ``step``."""
    rows = np.asarray(rows, np.int64)
    shards, within = np.divmod(rows, self.local_batch)
    positions = step * self.local_batch + within  # the sampler position within the shard
    return np.array([self.sampler(int(p), seed)[int(p) + int(i) * self.process_count].record_key
                     for p, i in zip(shards, positions)], np.int64)

  def __call__(self, step: int, rows: np.ndarray, seed: int) -> dict[str, Any]:
    """Rows ``rows`` of global batch ``step``, stacked: ``{name: [len(rows), ...]}``."""
    keys = self.record_keys(step, rows, seed)
    items = [self.records[int(k)] for k in keys]
    return {name: np.stack([item[name] for item in items]) for name in items[0]}
