"""Grain-ordered global batches: per-process shards, grain's own DataLoader order, resume without state."""

import grain
import numpy as np
import pytest

from jaxlab.ot_clip.data.batches import ShardedBatches
from tests.support.clip_data import records


@pytest.mark.parametrize("processes", [2, 4])
def test_process_rows_are_disjoint_shards_whose_union_is_the_global_batch(processes):
  n, batch = 42, 8
  local = batch // processes
  # What process p reads for its rows alone (its own batches object, as on its own host).
  for step in range(12):
    per_process = [ShardedBatches(records(n), batch, processes)(step, np.arange(p * local, (p + 1) * local), 7)["id"]
                   for p in range(processes)]
    whole = ShardedBatches(records(n), batch, processes)(step, np.arange(batch), 7)["id"]
    assert np.array_equal(np.concatenate(per_process), whole)  # the union, in row order, is the global batch
    assert len(set(whole.tolist())) == batch  # disjoint: no record on two processes
    shard = n // processes  # grain's even split: process p owns records [p * shard, (p + 1) * shard)
    for p, ids in enumerate(per_process):
      assert np.all((ids >= p * shard) & (ids < (p + 1) * shard)), (step, p, ids)


def test_batches_are_what_grains_data_loader_yields():
  n, batch, seed, processes = 20, 6, 11, 2
  ours = ShardedBatches(records(n), batch, processes)
  local = batch // processes
  for p in range(processes):
    options = grain.sharding.ShardOptions(shard_index=p, shard_count=processes, drop_remainder=True)
    loader = grain.DataLoader(data_source=records(n), sampler=ours.sampler(p, seed), shard_options=options,
                              operations=[grain.transforms.Batch(local, drop_remainder=True)], worker_count=0)
    stream = iter(loader)
    for step in range(7):  # past the first epochs of each shard
      expected = next(stream)["id"]
      assert np.array_equal(ours(step, np.arange(p * local, (p + 1) * local), seed)["id"], expected)


def test_resume_reads_the_same_batch_and_epochs_reshuffle():
  n, batch = 12, 4
  first = ShardedBatches(records(n), batch, 1)
  seen = [first(s, np.arange(batch), 3)["id"] for s in range(9)]
  resumed = ShardedBatches(records(n), batch, 1)  # a new process: no iterator state carried over
  for s in (8, 5, 0):
    assert np.array_equal(resumed(s, np.arange(batch), 3)["id"], seen[s])
  epochs = [np.concatenate(seen[e * 3:(e + 1) * 3]) for e in range(3)]
  assert all(sorted(e.tolist()) == list(range(n)) for e in epochs)  # each epoch: every record once
  assert not np.array_equal(epochs[0], epochs[1])  # reshuffled
  assert not np.array_equal(first(0, np.arange(batch), 4)["id"], seen[0])  # another seed, another order
  np.testing.assert_array_equal(first(2, np.array([3, 1]), 3)["x"][:, 0], seen[2][[3, 1]])
