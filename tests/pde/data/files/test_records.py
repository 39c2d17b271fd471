"""Rows read per process from disk: only the requested rows' frames, the batch a function of (seed, step)."""

import pickle

import numpy as np

from jaxlab.pde.data import mixture_batch, mixture_plan
from jaxlab.pde.data.files import DPOTFile, check_entry, open_set
from jaxlab.pde.data.files import records as records_module
from tests.support import pde_file_layouts as layouts


def _write(tmp_path):
  rng = np.random.default_rng(0)
  layouts.dpot_file(tmp_path / "fno.hdf5", rng.normal(size=(10, 8, 8, 9)).astype(np.float32))
  layouts.pdebench_groups(tmp_path / "dr.h5", rng.normal(size=(8, 7, 16, 16, 2)).astype(np.float32))


def _sets(tmp_path):
  """An 8^2 DPOT set and a 16^2 PDEBench set, opened afresh (new handles)."""
  fno, dr = str(tmp_path / "fno.hdf5"), str(tmp_path / "dr.h5")
  return [open_set(check_entry("fno", layouts.entry(fno, fno, 8, 2, 4), "test"), str(tmp_path)),
          open_set(check_entry("dr", layouts.entry(dr, dr, 6, 2, 3, format="pdebench_groups"), "test"),
                   str(tmp_path))]


def _batch(sets, rows):
  return mixture_batch(sets, [1.0, 2.0], 7, 3, 12, rows, 3, 1, num_channels=2, pad_value=1.0, resolution=16)


def test_two_processes_rows_make_the_single_process_batch(tmp_path):
  _write(tmp_path)
  sets = _sets(tmp_path)
  full = _batch(sets, None)
  # Two "processes": each opens its own handles (fresh objects) and reads its half of the rows.
  halves = [_batch(_sets(tmp_path), rows) for rows in (np.arange(0, 12, 2), np.arange(1, 12, 2))]
  for key in full:
    joined = np.empty_like(full[key])
    joined[0::2], joined[1::2] = halves[0][key], halves[1][key]
    # The same reads and the same float operations on each row: equal bits (no reduction across rows).
    np.testing.assert_array_equal(joined, full[key])
  assert set(full["dataset"].tolist()) == {0, 1}


def test_a_batch_reads_only_its_rows_windows(tmp_path, monkeypatch):
  _write(tmp_path)
  sets = _sets(tmp_path)
  reads = []
  for cls in (type(sets[0].trajectories.parts[0][0]), type(sets[1].trajectories.parts[0][0])):
    original = cls._read
    monkeypatch.setattr(cls, "_read", lambda self, i, a, b, _o=original: (reads.append((self.name, i, a, b)),
                                                                          _o(self, i, a, b))[1])
  _batch(sets, [5, 9])
  plan = mixture_plan(sets, [1.0, 2.0], 7, 3, 12, 3, 1)
  expected = [(sets[plan.dataset[r]].name, int(plan.trajectory[r]), int(plan.start[r]), int(plan.start[r]) + 4)
              for r in (5, 9)]
  assert reads == expected  # one window (t_in + t_out frames) per requested row, nothing else


def test_handles_are_per_process_and_not_pickled(tmp_path, monkeypatch):
  data = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)
  records = DPOTFile("d", layouts.dpot_file(tmp_path / "d.hdf5", data))
  first = records.file(records.source)
  assert records.file(records.source) is first                      # kept open in this process
  monkeypatch.setattr(records_module.os, "getpid", lambda: -1)        # as in a forked worker
  assert records.file(records.source) is not first                   # reopened there
  monkeypatch.undo()
  copy = pickle.loads(pickle.dumps(records))                          # a spawned worker gets no handle
  assert copy._files == {}
  np.testing.assert_array_equal(copy[1, 1:3], np.moveaxis(data[1, :, :, 1:3, None], 2, 0))
