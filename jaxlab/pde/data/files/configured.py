"""The data sets a ``pde_operator`` config with ``data.source = "files"`` reads, checked against its window.

Config keys (``configs/dpot_files.py``): ``data.master`` (the master table; "" = ``$JAXLAB_PDE_MASTER``),
``data.root`` (the folder relative table paths start from; "" = the table's folder),
``data.names`` (the table's sets to use, DPOT's ``train_paths``; () = every set, in table
order), ``data.allow_external_links`` (False: a data file's HDF5 external links, external raw
storage and virtual datasets are refused, since through them a data file could make the loader read
any file on the machine; True follows them, for files you trust), plus the task's ``t_in``,
``t_out``, ``data.rollout_steps``, ``data.eval_trajectories``
and ``data.num_channels``. Every check names the set, its file and the config key.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from jaxlab.errors import InputError, check, check_bool, is_int
from jaxlab.pde.data.files.master import MasterEntry, check_entry, load_table
from jaxlab.pde.data.files.open import open_set
from jaxlab.pde.data.loader import PDEDataset
from jaxlab.pde.data.resample import strided_grid

#: The environment variable naming the master table when ``data.master`` is empty.
ENV_VAR = "JAXLAB_PDE_MASTER"


@dataclasses.dataclass(frozen=True)
class FileSet:
  """A configured data set from files: its table entry, the lazy data set and its test horizon."""

  entry: MasterEntry
  dataset: PDEDataset
  t_test: int  # frames rolled out at evaluation after the first t_in


def master_path(data: Any) -> str:
  """``data.master``, else ``$JAXLAB_PDE_MASTER``; one line naming the one used when neither is set, or when it
  is a folder or missing."""
  path = data.get("master", "") or os.environ.get(ENV_VAR, "")
  allowed = "a master table of data sets (.py in DPOT's make_master_file.py style, .json or .yaml)"
  check(isinstance(path, str) and path != "",
        f"data.master={data.get('master', '')!r} and ${ENV_VAR} is unset; set one to {allowed}")
  key = "data.master" if data.get("master", "") else f"${ENV_VAR}"
  path = os.path.expanduser(path)
  check(not os.path.isdir(path), f"{key}={path!r} is a folder; allowed: the file of {allowed} in it")
  check(os.path.isfile(path), f"{key}={path!r} does not exist; allowed: {allowed}")
  return path


def selected_entries(data: Any) -> tuple[list[MasterEntry], str]:
  """The table's entries that ``data.names`` selects, and the root of their relative paths."""
  path = master_path(data)
  table = load_table(path)
  selected = data.get("names", ())
  check(isinstance(selected, (list, tuple)) and all(isinstance(n, str) for n in selected),
        f"data.names={selected!r} must be a tuple of data-set names of the master table (() = all)")
  for i, name in enumerate(selected):
    check(name in table, f"data.names[{i}]={name!r} is not in master table {path}; it has: {', '.join(table)}")
  check(len(set(selected)) == len(selected), f"data.names={tuple(selected)} names a set twice")
  # Only the sets this run uses are checked: the official table lists 3-D sets a 2-D run leaves out.
  where = f"master table {path}" + ("" if selected else " (data.names=() uses every entry)")
  entries = [check_entry(n, table[n], where) for n in (selected or table)]
  root = data.get("root", "") or os.path.dirname(os.path.abspath(path))
  check(isinstance(root, str) and os.path.isdir(os.path.expanduser(root)),
        f"data.root={root!r} is not a folder (the folder relative paths of the master table start from; "
        "'' = the table's folder)")
  return entries, os.path.expanduser(root)


