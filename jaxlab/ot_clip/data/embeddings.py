"""Precomputed paired embeddings: a folder of .npy files, an .npz file or a Parquet file.

Row i of ``image`` is paired with row i of ``text`` (e.g. outputs of frozen encoders, to train
projection towers on). Optional ``label`` (class ids or names, for zero-shot evaluation) and
``split`` (``train`` / ``test``). Layouts:

* a folder holding ``image.npy`` and ``text.npy`` [N, D] (and ``label.npy`` / ``split.npy``
  [N]); they are memory-mapped, so rows are read from disk as batches need them;
* an ``.npz`` file with arrays ``image``, ``text`` (``label``, ``split``);
* a ``.parquet`` file with list-of-float columns ``image``, ``text`` (``label``, ``split``).

Shapes, dtypes, names and row counts are checked when the file is opened, and a file that is
cut short or holds Python objects (an object array, which would need pickle) is one line naming
it; values are checked
row by row as rows are read (``check_finite_rows``): a NaN or inf row is an ``InputError`` naming
its index, never skipped.
"""

from __future__ import annotations

import dataclasses
import math
import os
import zipfile
import zlib
from typing import Any

import numpy as np

from jaxlab.errors import InputError
from jaxlab.ot_clip.data.captions import SPLIT_NAMES
from jaxlab.registry import optional_imports

EMBEDDING_COLUMNS = ("image", "text")
COLUMNS = EMBEDDING_COLUMNS + ("label", "split")
FORMATS = ("a folder of image.npy + text.npy", ".npz", ".parquet")


@dataclasses.dataclass(frozen=True)
class EmbeddingTable:
  """Paired embeddings, checked for shapes and row counts.

  Attributes:
    file: the folder or file they came from.
    image: [N, D_image] floating (memory-mapped for a folder of .npy files).
    text: [N, D_text] floating.
    labels: [N] class ids or names, or None.
    splits: [N] split names (``train`` / ``test``), or None.
  """
  file: str
  image: np.ndarray
  text: np.ndarray
  labels: np.ndarray | None
  splits: np.ndarray | None

  def __len__(self) -> int:
    return self.image.shape[0]


def read_embeddings(path: str, key: str = "data.embeddings") -> EmbeddingTable:
  """Opens and checks paired embeddings (layouts in the module docstring).

  Args:
    path: the folder, ``.npz`` or ``.parquet`` file.
    key: the config key ``path`` came from, for messages.

  Raises:
    InputError: one line naming the file, the bad value and what is allowed.
  """
  ext = os.path.splitext(path)[1].lower()
  if os.path.isdir(path):
    arrays = _read_npy_folder(path)
  elif not os.path.exists(path):
    raise InputError(f"{key}: {path!r} does not exist; allowed: {', '.join(FORMATS)}")
  elif ext == ".npz":
    arrays = _read_npz(path)
  elif ext == ".parquet":
    arrays = _read_parquet(path)
  else:
    raise InputError(f"{key}: {path!r} has extension {ext!r}; allowed: {', '.join(FORMATS)}")
  return _check(path, arrays)


def check_finite_rows(table: EmbeddingTable, rows: np.ndarray, column: str, values: np.ndarray) -> None:
  """InputError naming the first row of ``rows`` whose ``values`` (read from ``column``) are not finite."""
  bad = ~np.all(np.isfinite(values.reshape(len(values), -1)), axis=1)
  if bad.any():
    raise InputError(f"{table.file}: {column} row {int(rows[np.flatnonzero(bad)[0]])} has a NaN or inf entry; "
                     "allowed: finite embeddings")


def _unknown(path: str, names: list[str], what: str) -> None:
  unknown = [n for n in names if n not in COLUMNS]
  if unknown:
    raise InputError(f"{path}: unknown {what} {unknown[0]!r}; allowed: {', '.join(COLUMNS)}")


def _read_npy_folder(path: str) -> dict[str, np.ndarray]:
  names = sorted(f[:-4] for f in os.listdir(path) if f.endswith(".npy"))
  _unknown(path, names, ".npy file")
  return {n: _read_npy(os.path.join(path, n + ".npy")) for n in names}


_OBJECTS = ("holds Python objects (dtype object), which numpy reads only with allow_pickle, and a pickle can run "
            "code when loaded; allowed: numeric arrays, labels as integers or strings (np.asarray(labels, str))")


def _read_npy(file: str) -> np.ndarray:
  """One .npy file, memory-mapped; a damaged, cut short or object array is one line naming the file."""
  try:
    return np.load(file, mmap_mode="r", allow_pickle=False)
  except (OSError, ValueError, EOFError) as e:
    raise InputError(f"{file}: {_npy_problem(file, e)}") from None


def _npy_problem(file: str, error: Exception) -> str:
  """What is wrong with a .npy file numpy would not open, from its header where it can be read."""
  readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
  try:
    with open(file, "rb") as f:
      version = np.lib.format.read_magic(f)
      shape, _, dtype = readers[version](f)
      offset = f.tell()
  except (OSError, ValueError, EOFError, KeyError):
    return f"not a complete .npy file ({error}); allowed: a file np.save wrote whole"
  if dtype.hasobject:
    return _OBJECTS
  needed, size = offset + math.prod(shape) * dtype.itemsize, os.path.getsize(file)
  if size < needed:
    return (f"cut short: its header says shape {shape} {dtype} ({needed} bytes with the header), the file has "
            f"{size} bytes; allowed: a complete .npy file (copy it again)")
  return f"cannot be read as a .npy file ({error})"


