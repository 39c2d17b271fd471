"""Host batches assembled from the batch sharding: rows per device, runs, steps, dtypes."""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.train import make_mesh
from jaxlab.train.input_pipeline import Prefetcher, assemble, batch_spec


def _host_batch(step, rows, seed):
  """Row r of batch `step` of run `seed` encodes all three, so misplaced rows show."""
  rows = np.asarray(rows)
  value = 10000 * seed + 100 * step + rows
  return {"x": np.stack([value, -value], 1).astype(np.float64), "y": value.astype(np.int64)}


@pytest.mark.parametrize("mesh_spec", [(("data", 8),), (("data", 4), ("model", 2)), (("model", 2), ("data", 4))])
def test_each_device_gets_its_rows_and_dtypes_are_canonical(mesh_spec):
  mesh = make_mesh(mesh_spec)
  sharding = NamedSharding(mesh, P("data"))
  spec = batch_spec(_host_batch, 16)
  assert spec["x"].dtype == np.float32 and spec["y"].dtype == np.int32  # int64 labels -> int32
  batch = assemble(_host_batch, [3], [7], 16, sharding, spec)
  np.testing.assert_array_equal(np.asarray(batch["y"]), 70300 + np.arange(16))
  for shard in batch["y"].addressable_shards:
    np.testing.assert_array_equal(np.asarray(shard.data), 70300 + np.arange(16)[shard.index[0]])


def test_steps_and_runs_axes():
  mesh = make_mesh((("data", 4), ("model", 2)))
  sharding = NamedSharding(mesh, P(None, "data", None))  # [steps, runs, batch]
  spec = batch_spec(_host_batch, 6, leading=(3, 4))
  batch = assemble(_host_batch, [10, 11, 12], [0, 1, 2, 3], 6, sharding, spec, step_axis=True, run_axis=True)
  y = np.asarray(batch["y"])
  assert y.shape == (3, 4, 6)
  expected = 10000 * np.arange(4)[None, :, None] + 100 * np.arange(10, 13)[:, None, None] + np.arange(6)
  np.testing.assert_array_equal(y, expected)


def test_only_the_needed_rows_are_built():
  asked = []

  def recording(step, rows, seed):
    asked.append(len(rows))
    return _host_batch(step, rows, seed)

  mesh = make_mesh((("data", 8),))
  spec = batch_spec(_host_batch, 16)
  asked.clear()
  assemble(recording, [0], [0], 16, NamedSharding(mesh, P("data")), spec)
  assert asked == [16]  # one call for this process's rows (all of them: one process)


def test_prefetcher_builds_ahead_and_returns_in_order():
  made = []
  p = Prefetcher(lambda i: made.append(i) or i * 2)
  assert p.get(0, 1) == 0
  assert p.get(1, 2) == 2
  assert p.get(2, None) == 4
  p.close()
  assert sorted(made) == [0, 1, 2]