def served_size(data: Any) -> int:
  """The grid points per axis that a files run serves (and its model takes): ``data.resolution`` strided by the
  selected sets' ``downsample``, DPOT's order (thu-ml/DPOT @ dcd2f9a, utils/griddataset.py:150 resizes every
  sample to ``res``, then :169-171 keeps every k-th point); one square grid for every set.

  Args:
    data: the ``data`` block of a files config (``resolution`` already checked).

  Raises:
    InputError: a downsample that leaves fewer than 2 points per axis, sets of one run serving different grids,
      or a non-square served grid, in one line naming the set and its downsample.
  """
  res = data.get("resolution")
  entries, _ = selected_entries(data)
  served = {e.name: strided_grid((res, res), e.downsample) for e in entries}
  for e in entries:
    gx, gy = served[e.name]
    check(gx >= 2 and gy >= 2, f"data set {e.name!r}: downsample={e.downsample} (master table) leaves a {gx}x{gy} "
          f"grid of data.resolution={res} (DPOT strides after resizing to data.resolution); each factor must be "
          f"<= {res // 2}")
  check(len(set(served.values())) == 1, "data sets serve different grids: " + ", ".join(
      f"{e.name!r} downsample={e.downsample} -> {served[e.name][0]}x{served[e.name][1]}" for e in entries)
      + f" (data.resolution={res} strided by the master table's downsample); a batch is one grid: name sets of "
      "one downsample in data.names")
  gx, gy = served[entries[0].name]
  check(gx == gy, f"data set {entries[0].name!r}: downsample={entries[0].downsample} (master table) serves a "
        f"{gx}x{gy} grid of data.resolution={res}; the model takes a square grid: give both axes one factor")
  return gx


def file_sets(config: Any) -> list[FileSet]:
  """Every configured set opened lazily (headers only) and checked against ``t_in``, ``t_out``, the test horizon,
  ``data.eval_trajectories`` and ``data.num_channels``.

  Args:
    config: a ``pde_operator`` config (or its dict) with ``data.source = "files"``.

  Returns:
    One :class:`FileSet` per selected table entry, in ``data.names`` order.

  Raises:
    InputError: one line naming the set, its file, the value and what is allowed.
  """
  data = config["data"]
  t_in, t_out, steps = config["t_in"], config["t_out"], data.get("rollout_steps", 0)
  evals, num_channels = data.get("eval_trajectories", 0), data.get("num_channels", 0)
  links = data.get("allow_external_links", False)
  check_bool(links, "data.allow_external_links")
  entries, root = selected_entries(data)
  if data.get("resolution") is not None:  # the task's grid; served_size checks each downsample against it
    served_size(data)
  out = []
  for entry in entries:
    dataset = open_set(entry, root, links)
    frames, channels = dataset.num_frames, dataset.num_channels
    path = dataset.trajectories.parts[0][0].source
    where = f"data set {entry.name!r} ({path})"
    check(t_in + t_out <= frames, f"{where} has T={frames} frames per trajectory; t_in={t_in} + t_out={t_out} "
          f"needs T >= {t_in + t_out} (shorten t_in, or leave the set out of data.names)")
    if steps:
      t_test, term = steps, f"data.rollout_steps={steps}"
    else:
      t_test, term = entry.t_test, f"t_test={entry.t_test} (master table)"
    check(t_in + t_test <= frames, f"{where} has T={frames} frames per trajectory; t_in={t_in} + {term} "
          f"needs T >= {t_in + t_test}")
    check(not evals or evals <= entry.test_size, f"data.eval_trajectories={evals} exceeds the test_size="
          f"{entry.test_size} test trajectories of {where}; must be in [0, {entry.test_size}] (0: all)")
    check(not num_channels or channels <= num_channels,
          f"{where} has C={channels} channels, more than the model's data.num_channels={num_channels}; "
          f"data.num_channels must be >= {channels} (or 0: the widest set's)")
    out.append(FileSet(entry, dataset, t_test))
  return out


def widest_channels(config: Any) -> int:
  """The most channels of any configured set (opens the table and the files' headers)."""
  try:
    return max(s.dataset.num_channels for s in file_sets(config))
  except KeyError as e:  # a saved config without a key this reader needs
    raise InputError(f"config has no {e} key a files run needs") from None


def check_file_keys(data: Any) -> None:
  """The files-only keys' types (``data.verify_files``, ``data.allow_external_links``), before any file is opened."""
  verify = data.get("verify_files", False)
  check(isinstance(verify, bool), f"data.verify_files={verify!r} must be True or False")
  check_bool(data.get("allow_external_links", False), "data.allow_external_links")
  check(is_int(data.get("eval_trajectories", 0)) and data.get("eval_trajectories", 0) >= 0,
        f"data.eval_trajectories={data.get('eval_trajectories')!r} must be an int >= 0 (test trajectories rolled "
        "out per set at evaluation; 0: all)")
