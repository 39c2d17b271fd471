"""A captions file (CSV or JSONL) naming the images of a folder: one image-caption pair per row.

Columns: ``image`` (a path relative to the captions file's folder, or absolute) and ``caption``,
both required; ``label`` (a class name, for zero-shot evaluation) and ``split`` (``train`` /
``test``) are optional. A CSV file has a header row; a JSONL file has one JSON object per line.
Every check happens here, before any image is decoded: a missing file, a file that is not UTF-8
(its line and byte offset), an unknown, missing or repeated column (a repeated one would
silently take the later column's values), an empty value, a bad split name, and rows whose image
file does not exist (one line with their count and the first few). No row is ever skipped.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import os

from jaxlab.errors import InputError

REQUIRED_COLUMNS = ("image", "caption")
OPTIONAL_COLUMNS = ("label", "split")
COLUMNS = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
SPLIT_NAMES = ("train", "test")
FORMATS = (".csv", ".jsonl")
SHOWN_MISSING = 3  # missing images named in the message; the count covers all of them
_EXTRA = "\0extra"  # csv.DictReader's key for fields beyond the header


@dataclasses.dataclass(frozen=True)
class CaptionTable:
  """The rows of a captions file.

  Attributes:
    file: the captions file.
    images: each row's image path, resolved against the captions file's folder.
    names: each row's image path as the file writes it (for messages).
    captions: each row's caption.
    labels: each row's class name, or None without a ``label`` column.
    splits: each row's split name (``train`` / ``test``), or None without a ``split`` column.
    lines: each row's line in the file (1-based; a CSV header is line 1), for messages.
  """
  file: str
  images: list[str]
  names: list[str]
  captions: list[str]
  labels: list[str] | None
  splits: list[str] | None
  lines: list[int]

  def where(self, row: int) -> str:
    """``"<file> row i (line n)"``, for messages about one row."""
    return f"{self.file} row {row} (line {self.lines[row]})"


def read_captions(path: str, key: str = "data.captions") -> CaptionTable:
  """Reads and checks a captions file.

  Args:
    path: the CSV (``.csv``) or JSONL (``.jsonl``) file.
    key: the config key ``path`` came from, for messages.

  Returns:
    The checked :class:`CaptionTable`; every image it names exists.

  Raises:
    InputError: one line naming the file, the bad value and what is allowed.
  """
  if not os.path.isfile(path):
    raise InputError(f"{key}: captions file {path!r} does not exist; allowed: a CSV or JSONL file with columns "
                     f"{', '.join(REQUIRED_COLUMNS)} [, {', '.join(OPTIONAL_COLUMNS)}]")
  ext = os.path.splitext(path)[1].lower()
  if ext not in FORMATS:
    raise InputError(f"{key}: captions file {path!r} has extension {ext!r}; allowed: {', '.join(FORMATS)}")
  rows, lines, columns = _read_csv(path) if ext == ".csv" else _read_jsonl(path)
  unknown = [c for c in columns if c not in COLUMNS]
  if unknown:
    raise InputError(f"{path}: unknown column {unknown[0]!r}; allowed columns: {', '.join(COLUMNS)}")
  missing = [c for c in REQUIRED_COLUMNS if c not in columns]
  if missing:
    raise InputError(f"{path}: no {missing[0]!r} column (columns: {', '.join(columns) or 'none'}); required: "
                     f"{', '.join(REQUIRED_COLUMNS)}")
  if not rows:
    raise InputError(f"{path}: no rows; allowed: at least one image-caption pair")
  for i, (row, line) in enumerate(zip(rows, lines)):
    for column in columns:
      value = row.get(column)
      if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path} row {i} (line {line}): {column}={value!r}; allowed: a non-empty "
                         f"{'string' if column != 'label' else 'class name'}")
    if "split" in columns and row["split"] not in SPLIT_NAMES:
      raise InputError(f"{path} row {i} (line {line}): split={row['split']!r}; allowed: {', '.join(SPLIT_NAMES)}")
  folder = os.path.dirname(os.path.abspath(path))
  names = [row["image"] for row in rows]
  images = [os.path.join(folder, name) for name in names]
  _check_images_exist(path, folder, names, images, lines)
  return CaptionTable(file=path, images=images, names=names, captions=[row["caption"] for row in rows],
                      labels=[row["label"] for row in rows] if "label" in columns else None,
                      splits=[row["split"] for row in rows] if "split" in columns else None, lines=lines)


def _read_text(path: str) -> str:
  """The file as UTF-8 text; InputError naming the line and byte offset of the first bad byte."""
  with open(path, "rb") as f:
    data = f.read()
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    raise InputError(f"{path} line {line} (byte offset {e.start}): byte {data[e.start:e.start + 1]!r} is not "
                     f"UTF-8 ({e.reason}); allowed: a UTF-8 text file (re-save it as UTF-8)") from None


def _check_unique_columns(path: str, columns: list[str]) -> None:
  """A repeated column would silently take the later one's values (csv.DictReader keeps the last)."""
  for i, column in enumerate(columns):
    if column in columns[:i]:
      raise InputError(f"{path}: column {column!r} appears twice in the header ({', '.join(columns)}); allowed: "
                       "each column once")


