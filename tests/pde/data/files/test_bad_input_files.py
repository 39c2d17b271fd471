"""Bad input to the file readers: each case ends in ONE line naming the file, the value and what is allowed.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Each case writes its
small files (official layouts, ``layouts.py``) into a temporary folder when it runs.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import sys
import tempfile
from typing import Any, Callable

import ml_collections
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))

from jaxlab.pde.data import mixture_batch  # noqa: E402
from jaxlab.pde.data.files import (DPOTFile, DPOTScatter, PDEBenchCFD, PDEBenchGroups, TheWell,  # noqa: E402
                                   check_entry, file_sets, load_master, open_set, verify_records)
from tests.bad_input import assert_one_clear_line  # noqa: E402
from tests.pde.data.files import layouts  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]
_COUNTER = itertools.count()


@functools.lru_cache(maxsize=None)
def _root() -> str:
  root = tempfile.mkdtemp(prefix="jaxlab-bad-files-")
  atexit.register(shutil.rmtree, root, True)
  return root


def _path(name: str) -> str:
  """A fresh path per call (cases may run in any order, more than once)."""
  folder = os.path.join(_root(), str(next(_COUNTER)))
  os.makedirs(folder)
  return os.path.join(folder, name)


def _data(*shape: int) -> np.ndarray:
  return np.random.default_rng(0).normal(size=shape).astype(np.float32)


def _dpot(shape=(6, 8, 8, 10), name="train.hdf5") -> str:
  return layouts.dpot_file(_path(name), _data(*shape))


def _config(table: dict, **data: Any) -> ml_collections.ConfigDict:
  master = layouts.master_json(_path("master.json"), table)
  return ml_collections.ConfigDict({"t_in": data.pop("t_in", 3), "t_out": 1, "data": {
      "source": "files", "master": master, "root": "", "names": (), "rollout_steps": 0, "eval_trajectories": 0,
      "num_channels": 0, **data}})


def _table(path: str, **kw: Any) -> dict:
  return {"s": layouts.entry(path, path, 4, 2, kw.pop("t_test", 2), **kw)}


def _open(raw: dict) -> Callable[[], Any]:
  return lambda: open_set(check_entry("s", raw, "master table m.json"), _root())


def _nan_at(index: int) -> str:
  data = _data(40, 8, 8, 6)
  data[index, 3, 4, 2] = np.nan
  return layouts.dpot_file(_path("large.hdf5"), data)


def _scatter_with_odd_record() -> str:
  folder = _path("train")
  layouts.dpot_scatter(folder, [_data(8, 8, 6), _data(8, 8, 6), _data(16, 16, 6), _data(8, 8, 6)])
  return folder


def _groups_with_odd_record() -> str:
  path = _path("dr.h5")
  layouts.pdebench_groups(path, _data(5, 6, 8, 8, 2))
  import h5py
  with h5py.File(path, "a") as f:
    del f["0003/data"]
    f.create_dataset("0003/data", data=_data(4, 8, 8, 2))  # 4 frames where the others have 6
  return path


def _without(path: str, *drop: str) -> str:
  import h5py
  with h5py.File(path, "a") as f:
    for key in drop:
      del f[key]
  return path


def _well(**kw) -> str:
  return layouts.the_well(_path("well.hdf5"), {"u": _data(3, 5, 8, 8)}, **kw)


def _batch_over(path: str) -> Callable[[], Any]:
  def run():
    ds = open_set(check_entry("s", layouts.entry(path, path, 38, 2, 2), "m"), _root())
    return mixture_batch([ds], [1.0], 0, 0, 64, None, 3, 1)  # 64 rows of 38 trajectories: row 37 is drawn
  return run


CASES: list[Case] = [
    ("pde files", "missing file", lambda: DPOTFile("s", os.path.join(_root(), "nowhere.hdf5")),
     "data set 's': no file"),
    ("pde files", "missing file named by the table", _open(layouts.entry("absent_train.hdf5", "absent_train.hdf5",
                                                                          2, 1, 1)), "absent_train.hdf5"),
    ("pde files", "missing 'data' key", lambda: DPOTFile("s", layouts.pdebench_cfd(
        _path("cfd.hdf5"), {k: _data(2, 6, 8, 8) for k in ("density", "pressure", "Vx", "Vy")})),
     "has no 'data' (it holds ['Vx', 'Vy', 'density', 'pressure', 't-coordinate', 'x-coordinate', 'y-coordinate'])"
     "; DPOT's layout stores trajectories under 'data' as (N, X, Y, T) or (N, X, Y, T, C)"),
    ("pde files", "missing CFD field", lambda: PDEBenchCFD("s", _without(layouts.pdebench_cfd(
        _path("cfd.hdf5"), {k: _data(2, 6, 8, 8) for k in ("density", "pressure", "Vx", "Vy")}), "Vy")),
     "has no 'Vy'"),
    ("pde files", "'data' of the wrong rank", lambda: DPOTFile("s", _dpot((6, 8, 8))),
     ":'data' has shape (6, 8, 8) (rank 3); DPOT's layout stores trajectories under 'data' as (N, X, Y, T) or"),
    ("pde files", "scatter record of the wrong rank", lambda: DPOTScatter("s", layouts.dpot_scatter(
        _path("train"), [_data(8, 8)]), 1), "data_0.hdf5:'data' has shape (8, 8) (rank 2)"),
    ("pde files", "missing scatter file", lambda: DPOTScatter("s", layouts.dpot_scatter(
        _path("train"), [_data(8, 8, 6)] * 2), 3), "data_2.hdf5 does not exist; scatter storage needs data_0.hdf5 .."),
    ("pde files", "set with more channels than the model", lambda: file_sets(_config(
        _table(_dpot((6, 8, 8, 10, 4))), num_channels=2)),
     "has C=4 channels, more than the model's data.num_channels=2; data.num_channels must be >= 4"),
    ("pde files", "T shorter than t_in + 1", lambda: file_sets(_config(_table(_dpot((6, 8, 8, 5))), t_in=5)),
     "has T=5 frames per trajectory; t_in=5 + t_out=1 needs T >= 6"),
    ("pde files", "T shorter than t_in + t_test", lambda: file_sets(_config(_table(_dpot((6, 8, 8, 5)), t_test=4))),
     "t_in=3 + t_test=4 (master table) needs T >= 7"),
    ("pde files", "NaN record in a large file (full scan)",
     lambda: verify_records(DPOTFile("s", _nan_at(37))), ":'data'[37] holds nan at frame 2, point (3, 4), channel 0"),
    ("pde files", "NaN record in a large file (drawn in a batch)", _batch_over(_nan_at(37)),
     ":'data'[37] holds nan at frame 2"),
    ("pde files", "scatter record of another shape", lambda: verify_records(DPOTScatter(
        "s", _scatter_with_odd_record(), 4)), "data_2.hdf5 has frames 0:6 of shape (6, 16, 16, 1)"),
    ("pde files", "per-sample group of another shape", lambda: verify_records(PDEBenchGroups(
        "s", _groups_with_odd_record())), "sample 3 (group '0003') has frames 0:6 of shape (4, 8, 8, 2)"),
    ("pde files", "The Well in 3-D", lambda: TheWell("s", _well(n_spatial_dims=3)),
     "has n_spatial_dims=3; jaxlab's DPOT reads 2-D sets only"),
    ("pde files", "The Well without t1_fields", lambda: TheWell("s", _without(_well(), "t1_fields")),
     "has no 't1_fields'"),
    ("pde files", "The Well: unknown field", lambda: TheWell("s", _well(), fields=("v",)),
     "fields ['v'] are not time-varying fields of"),
    ("pde files", "train_size above the records", _open(layouts.entry("a.hdf5", "b.hdf5", 7, 1, 1) | {
        "train_path": _dpot((6, 8, 8, 10)), "test_path": _dpot((2, 8, 8, 10))}),
     "train_size=7 exceeds the 6 records of"),
    ("pde files", "train and test overlap in one file", lambda: open_set(check_entry("s", layouts.entry(
        *[_dpot((6, 8, 8, 10))] * 2, 5, 2, 1), "m"), _root()),
     "train_size=5 + test_size=2 exceed the 6 records of"),
    ("pde files", "n_channels contradicting the file", lambda: open_set(check_entry("s", layouts.entry(
        *[_dpot((6, 8, 8, 10))] * 2, 4, 2, 1, n_channels=2), "m"), _root()),
     "n_channels=2 in the master table, but"),
    ("pde files", "table entry without t_test", lambda: check_entry("s", {"train_path": "a", "test_path": "a",
                                                                         "train_size": 1, "test_size": 1}, "m"),
     "entry 's' lacks ['t_test']; every entry needs train_path, test_path, train_size, test_size, t_test"),
    ("pde files", "table entry with an unknown field", lambda: check_entry("s", layouts.entry(
        "a", "a", 1, 1, 1, t_tset=3), "m"), "entry 's' has unknown fields ['t_tset']"),
    ("pde files", "unknown format", lambda: check_entry("s", layouts.entry("a", "a", 1, 1, 1, format="netcdf"), "m"),
     "format='netcdf'; allowed: 'dpot', 'pdebench_cfd', 'pdebench_groups', 'the_well'"),
    ("pde files", "master table of another kind", lambda: load_master(layouts.master_json(_path("m.csv"), {})),
     "extension '.csv'; allowed: .py"),
    ("pde files", "non-literal in a Python table", lambda: load_master(_python_table(
        "DATASET_DICT = {}\nDATASET_DICT['a'] = {'train_path': os.getcwd()}\n")), "'os.getcwd()' is not a literal"),
    ("pde files", "data.names not in the table", lambda: file_sets(_config(_table(_dpot()), names=("ns",))),
     "data.names[0]='ns' is not in master table"),
    ("pde files", "no master table", lambda: file_sets(_config({}, master="")) if not os.environ.get(
        "JAXLAB_PDE_MASTER") else file_sets(_config({}, master=os.path.join(_root(), "none.json"))),
     "master"),
]


def _python_table(text: str) -> str:
  path = _path("master.py")
  with open(path, "w") as f:
    f.write(text)
  return path


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
