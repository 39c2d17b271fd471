"""Trajectories in HDF5 files as a lazy array (n, T, X, Y, C) float32 that reads only what is indexed.

:class:`PDEDataset <jaxlab.pde.data.PDEDataset>` and the loader index their ``trajectories``
as ``a[i, start:stop]`` (one window of one trajectory) or ``a[i:j, :stop]`` (test trajectories);
a :class:`Records` answers exactly those reads from disk through h5py, so a batch touches only
its own rows' frames and never the whole set. Every file is opened on first use in each
process (a forked worker reopens it: an HDF5 handle must not cross a fork) and stays open;
h5py serialises threads itself.

Every record read is checked before it is returned: its shape (a record of a scatter folder
or a per-sample group can differ from the first) and that every value is finite. A bad record
raises :class:`~jaxlab.errors.InputError` naming the file, the record's index and what is
allowed; nothing is skipped, replaced or zero-filled.
"""

from __future__ import annotations

import abc
import os
from typing import Any, Sequence

import numpy as np
from numpy.typing import DTypeLike

from jaxlab.errors import InputError, check, is_int
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  import h5py


def open_hdf5(path: str, where: str) -> h5py.File:
  """``h5py.File(path, "r")``; a missing or unreadable file is one line naming ``where`` and the path."""
  if not os.path.isfile(path):
    raise InputError(f"{where}: no file {path}" + (" (it is a folder)" if os.path.isdir(path) else ""))
  try:
    return h5py.File(path, "r")
  except OSError as e:
    raise InputError(f"{where}: {path} is not a readable HDF5 file ({e})") from None


#: The config key that lets a data file read other files through HDF5 (external links, external raw storage,
#: virtual datasets); off by default, since a data file could then make the loader read any file on the machine.
ALLOW_EXTERNAL_KEY = "data.allow_external_links"


def _refuse_external(what: str) -> None:
  raise InputError(f"{what}; a data file that reads other files could make the loader read any file on the "
                   f"machine: refused unless {ALLOW_EXTERNAL_KEY}=True (open_set(..., allow_external_links=True))")


def check_storage(dataset: h5py.Dataset, path: str, allow_external: bool = False) -> None:
  """A dataset's values must lie in ``path`` itself: no external raw storage, no virtual dataset (unless allowed)."""
  if allow_external:
    return
  external = dataset.external
  if external:
    _refuse_external(f"{path}:{dataset.name} keeps its values in external raw storage "
                     f"{[os.fsdecode(e[0]) for e in external][:3]}")
  if dataset.is_virtual:
    sources = sorted({s.file_name for s in dataset.virtual_sources()})
    _refuse_external(f"{path}:{dataset.name} is an HDF5 virtual dataset mapping {sources[:3]}")


def member(group: h5py.Group, key: str, path: str, allowed: str, kind: type = h5py.Dataset,
           allow_external: bool = False) -> Any:
  """``group[key]``, refused in one line (naming the file, the key and the keys it has) when absent.

  Unless ``allow_external``, an external link (or a link that resolves into another file), and for a
  dataset external raw storage or a virtual dataset, are refused before anything is read from them.
  """
  link = group.get(key, getlink=True)
  if isinstance(link, h5py.ExternalLink) and not allow_external:
    _refuse_external(f"{path}:{group.name.rstrip('/')}/{key} is an HDF5 external link to "
                     f"{link.filename}:{link.path}")
  if key not in group:
    where = path if group.name == "/" else f"{path}:{group.name}"
    raise InputError(f"{where} has no {key!r} (it holds {sorted(group.keys())[:8]}); {allowed}")
  item = group[key]
  if not allow_external and item.file.filename != group.file.filename:  # e.g. a soft link through an external one
    _refuse_external(f"{path}:{group.name.rstrip('/')}/{key} resolves into another file, {item.file.filename}")
  if not isinstance(item, kind):
    raise InputError(f"{path}:{item.name} is a {type(item).__name__}, not an HDF5 {kind.__name__}; {allowed}")
  if isinstance(item, h5py.Dataset):
    check_storage(item, path, allow_external)
  return item


def check_dtype(dataset: h5py.Dataset, path: str) -> None:
  """A stored array must hold real numbers (cast to float32 when read)."""
  check(dataset.dtype.kind in "fiu", f"{path}:{dataset.name} has dtype {dataset.dtype}; must be real numbers "
        "(float or int, read as float32)")


def names(values: Any) -> list[str]:
  """An HDF5 string-list attribute (bytes or str entries) as a list of str."""
  return [v.decode() if isinstance(v, bytes) else str(v) for v in np.atleast_1d(values)]


