"""One master-table entry opened as a :class:`~jaxlab.pde.data.PDEDataset` over its files (nothing read yet).

The split is DPOT's: the training trajectories are the first ``train_size`` records of
``train_path``, the test trajectories the first ``test_size`` records of ``test_path``
(utils/griddataset.py:53, 65-76, 142: sample index = position). When both paths name the same file
(PDEBench's and The Well's single files), the test trajectories are its *last* ``test_size``
records, as DPOT's conversion of PDEBench splits them (data_generation/preprocess.py:109), and the
two parts may not overlap. Files are told apart by what they are (device and inode), not by how
their paths are spelt: a ``test_path`` that is a symlink to the training file is that file.

The entry's ``downsample`` is not a read stride: the files are read whole, and the data set carries
it (the ``downsample`` of :class:`~jaxlab.pde.data.PDEDataset`), so the loader takes every k-th point after
resampling to ``data.resolution``, as DPOT does (utils/griddataset.py:150 resizes with ``pad_data``,
then :169-171 strides x and y).
"""

from __future__ import annotations

import os

from jaxlab.errors import InputError, check
from jaxlab.pde.data.files.dpot import DPOTFile, DPOTScatter
from jaxlab.pde.data.files.master import MasterEntry, resolve
from jaxlab.pde.data.files.pdebench import CFD_FIELDS, PDEBenchCFD, PDEBenchGroups
from jaxlab.pde.data.files.records import Records, Split
from jaxlab.pde.data.files.the_well import TheWell
from jaxlab.pde.data.loader import PDEDataset, make_dataset


def open_records(entry: MasterEntry, path: str, count: int, allow_external_links: bool = False) -> Records:
  """The records of one of ``entry``'s paths (already resolved) in its format, every stored point (the entry's
  ``downsample`` is the loader's, after resampling); ``count`` for scatter storage.

  ``allow_external_links``: follow HDF5 external links and external storage (``data.allow_external_links``).
  """
  stride, links = (1, 1), allow_external_links
  if entry.format == "dpot":
    if entry.scatter_storage:
      return DPOTScatter(entry.name, path, count, stride, links)
    return DPOTFile(entry.name, path, stride, links)
  if entry.format == "pdebench_cfd":
    return PDEBenchCFD(entry.name, path, entry.fields or CFD_FIELDS, stride, links)
  if entry.format == "pdebench_groups":
    return PDEBenchGroups(entry.name, path, stride, links)
  return TheWell(entry.name, path, entry.fields, stride, links)


def same_file(a: str, b: str) -> bool:
  """Whether two paths name one file or folder (same device and inode; symlinks and spellings resolved)."""
  try:
    return os.path.samefile(a, b)
  except OSError:  # one is missing: the reader names it
    return os.path.realpath(a) == os.path.realpath(b)


def _check_against_files(entry: MasterEntry, records: Records, where: str) -> None:
  """The entry's optional t_total / in_size / n_channels / pred_channels agree with what the files hold."""
  _, frames, gx, gy, channels = records.shape
  if entry.t_total is not None:
    check(entry.t_total == frames, f"{where}: t_total={entry.t_total} in the master table, but {records.source} "
          f"has T={frames} frames per trajectory; they must agree")
  if entry.in_size is not None:
    check(tuple(entry.in_size) == (gx, gy), f"{where}: in_size={entry.in_size} in the master table, but "
          f"{records.source} has a {gx}x{gy} grid; they must agree")
  if entry.n_channels is not None:
    check(entry.n_channels == channels, f"{where}: n_channels={entry.n_channels} in the master table, but "
          f"{records.source} has C={channels} channels; they must agree")
  if entry.pred_channels is not None:
    check(entry.pred_channels <= channels, f"{where}: pred_channels={entry.pred_channels} exceeds the "
          f"C={channels} channels of {records.source}; must be in [1, {channels}]")