def _read_csv(path: str) -> tuple[list[dict], list[int], list[str]]:
  with io.StringIO(_read_text(path), newline="") as f:
    reader = csv.DictReader(f, restkey=_EXTRA)
    if reader.fieldnames is None:
      raise InputError(f"{path}: empty file; allowed: a header row ({', '.join(COLUMNS)}) and one row per pair")
    columns = [c.strip() for c in reader.fieldnames]
    _check_unique_columns(path, columns)
    rows, lines = [], []
    for row in reader:
      if _EXTRA in row:
        raise InputError(f"{path} line {reader.line_num}: {len(columns) + len(row[_EXTRA])} fields for "
                         f"{len(columns)} columns ({', '.join(columns)})")
      rows.append({k.strip(): v for k, v in row.items()})
      lines.append(reader.line_num)
  return rows, lines, columns


def _read_jsonl(path: str) -> tuple[list[dict], list[int], list[str]]:
  rows, lines, columns = [], [], []
  with io.StringIO(_read_text(path), newline=None) as f:  # universal newlines, as open() reads
    for line_num, text in enumerate(f, start=1):
      if not text.strip():
        continue
      try:
        row = json.loads(text, object_pairs_hook=functools.partial(_unique_keys, path, line_num))
      except json.JSONDecodeError as e:
        raise InputError(f"{path} line {line_num}: not valid JSON ({e.msg}); allowed: one JSON object per line") from None
      if not isinstance(row, dict):
        raise InputError(f"{path} line {line_num}: a JSON {type(row).__name__}; allowed: one JSON object per line")
      columns.extend(k for k in row if k not in columns)
      # A label may be a number in JSON; it is a class name all the same.
      if isinstance(row.get("label"), int) and not isinstance(row.get("label"), bool):
        row["label"] = str(row["label"])
      rows.append(row)
      lines.append(line_num)
  return rows, lines, columns


def _unique_keys(path: str, line_num: int, pairs: list[tuple[str, object]]) -> dict:
  """A JSON object whose keys are unique (json.loads would keep the last of a repeated key)."""
  keys = [k for k, _ in pairs]
  for i, key in enumerate(keys):
    if key in keys[:i]:
      raise InputError(f"{path} line {line_num}: key {key!r} appears twice in one object; allowed: each key once")
  return dict(pairs)


def _check_images_exist(path: str, folder: str, names: list[str], images: list[str], lines: list[int]) -> None:
  missing = [i for i, image in enumerate(images) if not os.path.isfile(image)]
  if missing:
    shown = ", ".join(f"{names[i]!r} (row {i}, line {lines[i]})" for i in missing[:SHOWN_MISSING])
    raise InputError(f"{path}: {len(missing)} of {len(images)} rows name images that do not exist, first: {shown}; "
                     f"allowed: image files relative to {folder} or absolute paths")
