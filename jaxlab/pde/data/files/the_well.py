"""The Well's HDF5 format (Ohana et al., NeurIPS 2024 Datasets and Benchmarks), read with h5py.

The maintained reader, the ``the_well`` package, requires torch (>= 2.1), which jaxlab does not
depend on; so this follows the format as documented (PolymathicAI/the_well @ 215f55d, its data
format page data_format.md of the_well's docs folder) and as ``WellDataset`` reads it
(the_well/data/datasets.py:416-540, 565-640, 865-880). A file holds ``n_trajectories`` (root attribute) trajectories of 2-D fields:

* ``dimensions``: ``time`` (T) and the spatial coordinates named by its ``spatial_dims``
  attribute; the root's ``n_spatial_dims`` must be 2 here.
* ``t0_fields``, ``t1_fields``, ``t2_fields``: scalar, vector and rank-2 tensor fields, listed in
  each group's ``field_names`` attribute; a field is (N, T, X, Y) times D^order components, with
  ``sample_varying``, ``time_varying`` and ``dim_varying`` attributes saying which of those
  axes it actually stores (the others are broadcast, as ``WellDataset._pad_axes`` does).

Channels are the time-varying fields in The Well's order: t0, then t1 with its D components,
then t2 with its D^2, each group in its ``field_names`` order (``_postprocess_data`` flattens them
so). Constant fields (``time_varying`` False) are left out: The Well feeds them as separate
constant inputs, which DPOT has no slot for. A data set is one file or a folder of them (The
Well's ``data/train``, ``data/valid``, ``data/test``), trajectories numbered file by file in
sorted file order.
"""

from __future__ import annotations

import itertools
import os
from typing import Sequence

import numpy as np

from jaxlab.errors import InputError, check
from jaxlab.pde.data.files.records import Records, check_dtype, check_field, names, strided
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  import h5py

FIELD_GROUPS = ("t0_fields", "t1_fields", "t2_fields")
_ALLOWED = "The Well's format (data_format.md of the_well's docs folder): t0_fields/t1_fields/t2_fields, dimensions, n_trajectories"


def well_files(path: str, where: str) -> list[str]:
  """``path`` itself, or the sorted ``*.hdf5`` / ``*.h5`` files of the folder ``path``."""
  if os.path.isdir(path):
    found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith((".hdf5", ".h5")))
    check(bool(found), f"{where}: folder {path} holds no .hdf5 / .h5 files")
    return found
  check(os.path.isfile(path), f"{where}: no file or folder {path}")
  return [path]


