"""PDEBench's 2-D HDF5 files as they are downloaded (Takamoto et al., NeurIPS 2022 Datasets and Benchmarks).

Layouts, as PDEBench's own loader reads them (pdebench/PDEBench @ 9754b4c, pdebench/models/fno/utils.py):

* Compressible Navier-Stokes, ``2D_CFD_*.hdf5`` (:class:`PDEBenchCFD`): one dataset per field,
  ``density``, ``pressure``, ``Vx``, ``Vy``, each (N, T, X, Y), beside ``x-coordinate``,
  ``y-coordinate`` and ``t-coordinate`` (utils.py:247-315, written by
  data_gen/data_gen_NLE/Data_Merge.py:337-347). Channels are stacked in DPOT's order
  (Vx, Vy, density, pressure: thu-ml/DPOT data_generation/preprocess.py:92), the order its
  pre-trained models saw; PDEBench's FNO uses (density, pressure, Vx, Vy): the master entry's
  ``fields`` picks either.
* Per-sample groups, ``2D_diff-react_NA_NA.h5`` and ``2D_rdb_NA_NA.h5`` (:class:`PDEBenchGroups`):
  one group per sample (``'0000'``, ``'0001'``, ...), each with ``data`` (T, X, Y, C) and
  ``grid/x``, ``grid/y``, ``grid/t`` (``FNODatasetMult``, utils.py:528-606, written by
  data_gen/gen_diff_react.py:57-82). Samples are the sorted group names, as PDEBench's loader
  takes them (utils.py:553).

PDEBench's own loader reads a whole file into memory; here a window reads only its frames.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from jaxlab.errors import InputError, check
from jaxlab.pde.data.files.records import Records, check_dtype, check_field, strided
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  import h5py

#: DPOT's channel order for PDEBench's compressible NS (data_generation/preprocess.py:92).
CFD_FIELDS = ("Vx", "Vy", "density", "pressure")
_ALLOWED_CFD = "PDEBench's 2-D CFD files hold density, pressure, Vx, Vy as (N, T, X, Y)"
_ALLOWED_GROUPS = "PDEBench's per-sample files hold one group per sample with 'data' (T, X, Y, C)"


def _check_coordinates(records: Records, group: h5py.Group, where: str, shape: tuple, expected: dict) -> None:
  """The coordinate arrays a PDEBench file stores (when it has them) must match the field's axes.

  ``expected``: coordinate dataset -> (axis name, the lengths that fit: T or T + 1 for time).
  """
  for key, (axis, lengths) in expected.items():
    if key not in group:
      continue
    coords = records.member(group, key, records.source, "")
    length = coords.shape[-1] if coords.ndim else None
    check(length in lengths, f"{where} has shape {shape}, so {axis}={lengths[0]}, but {records.source}:{coords.name} "
          f"has {length} points; the field's axes must match its coordinates (are they stored in another order?)")


class PDEBenchCFD(Records):
  """A ``2D_CFD_*.hdf5`` file: fields ``fields`` (N, T, X, Y) stacked as channels (default DPOT's order)."""

  def __init__(self, name: str, path: str, fields: Sequence[str] = CFD_FIELDS, stride: tuple[int, int] = (1, 1),
               allow_external_links: bool = False):
    super().__init__(name, path, stride, allow_external_links)
    check(len(fields) >= 1 and all(isinstance(f, str) for f in fields),
          f"data set {name!r}: fields={fields!r} must be a non-empty list of dataset names, e.g. {list(CFD_FIELDS)}")
    self.fields = tuple(fields)
    f = self.file(path)
    shapes = {}
    for field in self.fields:
      data = self.member(f, field, path, _ALLOWED_CFD)
      check_dtype(data, path)
      check(data.ndim == 4, f"data set {name!r}: {path}:{field!r} has shape {data.shape} (rank {data.ndim}); "
            f"{_ALLOWED_CFD}")
      shapes[field] = data.shape
    if len(set(shapes.values())) != 1:
      raise InputError(f"data set {name!r}: {path} has fields of different shapes {shapes}; they must match")
    n, frames, *grid = shapes[self.fields[0]]
    where = f"data set {name!r}: {path}:{self.fields[0]!r}"
    check_field(where, shapes[self.fields[0]], frames, grid, self.stride, "(N, T, X, Y)")
    coordinates = {"x-coordinate": ("X", (grid[0],)), "y-coordinate": ("Y", (grid[1],)),
                   "t-coordinate": ("T", (frames, frames + 1))}
    _check_coordinates(self, f, where, shapes[self.fields[0]], coordinates)
    if not all(key in f for key in coordinates):
      self.axes_from_layout = (f"{path}:{self.fields[0]!r}", tuple(shapes[self.fields[0]]), "(N, T, X, Y)")
    self.shape = (n, frames, *strided(grid, self.stride), len(self.fields))

  def record_name(self, index: int) -> str:
    return f"{self.source} sample {index}"

  def _read(self, index: int, start: int, stop: int) -> np.ndarray:
    f = self.file(self.source)
    sx, sy = self.stride
    return np.stack([f[field][index, start:stop, ::sx, ::sy] for field in self.fields], axis=-1)


class PDEBenchGroups(Records):
  """A per-sample-group file (2-D diffusion-reaction, shallow water): sample i = sorted groups[i]/'data' (T, X, Y, C)."""

  def __init__(self, name: str, path: str, stride: tuple[int, int] = (1, 1), allow_external_links: bool = False):
    super().__init__(name, path, stride, allow_external_links)
    f = self.file(path)
    # member() first: an external link is refused before it is followed
    self.keys = sorted(k for k in f.keys() if isinstance(self.member(f, k, path, _ALLOWED_GROUPS, object), h5py.Group))
    check(len(self.keys) >= 1, f"data set {name!r}: {path} has no sample groups (it holds {sorted(f.keys())[:8]}); "
          f"{_ALLOWED_GROUPS}")
    first = self.member(f[self.keys[0]], "data", path, _ALLOWED_GROUPS)
    check_dtype(first, path)
    check(first.ndim == 4, f"data set {name!r}: {path}:{first.name} has shape {first.shape} (rank {first.ndim}); "
          f"{_ALLOWED_GROUPS}")
    frames, gx, gy, channels = first.shape
    where = f"data set {name!r}: {path}:{first.name}"
    check_field(where, first.shape, frames, (gx, gy), self.stride, "(T, X, Y, C)")
    coordinates = {"grid/x": ("X", (gx,)), "grid/y": ("Y", (gy,)), "grid/t": ("T", (frames, frames + 1))}
    _check_coordinates(self, f[self.keys[0]], where, first.shape, coordinates)
    if not all(key in f[self.keys[0]] for key in coordinates):
      self.axes_from_layout = (f"{path}:{first.name}", tuple(first.shape), "(T, X, Y, C)")
    self.shape = (len(self.keys), frames, *strided((gx, gy), self.stride), channels)

  def record_name(self, index: int) -> str:
    return f"{self.source} sample {index} (group {self.keys[index]!r})"

  def _read(self, index: int, start: int, stop: int) -> np.ndarray:
    group = self.file(self.source)[self.keys[index]]
    data = self.member(group, "data", self.source, _ALLOWED_GROUPS)
    if data.ndim != 4:
      raise InputError(f"data set {self.name!r}: {self.record_name(index)} has 'data' of shape {data.shape}; "
                       f"{_ALLOWED_GROUPS}")
    sx, sy = self.stride
    return data[start:stop, ::sx, ::sy]