def _read_npz(path: str) -> dict[str, np.ndarray]:
  try:
    z = np.load(path, allow_pickle=False)
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    raise InputError(f"{path}: not a complete .npz file ({e}; an .npz file is a zip archive, and one cut short loses "
                     "its directory at the end); allowed: a file np.savez wrote whole") from None
  with z:
    _unknown(path, list(z.files), "array")
    arrays = {}
    for name in z.files:
      try:
        arrays[name] = z[name]
      except ValueError as e:
        if "allow_pickle" in str(e):
          raise InputError(f"{path}: array {name!r} {_OBJECTS}") from None
        raise InputError(f"{path}: array {name!r} cannot be read ({e}); allowed: a file np.savez wrote whole") from None
      except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise InputError(f"{path}: array {name!r} cannot be read ({e}); allowed: a file np.savez wrote whole") from None
    return arrays


def _read_parquet(path: str) -> dict[str, np.ndarray]:
  with optional_imports(f"reading the Parquet file {path}"):
    import pyarrow.parquet as pq  # only for Parquet input
  try:
    table = pq.read_table(path)
  except (OSError, ValueError) as e:
    raise InputError(f"{path}: cannot be read as a Parquet file ({e})") from None
  _unknown(path, table.column_names, "column")
  out = {}
  for name in table.column_names:
    column = table.column(name).combine_chunks()
    out[name] = _list_column(path, name, column) if name in EMBEDDING_COLUMNS else column.to_numpy(zero_copy_only=False)
  return out


def _list_column(path: str, name: str, column: Any) -> np.ndarray:
  """A Parquet list<float> column -> [N, D]; every row must have the same length D."""
  with optional_imports(f"reading the Parquet file {path}"):
    import pyarrow as pa
  if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
          or pa.types.is_fixed_size_list(column.type)):
    raise InputError(f"{path}: column {name!r} has type {column.type}; allowed: a list of floats per row")
  if column.null_count:
    raise InputError(f"{path}: column {name!r} row {int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])} "
                     "is null; allowed: a list of floats in every row")
  lengths = np.asarray(column.value_lengths()) if not pa.types.is_fixed_size_list(column.type) else None
  if lengths is not None and len(lengths) and np.any(lengths != lengths[0]):
    bad = int(np.flatnonzero(lengths != lengths[0])[0])
    raise InputError(f"{path}: column {name!r} row {bad} has {int(lengths[bad])} values, row 0 has "
                     f"{int(lengths[0])}; allowed: the same length in every row")
  values = column.flatten().to_numpy(zero_copy_only=False)
  return values.reshape(len(column), -1) if len(column) else values.reshape(0, 0)


def _check(path: str, arrays: dict[str, np.ndarray]) -> EmbeddingTable:
  for name in EMBEDDING_COLUMNS:
    if name not in arrays:
      raise InputError(f"{path}: no {name!r} embeddings (has: {', '.join(sorted(arrays)) or 'nothing'}); required: "
                       f"{', '.join(EMBEDDING_COLUMNS)}")
    a = arrays[name]
    if a.ndim != 2 or min(a.shape) < 1:
      raise InputError(f"{path}: {name} embeddings have shape {a.shape}; allowed: [rows, dim] with rows, dim >= 1")
    if not np.issubdtype(a.dtype, np.floating):
      raise InputError(f"{path}: {name} embeddings have dtype {a.dtype}; allowed: a floating dtype")
  for name in ("label", "split"):
    if name in arrays and arrays[name].ndim != 1:
      raise InputError(f"{path}: {name} has shape {arrays[name].shape}; allowed: one value per row, [rows]")
  counts = {name: a.shape[0] for name, a in arrays.items()}
  if len(set(counts.values())) > 1:
    shown = ", ".join(f"{name} has {n}" for name, n in counts.items())
    raise InputError(f"{path}: row counts differ ({shown}); allowed: the same number of rows in every one of "
                     f"{', '.join(counts)}")
  splits = arrays.get("split")
  if splits is not None:
    splits = splits.astype(str)
    bad = np.flatnonzero(~np.isin(splits, SPLIT_NAMES))
    if bad.size:
      raise InputError(f"{path}: split row {int(bad[0])} is {splits[bad[0]]!r}; allowed: {', '.join(SPLIT_NAMES)}")
  labels = arrays.get("label")
  if labels is not None and not (np.issubdtype(labels.dtype, np.integer) or labels.dtype.kind in "UO"):
    raise InputError(f"{path}: labels have dtype {labels.dtype}; allowed: integer class ids or class names")
  if labels is not None and labels.dtype.kind == "O":  # Parquet strings; a null is not a class name
    bad = [i for i, v in enumerate(labels) if not isinstance(v, str) or not v]
    if bad:
      raise InputError(f"{path}: label row {bad[0]} is {labels[bad[0]]!r}; allowed: a class id or a non-empty name in "
                       "every row")
    labels = labels.astype(str)
  return EmbeddingTable(file=path, image=arrays["image"], text=arrays["text"], labels=labels, splits=splits)
