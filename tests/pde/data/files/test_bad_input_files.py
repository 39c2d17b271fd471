"""Bad input to the file readers: each case ends in ONE line naming the file, the value and what is allowed.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Each case writes its
small files (official layouts, ``layouts.py``) into a temporary folder when it runs.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import pathlib
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
from tests.support.bad_input import assert_one_clear_line  # noqa: E402
from tests.support import pde_file_layouts as layouts  # noqa: E402
from tests.support.pde_files import file_replaced, set_added  # noqa: E402

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


def _folder() -> pathlib.Path:
  """A fresh empty folder."""
  return pathlib.Path(os.path.dirname(_path("-")))


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


def _one_file(path: str, n_train: int, n_test: int, **kw: Any) -> dict:
  """A one-entry table whose training and test records share one file (PDEBench's layout)."""
  return {"s": layouts.entry(path, path, n_train, n_test, 2, **kw)}


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
    # a layout is checked against the axes its format names, not trusted
    ("pde files", "DPOT grid axis of size 1", lambda: DPOTFile("s", _dpot((4, 8, 1, 10))),
     ":'data' has shape (4, 8, 1, 10): grid X=8, Y=1 by the layout (N, X, Y, T[, C]); a field needs X, Y >= 2"),
    ("pde files", "DPOT 1x1 grid", lambda: DPOTFile("s", _dpot((4, 1, 1, 10, 3))), "grid X=1, Y=1"),
    ("pde files", "DPOT file of one time step", lambda: DPOTFile("s", _dpot((4, 8, 8, 1))),
     ":'data' has shape (4, 8, 8, 1): T=1 time steps by the layout (N, X, Y, T[, C]); a trajectory needs T >= 2"),
    ("pde files", "read stride larger than the grid", lambda: DPOTFile("s", _dpot((6, 8, 8, 10)), (16, 2)),
     ":'data': stride=(16, 2) exceeds its 8x8 grid (shape (6, 8, 8, 10), (N, X, Y, T[, C]))"),
    # DPOT's downsample strides the grid resized to data.resolution, so it is checked against that grid
    ("pde files", "downsample leaving one point of data.resolution", lambda: file_sets(_config(
        _table(_dpot(), downsample=[16, 2]), resolution=16)),
     "data set 's': downsample=(16, 2) (master table) leaves a 1x8 grid of data.resolution=16 (DPOT strides after "
     "resizing to data.resolution); each factor must be <= 8"),
    ("pde files", "sets of one run with different downsample", lambda: file_sets(_config(
        {**_table(_dpot()), "t": layouts.entry(_dpot(), _dpot(), 4, 2, 2, downsample=[2, 2])}, resolution=16)),
     "data sets serve different grids: 's' downsample=(1, 1) -> 16x16, 't' downsample=(2, 2) -> 8x8"),
    ("pde files", "non-square served grid", lambda: file_sets(_config(_table(_dpot(), downsample=[2, 1]),
                                                                      resolution=16)),
     "downsample=(2, 1) (master table) serves a 8x16 grid of data.resolution=16; the model takes a square grid"),
    # the official table's 3-D sets: loaded as they are, refused only when a run uses them
    ("pde files", "a 3-D set named in data.names", lambda: file_sets(_config(
        {**_table(_dpot()), "ns3d": layouts.entry("a", "a", 90, 10, 11, in_size=(128, 128, 128),
                                                  downsample=(1, 1, 1))}, names=("ns3d",))),
     "entry 'ns3d' is a 3-D set (in_size=(128, 128, 128)); jaxlab's DPOT is 2-D (grids X, Y), so only the table's "
     "2-D sets can be trained on: leave this one out of data.names"),
    ("pde files", "a 3-D set under data.names=()", lambda: file_sets(_config(
        {**_table(_dpot()), "ns3d": layouts.entry("a", "a", 90, 10, 11, downsample=(1, 1, 1))})),
     "(data.names=() uses every entry): entry 'ns3d' is a 3-D set (downsample=(1, 1, 1))"),
    ("pde files", "scatter record with a grid axis of size 1", lambda: DPOTScatter("s", layouts.dpot_scatter(
        _path("train"), [_data(1, 8, 6)]), 1), "data_0.hdf5:'data' has shape (1, 8, 6): grid X=1, Y=8"),
    # an array in another axis order than its format's, with no in_size / t_total in the table to confirm its shape
    ("pde files", "DPOT file stored (N, T, X, Y, C), table without in_size", lambda: file_sets(_config(
        _table(_dpot((6, 10, 8, 8, 2))))),
     ":'data' has shape (6, 10, 8, 8, 2), which the layout (N, X, Y, T[, C]) reads as a 10x8 grid of T=8 frames; a "
     "grid that is not square is how an array with its axes in another order reads, and the master table gives "
     "neither in_size nor t_total to confirm this shape; allowed: the axes in the order (N, X, Y, T[, C]), or, if "
     "this is the data's shape, in_size=[10, 8] or t_total=8 in the master table"),
    ("pde files", "DPOT file stored (N, T, X, Y), long trajectories", lambda: file_sets(_config(
        _table(_dpot((6, 40, 8, 8))))), "reads as a 40x8 grid of T=8 frames"),
    ("pde files", "DPOT file of a 16x8 grid stored (N, T, X, Y, C)", lambda: file_sets(_config(
        _table(_dpot((6, 10, 16, 8, 1))))), "reads as a 10x16 grid of T=8 frames; a grid that is not square"),
    ("pde files", "DPOT scatter records stored (T, X, Y, C)", lambda: file_sets(_config({"s": layouts.entry(
        layouts.dpot_scatter(_path("train"), [_data(10, 8, 8, 1)] * 4),
        layouts.dpot_scatter(_path("test"), [_data(10, 8, 8, 1)] * 2), 4, 2, 2, scatter_storage=True)})),
     "data_0.hdf5:'data' has shape (10, 8, 8, 1), which the layout (X, Y, T[, C]) reads as a 10x8 grid of T=8 frames"),
    ("pde files", "PDEBench CFD without coordinates stored (N, X, Y, T)", lambda: file_sets(_config(_one_file(
        _without(_cfd_axes_swapped(), "x-coordinate", "y-coordinate", "t-coordinate"), 1, 1, format="pdebench_cfd"))),
     ":'Vx' has shape (2, 8, 8, 6), which the layout (N, T, X, Y) reads as a 8x6 grid of T=8 frames"),
    ("pde files", "PDEBench CFD with an x-coordinate only, stored (N, X, Y, T)", lambda: file_sets(_config(_one_file(
        _without(_cfd_axes_swapped(), "y-coordinate", "t-coordinate"), 1, 1, format="pdebench_cfd"))),
     ":'Vx' has shape (2, 8, 8, 6), which the layout (N, T, X, Y) reads as a 8x6 grid of T=8 frames"),
    ("pde files", "PDEBench groups without grid/ stored (X, Y, T, C)", lambda: file_sets(_config(_one_file(
        _groups_axes_swapped(grid=False), 2, 1, format="pdebench_groups"))),
     ":/0000/data has shape (8, 4, 6, 2), which the layout (T, X, Y, C) reads as a 4x6 grid of T=8 frames"),
    ("pde files", "master table path that is a directory", lambda: file_sets(_config({}, master=_root())),
     "' is a folder; allowed: the file of a master table of data sets (.py in DPOT's make_master_file.py style, "
     ".json or .yaml) in it"),
    ("pde files", "master table path that is a directory, through the API", lambda: load_master(_root()),
     "is a directory; allowed: a table file (.py in DPOT's make_master_file.py style, .json, .yaml)"),
    ("pde files", "PDEBench CFD stored (N, X, Y, T)", lambda: PDEBenchCFD("s", _cfd_axes_swapped()),
     ":'Vx' has shape (2, 8, 8, 6), so Y=6, but"),
    ("pde files", "PDEBench groups stored (X, Y, T, C)", lambda: PDEBenchGroups("s", _groups_axes_swapped()),
     ":/0000/data has shape (8, 4, 6, 2), so X=4, but"),
    ("pde files", "The Well field against its dimensions", lambda: TheWell("s", layouts.the_well(
        _path("well.hdf5"), {"u": _data(3, 5, 8, 6)}, t1={"v": _data(3, 5, 6, 8, 2)})),
     ":/t1_fields/v has shape (3, 5, 6, 8, 2); by the file's attributes and dimensions it must be (3, 5, 8, 6, 2)"),
    ("pde files", "The Well without a time-varying field", lambda: TheWell("s", _well(
        field_attrs={"u": {"time_varying": False}})),
     "has no time-varying field (its t0_fields, t1_fields and t2_fields hold none with time_varying=True)"),
    # the test set is told apart from the training set by what the file is
    ("pde files", "test_path a symlink to the train file", lambda: open_set(check_entry("s", layouts.entry(
        (p := _dpot((6, 8, 8, 10))), _linked(_path("test.hdf5"), p), 5, 2, 1), "m"), _root()),
     "train_size=5 + test_size=2 exceed the 6 records of"),
    ("pde files", "one scatter folder for train and test", lambda: open_set(check_entry("s", layouts.entry(
        *[layouts.dpot_scatter(_path("train"), [_data(8, 8, 6)] * 3)] * 2, 2, 1, 2, scatter_storage=True), "m"),
        _root()), "are the same scatter-storage folder; its test records data_0.hdf5 .. would be training records"),
    ("pde files", "scatter test folder a symlink to the train folder", lambda: open_set(check_entry(
        "s", layouts.entry((p := layouts.dpot_scatter(_path("train"), [_data(8, 8, 6)] * 3)), _linked(_path("test"), p),
                           2, 1, 2, scatter_storage=True), "m"), _root()), "are the same scatter-storage folder"),
    # the Python master table: what the parser does not read is refused, not skipped
    ("pde files", "DATASET_DICT.update in a Python table", lambda: load_master(_python_table(
        _ENTRY + "DATASET_DICT.update({'b': {}})\n")), "master.py:4: \"DATASET_DICT.update({'b': {}})\" changes "
     "DATASET_DICT (or a name its entries use) in a way this reader does not model"),
    ("pde files", "an entry inside a for loop", lambda: load_master(_python_table(
        _ENTRY + "for n in ['b', 'c']:\n    DATASET_DICT[n] = {'train_path': 'b.hdf5'}\n")),
     ":5: \"DATASET_DICT[n] = {'train_path': 'b.hdf5'}\" changes DATASET_DICT"),
    ("pde files", "a field set inside an if", lambda: load_master(_python_table(
        _ENTRY + "if True:\n    DATASET_DICT[name]['train_size'] = 3\n")),
     ":5: \"DATASET_DICT[name]['train_size'] = 3\""),
    ("pde files", "+= on a table field", lambda: load_master(_python_table(
        _ENTRY + "DATASET_DICT[name]['train_size'] = 1\nDATASET_DICT[name]['train_size'] += 1\n")),
     ":5: \"DATASET_DICT[name]['train_size'] += 1\" changes DATASET_DICT"),
    ("pde files", "a name reassigned by a loop", lambda: load_master(_python_table(
        _ENTRY + "for name in ['b']:\n    pass\n")), ":4: \"for name in ['b']:\" changes"),
    # a data file that reads other files through HDF5
    ("pde files", "HDF5 external link", lambda: DPOTFile("s", _external_link()),
     "train.hdf5:/data is an HDF5 external link to"),
    ("pde files", "HDF5 external raw storage", lambda: DPOTFile("s", _external_storage()),
     ":/data keeps its values in external raw storage"),
    ("pde files", "external link among per-sample groups", lambda: PDEBenchGroups("s", _group_external_link()),
     "dr.h5:/0001 is an HDF5 external link to"),
    ("pde files", "external link refused through the config", lambda: file_sets(_config(_table(_external_link()))),
     "refused unless data.allow_external_links=True"),
    ("pde files", "data.allow_external_links not a bool", lambda: file_sets(_config(_table(_dpot()),
                                                                                    allow_external_links="yes")),
     "data.allow_external_links='yes'; must be True or False"),
    # damaged files
    ("pde files", "corrupt compressed chunk", lambda: verify_records(DPOTFile("s", _corrupt_chunk())),
     ":'data'[1] frames 0:6 cannot be read ("),
    ("pde files", "non-UTF-8 JSON table", lambda: load_master(_bytes_file("m.json", b'{"a": {"x": "\n\xff"}}')),
     "m.json: not UTF-8 text (byte 0xff at line 2, offset 14); save it as UTF-8"),
    ("pde files", "non-UTF-8 Python table", lambda: load_master(_bytes_file("m.py", b"DATASET_DICT = {}\n# \xe9\n")),
     "m.py: not UTF-8 text (byte 0xe9 at line 2"),
    # a resume on other data than the run started on (data.names=(): every set of the table)
    ("pde files", "resume after a set was added to the master table", lambda: set_added(_folder())(),
     "differs from the data_fingerprint.json this run derives from its data now (sets: added 'dr')"),
    ("pde files", "resume after a file was replaced by other data of the same shape",
     lambda: file_replaced(_folder())(), "(sets['ns']['train']['file']['sha256_ends']: '"),
]