def strided(shape: Sequence[int], stride: tuple[int, int]) -> tuple[int, int]:
  """Grid (X, Y) of a stored grid ``shape`` read at every ``stride``-th point (a reader's ``stride``)."""
  return -(-shape[0] // stride[0]), -(-shape[1] // stride[1])


def check_field(where: str, shape: Sequence[int], frames: int, grid: Sequence[int], stride: tuple[int, int],
                layout: str) -> None:
  """A stored array can be a 2-D field over time: X, Y >= 2, T >= 2, and the read ``stride`` within the grid.

  Args:
    where: the file and dataset (``path:'data'``), for the message.
    shape: the dataset's stored shape, printed as the file has it.
    frames: its time steps T, read from the axis ``layout`` names.
    grid: its stored grid (X, Y), read from the axes ``layout`` names.
    stride: the reader's ``stride``.
    layout: the axes the format stores, e.g. ``"(N, X, Y, T[, C])"``.

  Raises:
    InputError: one line with what was expected and what the file has.
  """
  shape = tuple(int(s) for s in shape)
  gx, gy = (int(g) for g in grid)
  check(gx >= 2 and gy >= 2, f"{where} has shape {shape}: grid X={gx}, Y={gy} by the layout {layout}; a field "
        "needs X, Y >= 2 (are the axes stored in another order?)")
  check(frames >= 2, f"{where} has shape {shape}: T={frames} time steps by the layout {layout}; a trajectory needs "
        "T >= 2 (t_in + t_out frames; are the axes stored in another order?)")
  check(stride[0] <= gx and stride[1] <= gy, f"{where}: stride={tuple(stride)} exceeds its {gx}x{gy} grid "
        f"(shape {shape}, {layout}); each stride factor must be <= the grid size along its axis")


class TrajectoryArray(abc.ABC):
  """An array-like (n, T, X, Y, C) float32 whose reads go through :meth:`read` (one trajectory, some frames)."""

  shape: tuple[int, int, int, int, int]
  dtype = np.dtype(np.float32)
  ndim = 5

  def __len__(self) -> int:
    return self.shape[0]

  @abc.abstractmethod
  def read(self, index: int, start: int, stop: int) -> np.ndarray:
    """Frames ``start:stop`` of trajectory ``index``: (stop - start, X, Y, C) float32, checked."""

  def __array__(self, dtype: DTypeLike = None, copy: bool | None = None) -> np.ndarray:
    del copy
    out = self[:]
    return out if dtype is None else out.astype(dtype)

  def __getitem__(self, key: Any) -> np.ndarray:
    key = key if isinstance(key, tuple) else (key,)
    check(1 <= len(key) <= 2, f"{type(self).__name__} takes [trajectories] or [trajectories, frames], got {key!r}")
    rows, frames = key[0], key[1] if len(key) == 2 else slice(None)
    if not isinstance(frames, slice) or frames.step not in (None, 1):
      raise TypeError(f"frames must be a slice with step 1, got {frames!r}")  # a caller's bug, not input
    start, stop, _ = frames.indices(self.shape[1])
    stop = max(stop, start)
    if is_int(rows):
      index = int(rows) + (self.shape[0] if rows < 0 else 0)
      if not 0 <= index < self.shape[0]:
        raise IndexError(f"trajectory {rows} out of range for {self.shape[0]} trajectories")
      return self.read(index, start, stop)
    if isinstance(rows, slice):
      picked = range(*rows.indices(self.shape[0]))
      out = np.empty((len(picked), stop - start, *self.shape[2:]), np.float32)
      for j, i in enumerate(picked):
        out[j] = self.read(i, start, stop)
      return out
    raise TypeError(f"trajectories must be an int or a slice, got {rows!r}")


class Records(TrajectoryArray):
  """The trajectories of one file (or folder) in an official layout; subclasses say how to read one.

  Attributes:
    name: the data set's name (messages).
    source: the file or folder (messages).
    shape: (n, T, X, Y, C) as read, after ``stride``.
    stride: (sx, sy) every sx-th / sy-th stored grid point is read; ``open_set`` reads every point (1, 1),
      since DPOT's ``downsample`` strides after the resampling (the ``downsample`` of
      :class:`jaxlab.pde.data.PDEDataset`).
    allow_external_links: follow HDF5 external links, external raw storage and virtual datasets
      (``data.allow_external_links``); off, they are refused.
    axes_from_layout: ``(where, stored shape, layout)`` when the axis order is the format's alone
      (nothing in the file confirms it, as DPOT's files): ``open_set`` then refuses a non-square
      grid unless the table gives ``in_size`` or ``t_total``; None when the file's coordinate
      arrays or dimensions confirm it (PDEBench with coordinates, The Well).
  """

  axes_from_layout: tuple[str, tuple[int, ...], str] | None = None

  def __init__(self, name: str, source: str, stride: tuple[int, int] = (1, 1), allow_external_links: bool = False):
    self.name, self.source, self.stride = name, source, tuple(stride)
    self.allow_external_links = bool(allow_external_links)
    self._pid: int | None = None
    self._files: dict[str, h5py.File] = {}

  def file(self, path: str) -> h5py.File:
    """``path`` opened once per process (reopened after a fork), kept open."""
    if self._pid != os.getpid():
      self._files, self._pid = {}, os.getpid()  # a forked child must not share the parent's handles
    if path not in self._files:
      self._files[path] = open_hdf5(path, f"data set {self.name!r}")
    return self._files[path]

  def member(self, group: h5py.Group, key: str, path: str, allowed: str, kind: type = h5py.Dataset) -> Any:
    """``records.member`` (a key of a group, refused when absent or in another file) under ``allow_external_links``."""
    return member(group, key, path, allowed, kind, self.allow_external_links)

  def __getstate__(self) -> dict[str, Any]:
    state = dict(self.__dict__)
    state["_files"], state["_pid"] = {}, None  # handles are per process
    return state

  def record_name(self, index: int) -> str:
    """Where trajectory ``index`` is stored, for messages."""
    return f"{self.source} record {index}"

  @abc.abstractmethod
  def _read(self, index: int, start: int, stop: int) -> np.ndarray:
    """The raw frames (stop - start, X, Y, C) of record ``index``, any real dtype, unchecked."""

  def read(self, index: int, start: int, stop: int) -> np.ndarray:
    try:
      raw = self._read(index, start, stop)
    except OSError as e:  # HDF5's own read errors: a corrupt (e.g. compressed) chunk, a truncated file
      raise InputError(f"data set {self.name!r}: {self.record_name(index)} frames {start}:{stop} cannot be read "
                       f"({str(e).splitlines()[0] if str(e) else type(e).__name__}); the file is damaged: "
                       "re-download or regenerate it") from None
    expected = (stop - start, *self.shape[2:])
    if raw.shape != expected:
      raise InputError(f"data set {self.name!r}: {self.record_name(index)} has frames {start}:{stop} of shape "
                       f"{raw.shape} (frames, X, Y, C); every record of this set must give {expected}")
    out = raw.astype(np.float32)
    finite = np.isfinite(out)
    if not finite.all():
      bad = np.argwhere(~finite)[0]
      raise InputError(f"data set {self.name!r}: {self.record_name(index)} holds {out[tuple(bad)]} at frame "
                       f"{start + bad[0]}, point {tuple(int(b) for b in bad[1:3])}, channel {int(bad[3])}; every "
                       "value must be finite (bad records are not skipped: fix the file or leave the record out)")
    return out


class Split(TrajectoryArray):
  """Training trajectories then test trajectories, each a range of records: ``[train..., test...]``.

  A :class:`~jaxlab.pde.data.PDEDataset` with ``num_test = test count`` over this array draws
  training windows from the first part only and rolls out the second (its split rule).
  """

  def __init__(self, name: str, parts: Sequence[tuple[TrajectoryArray, int, int]]):
    """``parts``: ``(records, first index, count)`` for the training and then the test records."""
    self.name, self.parts = name, tuple(parts)
    for records, first, count in self.parts:
      check(is_int(first) and is_int(count) and first >= 0 and count >= 0 and first + count <= records.shape[0],
            f"data set {name!r}: records {first}..{first + count - 1} requested, {records.shape[0]} stored")
    shapes = {tuple(r.shape[1:]) for r, _, _ in self.parts}
    if len(shapes) != 1:
      listed = "; ".join(f"{getattr(r, 'source', '?')}: {tuple(r.shape[1:])}" for r, _, _ in self.parts)
      raise InputError(f"data set {name!r}: its train and test records differ in (T, X, Y, C): {listed}; "
                       "they must match")
    self.shape = (sum(c for _, _, c in self.parts), *shapes.pop())
    self._offsets = np.cumsum([0] + [c for _, _, c in self.parts])

  def read(self, index: int, start: int, stop: int) -> np.ndarray:
    part = int(np.searchsorted(self._offsets, index, side="right")) - 1
    records, first, _ = self.parts[part]
    return records.read(first + index - int(self._offsets[part]), start, stop)


def verify_records(array: TrajectoryArray, chunk_frames: int = 64) -> None:
  """Reads every record of ``array`` once, frames in chunks; the first bad one raises its ``InputError``.

  For a full check before training (``data.verify_files``); the loader checks each read anyway.
  """
  frames = array.shape[1]
  for i in range(array.shape[0]):
    for start in range(0, frames, chunk_frames):
      array.read(i, start, min(start + chunk_frames, frames))