def _check_axis_order(entry: MasterEntry, records: Records, where: str) -> None:
  """A file whose axis order only its format names must read as a square grid, unless the table gives its shape.

  An array stored in another axis order than its format's reads with a time or channel axis as a
  side of the grid: DPOT's (N, X, Y, T, C) written as (N, T, X, Y, C) reads as a T x X grid of Y
  frames. Such a grid is square only when T equals a side, so, when the master table gives
  neither ``in_size`` nor ``t_total`` (which :func:`open_set` checks against the file), a
  non-square grid is refused: a file of non-square data states its shape in the table. Every
  official set gives both and has a square grid. Files whose own coordinate arrays or dimensions
  name the axes (PDEBench with ``x-coordinate`` / ``y-coordinate`` / ``t-coordinate`` or
  ``grid/x|y|t``, The Well) are checked against them instead. What this cannot catch: an array
  in another order that still reads as a square grid (T equal to a side, e.g. 32 frames of a
  32x32 grid).

  Args:
    entry: the set's master-table entry.
    records: its opened records (read at every point).
    where: the set, for the message.

  Raises:
    InputError: one line naming the file, its shape, the layout, what it reads as and the table
      fields that would confirm it.
  """
  if records.axes_from_layout is None or entry.in_size is not None or entry.t_total is not None:
    return
  stored, shape, layout = records.axes_from_layout
  _, frames, gx, gy, _ = records.shape
  if gx != gy:
    raise InputError(f"{where}: {stored} has shape {shape}, which the layout {layout} reads as a {gx}x{gy} grid of "
                     f"T={frames} frames; a grid that is not square is how an array with its axes in another order "
                     "reads, and the master table gives neither in_size nor t_total to confirm this shape; allowed: "
                     f"the axes in the order {layout}, or, if this is the data's shape, in_size=[{gx}, {gy}] or "
                     f"t_total={frames} in the master table")


def open_set(entry: MasterEntry, root: str, allow_external_links: bool = False) -> PDEDataset:
  """``entry``'s training then test trajectories as one lazy :class:`PDEDataset` (``num_test = test_size``).

  Args:
    entry: a checked master-table entry.
    root: the folder relative paths of the table are relative to.
    allow_external_links: follow HDF5 external links, external raw storage and virtual datasets
      (``data.allow_external_links``); by default they are refused, since a data file could make the
      loader read any file on the machine through them.

  Returns:
    A data set whose ``trajectories`` read from the files on indexing (every stored point);
    ``eval_channels`` is the entry's ``pred_channels``, ``downsample`` the entry's.

  Raises:
    InputError: a missing file or key, a wrong rank, too few records, a table field that the
      files contradict, a non-square grid that only the format's axis order names while the table
      gives neither in_size nor t_total (how another axis order reads), a test set that is the
      training set, in one line naming the file.
  """
  where = f"data set {entry.name!r}"
  train_path, test_path = resolve(entry.train_path, root), resolve(entry.test_path, root)
  identical = same_file(train_path, test_path)
  check(not (identical and entry.scatter_storage),
        f"{where}: train_path {train_path} and test_path {test_path} are the same scatter-storage folder; its test "
        "records data_0.hdf5 .. would be training records: point test_path at the folder of test trajectories")
  train = open_records(entry, train_path, entry.train_size, allow_external_links)
  shared = identical and not entry.scatter_storage
  test = train if shared else open_records(entry, test_path, entry.test_size, allow_external_links)
  for records in ((train,) if shared else (train, test)):
    _check_against_files(entry, records, where)
    _check_axis_order(entry, records, where)
  n_train, n_test = train.shape[0], test.shape[0]
  if shared:
    check(entry.train_size + entry.test_size <= n_train,
          f"{where}: train_size={entry.train_size} + test_size={entry.test_size} exceed the {n_train} records of "
          f"{train_path} (one file: the first train_size train, the last test_size test; they must not overlap)")
    parts = [(train, 0, entry.train_size), (train, n_train - entry.test_size, entry.test_size)]
  else:
    for key, size, n, path in (("train_size", entry.train_size, n_train, train_path),
                               ("test_size", entry.test_size, n_test, test_path)):
      check(size <= n, f"{where}: {key}={size} exceeds the {n} records of {path}; must be in [1, {n}]")
    parts = [(train, 0, entry.train_size), (test, 0, entry.test_size)]
  trajectories = Split(entry.name, parts)
  names = getattr(train, "channel_names", None) or getattr(train, "fields", ())
  return make_dataset(entry.name, trajectories, num_test=entry.test_size, channel_names=names,
                      eval_channels=entry.pred_channels, verify_finite=False, downsample=entry.downsample)