def _python_table(text: str) -> str:
  path = _path("master.py")
  with open(path, "w") as f:
    f.write(text)
  return path


_ENTRY = "DATASET_DICT = {}\nname = 'a'\nDATASET_DICT[name] = {'train_path': 'a.hdf5', 'test_path': 'a.hdf5'}\n"


def _bytes_file(name: str, data: bytes) -> str:
  path = _path(name)
  with open(path, "wb") as f:
    f.write(data)
  return path


def _cfd_axes_swapped() -> str:
  """PDEBench CFD fields written (N, X, Y, T) beside coordinates of an (N, T, X, Y) = (2, 6, 8, 8) set."""
  import h5py
  path = layouts.pdebench_cfd(_path("cfd.hdf5"), {k: _data(2, 6, 8, 8) for k in ("density", "pressure", "Vx", "Vy")})
  with h5py.File(path, "a") as f:
    for k in ("density", "pressure", "Vx", "Vy"):
      del f[k]
      f.create_dataset(k, data=_data(2, 8, 8, 6))
  return path


def _groups_axes_swapped(grid: bool = True) -> str:
  """Per-sample groups written (X, Y, T, C) beside grid/x|y|t of (T, X, Y, C) = (6, 8, 4, 2) samples (``grid``
  False: without grid/x|y|t)."""
  import h5py
  path = layouts.pdebench_groups(_path("dr.h5"), _data(3, 6, 8, 4, 2))
  with h5py.File(path, "a") as f:
    for i in range(3):
      del f[f"{i:04d}/data"]
      f.create_dataset(f"{i:04d}/data", data=_data(8, 4, 6, 2))
      if not grid:
        del f[f"{i:04d}/grid"]
  return path


