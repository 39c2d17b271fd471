"""DPOT's two storage layouts, read as its loader reads them (thu-ml/DPOT @ dcd2f9a, utils/griddataset.py).

* One HDF5 file whose ``data`` dataset is (N, X, Y, T) or (N, X, Y, T, C): sample ``i`` is
  ``f['data'][i]`` (griddataset.py:76, 142), a 4-D sample gets a channel axis (:144-145). FNO's NS
  sets and CFDBench are stored so (data_generation/preprocess.py:33-53, 509-515).
* "Scatter storage" (``scatter_storage: True`` in the master table): a folder of ``data_{i}.hdf5``
  files, one trajectory each, under the key ``data``, (X, Y, T) or (X, Y, T, C)
  (griddataset.py:65-69; written by data_generation/preprocess.py:113-122 for PDEBench and
  PDEArena sets).

Both are read frame range by frame range: a window costs its own frames only.
"""

from __future__ import annotations

import os

import numpy as np

from jaxlab.errors import InputError, check
from jaxlab.pde.data.files.records import Records, check_dtype, check_field, open_hdf5, strided

KEY = "data"  # the dataset name in both layouts (griddataset.py:67, 142)
_ALLOWED = "DPOT's layout stores trajectories under 'data' as (N, X, Y, T) or (N, X, Y, T, C)"
_ALLOWED_SCATTER = "DPOT's scatter storage holds one trajectory per data_{i}.hdf5 under 'data' as (X, Y, T) or (X, Y, T, C)"


class DPOTFile(Records):
  """DPOT's one-file layout: ``data`` (N, X, Y, T[, C]); trajectory ``i`` is ``data[i]``."""

  def __init__(self, name: str, path: str, stride: tuple[int, int] = (1, 1), allow_external_links: bool = False):
    super().__init__(name, path, stride, allow_external_links)
    data = self.member(self.file(path), KEY, path, _ALLOWED)
    check_dtype(data, path)
    check(data.ndim in (4, 5), f"data set {name!r}: {path}:'data' has shape {data.shape} (rank {data.ndim}); "
          f"{_ALLOWED}")
    n, *grid, frames = data.shape[:4]
    check_field(f"data set {name!r}: {path}:'data'", data.shape, frames, grid, self.stride, "(N, X, Y, T[, C])")
    self.axes_from_layout = (f"{path}:'data'", tuple(data.shape), "(N, X, Y, T[, C])")
    channels = data.shape[4] if data.ndim == 5 else 1
    self.shape = (n, frames, *strided(grid, self.stride), channels)

  def record_name(self, index: int) -> str:
    return f"{self.source}:'data'[{index}]"

  def _read(self, index: int, start: int, stop: int) -> np.ndarray:
    data = self.file(self.source)[KEY]
    sx, sy = self.stride
    block = data[index, ::sx, ::sy, start:stop]          # (X, Y, t) or (X, Y, t, C)
    block = block[..., None] if block.ndim == 3 else block
    return np.moveaxis(block, 2, 0)                      # (t, X, Y, C)


class DPOTScatter(Records):
  """DPOT's scatter storage: ``<folder>/data_{i}.hdf5`` with ``data`` (X, Y, T[, C]), ``count`` files.

  Every ``data_{i}.hdf5`` for i < ``count`` must exist (checked here, a stat per file); the
  shape of record 0 sets the set's shape, and each record read is checked against it.
  """

  def __init__(self, name: str, folder: str, count: int, stride: tuple[int, int] = (1, 1),
               allow_external_links: bool = False):
    super().__init__(name, folder, stride, allow_external_links)
    check(os.path.isdir(folder), f"data set {name!r}: scatter storage folder {folder} does not exist"
          + (" (it is a file; set scatter_storage=False for DPOT's one-file layout)" if os.path.isfile(folder) else ""))
    missing = next((i for i in range(count) if not os.path.isfile(self.path(i))), None)
    if missing is not None:
      raise InputError(f"data set {name!r}: {self.path(missing)} does not exist; scatter storage needs "
                       f"data_0.hdf5 .. data_{count - 1}.hdf5 for its {count} records (train_size / test_size)")
    if count == 0:
      self.shape = (0, 0, 0, 0, 0)
      return
    with open_hdf5(self.path(0), f"data set {name!r}") as f:  # one file per record: none is kept open
      first = self.member(f, KEY, self.path(0), _ALLOWED_SCATTER)
      check_dtype(first, self.path(0))
      check(first.ndim in (3, 4), f"data set {name!r}: {self.path(0)}:'data' has shape {first.shape} "
            f"(rank {first.ndim}); {_ALLOWED_SCATTER}")
      shape = first.shape
      check_field(f"data set {name!r}: {self.path(0)}:'data'", shape, shape[2], shape[:2], self.stride,
                  "(X, Y, T[, C])")
    self.axes_from_layout = (f"{self.path(0)}:'data'", tuple(shape), "(X, Y, T[, C])")
    channels = shape[3] if len(shape) == 4 else 1
    self.shape = (count, shape[2], *strided(shape[:2], self.stride), channels)

  def path(self, index: int) -> str:
    return os.path.join(self.source, f"data_{index}.hdf5")

  def record_name(self, index: int) -> str:
    return self.path(index)

  def _read(self, index: int, start: int, stop: int) -> np.ndarray:
    path = self.path(index)
    with open_hdf5(path, f"data set {self.name!r}") as f:  # DPOT opens each record's file per read too
      data = self.member(f, KEY, path, _ALLOWED_SCATTER)
      if data.ndim not in (3, 4):
        raise InputError(f"data set {self.name!r}: {path}:'data' has shape {data.shape}; {_ALLOWED_SCATTER}")
      sx, sy = self.stride
      block = data[::sx, ::sy, start:stop]
    block = block[..., None] if block.ndim == 3 else block
    return np.moveaxis(block, 2, 0)