class TheWell(Records):
  """Trajectories of The Well's files: a file or folder; ``fields`` selects time-varying fields by name."""

  def __init__(self, name: str, path: str, fields: Sequence[str] = (), stride: tuple[int, int] = (1, 1),
               allow_external_links: bool = False):
    super().__init__(name, path, stride, allow_external_links)
    where = f"data set {name!r}"
    self.files = well_files(path, where)
    counts, layouts = [], []
    for file_path in self.files:
      n, layout = self._layout(file_path)
      counts.append(n)
      layouts.append(layout)
    first = layouts[0]
    for file_path, layout in zip(self.files, layouts):
      if layout != first:
        raise InputError(f"{where}: {file_path} has fields/grid/time {layout}, {self.files[0]} has {first}; "
                         "every file of a set must match")
    frames, grid, spatial, available = first
    check(bool(available), f"{where}: {self.files[0]} has no time-varying field (its t0_fields, t1_fields and "
          "t2_fields hold none with time_varying=True); DPOT trains on fields that change over time")
    check_field(f"{where}: {self.files[0]}:dimensions", (frames, *grid), frames, grid, self.stride,
                f"(time, {', '.join(spatial)}) of its dimensions group")
    chosen = list(fields) if fields else [f for f, _ in available]
    orders = dict(available)
    unknown = [f for f in chosen if f not in orders]
    check(not unknown, f"{where}: fields {unknown} are not time-varying fields of {self.files[0]} "
          f"(it has {[f for f, _ in available]})")
    self.fields = tuple((f, orders[f]) for f in chosen)
    self.channel_names = tuple(f"{f}_{''.join(c)}" if c else f for f, order in self.fields
                               for c in itertools.product(spatial, repeat=order))  # The Well's names
    self._offsets = np.cumsum([0] + counts)
    self.shape = (int(self._offsets[-1]), frames, *strided(grid, self.stride), len(self.channel_names))

  def _layout(self, file_path: str) -> tuple[int, tuple]:
    f = self.file(file_path)
    for key in ("n_trajectories", "n_spatial_dims"):
      check(key in f.attrs, f"data set {self.name!r}: {file_path} lacks the root attribute {key!r}; {_ALLOWED}")
    check(int(f.attrs["n_spatial_dims"]) == 2, f"data set {self.name!r}: {file_path} has n_spatial_dims="
          f"{int(f.attrs['n_spatial_dims'])}; jaxlab's DPOT reads 2-D sets only")
    dims = self.member(f, "dimensions", file_path, _ALLOWED, kind=h5py.Group)
    spatial = names(dims.attrs.get("spatial_dims", []))
    check(len(spatial) == 2, f"data set {self.name!r}: {file_path}:dimensions has spatial_dims={spatial}; "
          "must name 2 axes")
    frames = self.member(dims, "time", file_path, _ALLOWED).shape[-1]
    grid = tuple(self.member(dims, d, file_path, _ALLOWED).shape[-1] for d in spatial)
    fields = []
    for order, group_name in enumerate(FIELD_GROUPS):
      group = self.member(f, group_name, file_path, _ALLOWED, kind=h5py.Group)
      for field in names(group.attrs.get("field_names", [])):
        data = self.member(group, field, file_path, _ALLOWED)
        check_dtype(data, file_path)
        if not bool(data.attrs.get("time_varying", True)):
          continue
        n = int(f.attrs["n_trajectories"])
        lead = (n, frames) if bool(data.attrs.get("sample_varying", True)) else (frames,)
        check(tuple(data.shape[:len(lead)]) == lead, f"data set {self.name!r}: {file_path}:{data.name} has shape "
              f"{data.shape}; its leading axes must be {lead} (n_trajectories, time) by the file's attributes")
        varying = [bool(v) for v in np.atleast_1d(data.attrs.get("dim_varying", [True, True]))]
        stored = lead + tuple(g for g, v in zip(grid, varying) if v) + (2,) * order
        check(tuple(data.shape) == stored, f"data set {self.name!r}: {file_path}:{data.name} has shape {data.shape}; "
              f"by the file's attributes and dimensions it must be {stored} (n_trajectories, time, {', '.join(spatial)}"
              f" where dim_varying={varying}, then 2 per tensor order {order})")
        fields.append((field, order))
    return int(f.attrs["n_trajectories"]), (frames, grid, tuple(spatial), tuple(fields))

  def record_name(self, index: int) -> str:
    j = int(np.searchsorted(self._offsets, index, side="right")) - 1
    return f"{self.files[j]} trajectory {index - int(self._offsets[j])}"

  def _read(self, index: int, start: int, stop: int) -> np.ndarray:
    j = int(np.searchsorted(self._offsets, index, side="right")) - 1
    f, local = self.file(self.files[j]), index - int(self._offsets[j])
    sx, sy = self.stride
    out = []
    for field, order in self.fields:
      data = f[FIELD_GROUPS[order]][field]
      sample_varying = bool(data.attrs.get("sample_varying", True))
      dim_varying = [bool(v) for v in np.atleast_1d(data.attrs.get("dim_varying", [True, True]))]
      index_ = (local,) if sample_varying else ()
      index_ += (slice(start, stop),)
      index_ += tuple(slice(None, None, s) for s, varies in zip((sx, sy), dim_varying) if varies)
      block = np.asarray(data[index_])                               # (t, [X], [Y], D^order...)
      for axis, varies in enumerate(dim_varying):                    # broadcast unstored grid axes
        if not varies:
          block = np.expand_dims(block, 1 + axis)
      target = (block.shape[0], *self.shape[2:4], *(2,) * order)
      try:
        block = np.broadcast_to(block, target)
      except ValueError:
        raise InputError(f"data set {self.name!r}: {self.record_name(index)} field {field!r} has frames of shape "
                         f"{block.shape[1:]}; this set's fields are {target[1:]} (X, Y, then 2 per tensor order)") from None
      out.append(block.reshape(*block.shape[:3], -1))                # D^order components, row-major
    return np.concatenate(out, axis=-1)