def _linked(path: str, target: str) -> str:
  os.symlink(target, path)
  return path


def _external_link() -> str:
  """A DPOT file whose 'data' is an external link to a dataset of another file."""
  import h5py
  other = _dpot((6, 8, 8, 10), name="elsewhere.hdf5")
  path = _path("train.hdf5")
  with h5py.File(path, "w") as f:
    f["data"] = h5py.ExternalLink(other, "/data")
  return path


def _external_storage() -> str:
  """A DPOT file whose 'data' keeps its values in a raw file beside it (h5py's ``external=``)."""
  import h5py
  raw = _path("raw.bin")
  _data(6, 8, 8, 10).tofile(raw)
  path = _path("train.hdf5")
  with h5py.File(path, "w") as f:
    f.create_dataset("data", shape=(6, 8, 8, 10), dtype="float32", external=[(raw, 0, 6 * 8 * 8 * 10 * 4)])
  return path


def _group_external_link() -> str:
  """A per-sample-group file whose sample '0001' is an external link to a group of another file."""
  import h5py
  other = layouts.pdebench_groups(_path("other.h5"), _data(1, 6, 8, 8, 2))
  path = layouts.pdebench_groups(_path("dr.h5"), _data(1, 6, 8, 8, 2))
  with h5py.File(path, "a") as f:
    f["0001"] = h5py.ExternalLink(other, "/0000")
  return path


def _corrupt_chunk() -> str:
  """A gzip-compressed DPOT file (one chunk per trajectory) whose chunk 1 is overwritten with junk."""
  import h5py
  path = _path("train.hdf5")
  with h5py.File(path, "w") as f:
    d = f.create_dataset("data", data=_data(4, 8, 8, 6), chunks=(1, 8, 8, 6), compression="gzip")
    info = d.id.get_chunk_info(1)
  with open(path, "r+b") as f:
    f.seek(info.byte_offset)
    f.write(b"\xff" * info.size)
  return path


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
