"""What a ``data.source = "files"`` run trains on, as a small JSON value compared on resume.

With ``data.names = ()`` the sets are whatever the master table lists when the run starts, and a
table path can name a file that is later replaced; the config alone does not pin them. The
fingerprint does, per served set (after ``data.names`` selection): its shape as served, its
channel names, and for its train and test records the file (size, sha256 of its ends:
``jaxlab.data_fingerprint``), the reader (layout) and stride, which records are used and
their shape. A folder (DPOT's scatter storage, The Well's files) is its file names, count and total
size (one stat per file, as opening it costs anyway) and the ends of its first and last file.
A set whose master-table ``downsample`` is not (1, 1) also records it as
``downsample_after_resize``: jaxlab once strode the stored grid before resampling, and a run
fingerprinted then has the key missing, so its resume is refused (``added
'downsample_after_resize'``) rather than continued on other grid points; sets without a
downsample fingerprint as before.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

from jaxlab.pde.data.files.dpot import DPOTScatter
from jaxlab.pde.data.files.records import Records, Split
from jaxlab.pde.data.loader import PDEDataset
from jaxlab.data_fingerprint import file_digest

PART_NAMES = ("train", "test")  # open_set's two parts of a Split, in order


def _folder_digest(folder: str, paths: Sequence[str]) -> dict[str, Any]:
  """A folder of record files: their count, names and total size, and the ends of the first and last."""
  h = hashlib.sha256("\n".join(os.path.relpath(p, folder) for p in paths).encode())
  for path in dict.fromkeys((paths[0], paths[-1])) if paths else ():
    h.update(file_digest(path)["sha256_ends"].encode())
  return {"files": len(paths), "size": sum(os.path.getsize(p) for p in paths),
          "sha256_ends": h.hexdigest()}


def _digest(records: Records) -> dict[str, Any]:
  if isinstance(records, DPOTScatter):
    return _folder_digest(records.source, [records.path(i) for i in range(records.shape[0])])
  if os.path.isdir(records.source):  # The Well's folder of files
    return _folder_digest(records.source, getattr(records, "files", ()))
  return file_digest(records.source)


def _part(records: Records, first: int, count: int, digests: dict[str, dict[str, Any]]) -> dict[str, Any]:
  key = os.path.realpath(records.source)
  if key not in digests:  # train and test records often share one file: read its ends once
    digests[key] = _digest(records)
  return {"file": digests[key], "format": type(records).__name__, "stride": list(records.stride),
          "records": [int(first), int(count)], "shape": [int(s) for s in records.shape]}


def data_fingerprint(datasets: Sequence[PDEDataset]) -> dict[str, Any]:
  """The fingerprint of the sets a files run serves (see the module docstring).

  Args:
    datasets: the opened sets (``FileSet.dataset`` of :func:`~jaxlab.pde.data.files.file_sets`), in
      served order.

  Returns:
    ``{"sets": {name: {...}}, "sets_in_order": [names]}`` of JSON values.
  """
  digests: dict[str, dict[str, Any]] = {}
  sets = {}
  for ds in datasets:
    split: Split = ds.trajectories
    names = PART_NAMES if len(split.parts) == len(PART_NAMES) else [f"part{i}" for i in range(len(split.parts))]
    sets[ds.name] = {"shape": [int(s) for s in split.shape], "channels": list(ds.channel_names),
                     **{n: _part(r, first, count, digests) for n, (r, first, count) in zip(names, split.parts)}}
    if tuple(ds.downsample) != (1, 1):  # strided after the resize to data.resolution (DPOT's order)
      sets[ds.name]["downsample_after_resize"] = [int(k) for k in ds.downsample]
  return {"sets": sets, "sets_in_order": [ds.name for ds in datasets]}
