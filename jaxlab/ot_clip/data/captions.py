"""A captions file (CSV or JSONL) naming the images of a folder: one image-caption pair per row.

A JSONL file has one JSON object per line with keys ``image`` (a path relative to the captions
file's folder, or absolute) and ``caption``, both required, and optionally ``label`` (a class
name, for zero-shot evaluation) and ``split`` (``train`` / ``test``); any other key is refused (a
misspelt one would silently drop a column). A CSV file has a header row; its separator, the
columns that hold the image path, caption, label and split, and what a relative image path is
relative to are its :class:`~jaxlab.ot_clip.data.csv_layout.CsvLayout` (``data.csv_format``:
jaxlab's layout, the same columns comma-separated with paths relative to the file, or
open_clip's, tab-separated ``filepath`` and ``title`` with paths as written, relative to the
current directory); columns the layout does not name are ignored, as open_clip's pandas reader
does.
Every check happens here, before any image is decoded: a missing file, a file that is not UTF-8
(its line and byte offset), a missing or repeated column (a repeated one would silently take the
later column's values), an empty value, a bad split name, and rows whose image file does not
exist (one line with their count, the first few and how their paths were resolved). A CSV
file's quoting is read strictly: a quote that opens a field and is never closed (which would
swallow the rest of the file into one caption), a closed quote followed by more text, a quoted
field holding lines that read as rows of the file (a stray quote closed by a later row's), and a
field longer than the csv module's limit (131072 characters) are each one line naming the file
and line. No row is ever skipped.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import os

from jaxlab.errors import InputError
from jaxlab.ot_clip.data.csv_layout import KEYS, ROLES, CsvLayout

REQUIRED_COLUMNS = ("image", "caption")
OPTIONAL_COLUMNS = ("label", "split")
COLUMNS = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
SPLIT_NAMES = ("train", "test")
FORMATS = (".csv", ".tsv", ".jsonl")
SHOWN_MISSING = 3  # missing images named in the message; the count covers all of them
_OTHER_SEPARATORS = ("\t", ",", ";", "|")


@dataclasses.dataclass(frozen=True)
class CaptionTable:
  """The rows of a captions file.

  Attributes:
    file: the captions file.
    images: each row's image path, resolved (see ``base``).
    names: each row's image path as the file writes it (for messages).
    captions: each row's caption.
    labels: each row's class name, or None without a label column.
    splits: each row's split name (``train`` / ``test``), or None without a split column.
    lines: each row's line in the file (1-based; a CSV header is line 1), for messages.
    base: the folder relative image paths were resolved against (the captions file's, or the
      current directory under open_clip's layout).
    ignored: the CSV columns no ``data.csv_*`` key names, which were not read.
  """
  file: str
  images: list[str]
  names: list[str]
  captions: list[str]
  labels: list[str] | None
  splits: list[str] | None
  lines: list[int]
  base: str = ""
  ignored: tuple[str, ...] = ()

  def where(self, row: int) -> str:
    """``"<file> row i (line n)"``, for messages about one row."""
    return f"{self.file} row {row} (line {self.lines[row]})"


def read_captions(path: str, key: str = "data.captions", layout: CsvLayout | None = None) -> CaptionTable:
  """Reads and checks a captions file.

  Args:
    path: the CSV (``.csv``, or ``.tsv``) or JSONL (``.jsonl``) file.
    key: the config key ``path`` came from, for messages.
    layout: a CSV file's layout (``csv_layout(config.data)``); None: jaxlab's (comma-separated
      ``image``, ``caption`` [, ``label``, ``split``], paths relative to the file). A JSONL file
      takes jaxlab's layout only.

  Returns:
    The checked :class:`CaptionTable`; every image it names exists.

  Raises:
    InputError: one line naming the file, the bad value and what is allowed.
  """
  layout = layout or CsvLayout()
  if not os.path.isfile(path):
    raise InputError(f"{key}: captions file {path!r} does not exist; allowed: a CSV or JSONL file with columns "
                     f"{', '.join(REQUIRED_COLUMNS)} [, {', '.join(OPTIONAL_COLUMNS)}]")
  ext = os.path.splitext(path)[1].lower()
  if ext not in FORMATS:
    raise InputError(f"{key}: captions file {path!r} has extension {ext!r}; allowed: {', '.join(FORMATS)}")
  if ext != ".jsonl":
    rows, lines, columns, ignored = _read_csv(path, layout)
  else:
    if not layout.is_default():
      raise InputError(f"{key}: {path!r} is a JSONL file, but the data.csv_* keys are set ({_set_keys(layout)}); "
                       "allowed: those keys for a .csv file only (a JSONL file's keys are "
                       f"{', '.join(COLUMNS)})")
    rows, lines, columns = _read_jsonl(path)
    ignored = ()
  if not rows:
    raise InputError(f"{path}: no rows; allowed: at least one image-caption pair")
  for i, (row, line) in enumerate(zip(rows, lines)):
    for role, column in columns.items():
      value = row.get(role)
      if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path} row {i} (line {line}): {column}={value!r}; allowed: a non-empty "
                         f"{'string' if role != 'label' else 'class name'}")
    if "split" in columns and row["split"] not in SPLIT_NAMES:
      raise InputError(f"{path} row {i} (line {line}): {columns['split']}={row['split']!r}; allowed: "
                       f"{', '.join(SPLIT_NAMES)}")
  # open_clip opens a path as written, i.e. relative to the current directory (read once, here).
  base = os.path.dirname(os.path.abspath(path)) if layout.paths == "file" else os.getcwd()
  names = [row["image"] for row in rows]
  images = [os.path.join(base, name) for name in names]
  _check_images_exist(path, base, layout.paths, names, images, lines)
  return CaptionTable(file=path, images=images, names=names, captions=[row["caption"] for row in rows],
                      labels=[row["label"] for row in rows] if "label" in columns else None,
                      splits=[row["split"] for row in rows] if "split" in columns else None, lines=lines,
                      base=base, ignored=ignored)


def _set_keys(layout: CsvLayout) -> str:
  """The ``data.csv_*`` keys the config sets, as ``key=value`` (for a message)."""
  found = [f"data.csv_format={layout.format!r}"] if layout.format else []
  if layout.separator:
    found.append(f"data.csv_separator={layout.separator!r}")
  found += [f"{KEYS[role]}={layout.columns[role]!r}" for role in ROLES if role in layout.named]
  return ", ".join(found)


def _shown(columns: list[str]) -> str:
  """Header names for a message; a name holding a tab (a wrong separator) is quoted so it can be seen."""
  return ", ".join(c if c.isprintable() else repr(c) for c in columns) or "none"


def _read_text(path: str) -> str:
  """The file as UTF-8 text (without a leading byte-order mark); InputError naming the line and byte offset of the first bad byte."""
  with open(path, "rb") as f:
    data = f.read()
  try:
    return data.decode("utf-8").removeprefix("\ufeff")  # the byte-order mark spreadsheets write
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    raise InputError(f"{path} line {line} (byte offset {e.start}): byte {data[e.start:e.start + 1]!r} is not "
                     f"UTF-8 ({e.reason}); allowed: a UTF-8 text file (re-save it as UTF-8)") from None


def _read_csv(path: str, layout: CsvLayout) -> tuple[list[dict], list[int], dict[str, str], tuple[str, ...]]:
  """Rows as ``{role: value}``, their lines, ``{role: column}`` of the roles present, the ignored columns.

  The csv module reads in strict mode, so a quote that opens a field and is never closed, or is
  closed and followed by more text (``"a" b``), is an InputError naming the line, not the rest of
  the file read as one field; a quoted field that closes on a later line but holds lines that read
  as rows of this file (a stray quote closed by another row's) is refused as well.
  """
  with io.StringIO(_read_text(path), newline="") as f:
    separator = layout.field_separator(path)
    reader = csv.reader(f, delimiter=separator, strict=True)
    header = _next_row(reader, path)
    if header is None:
      raise InputError(f"{path}: empty file; allowed: a header row ({', '.join(layout.columns[r] for r in ROLES)}) "
                       "and one row per pair")
    header = [c.strip() for c in header]
    index = _column_index(path, header, layout, separator)
    ignored = tuple(c for c in header if c not in {header[i] for i in index.values()})
    rows, lines = [], []
    while True:
      start = reader.line_num + 1
      fields = _next_row(reader, path)
      if fields is None:
        break
      if not fields:
        continue  # a blank line, as csv.DictReader and pandas skip it
      if len(fields) > len(header):
        raise InputError(f"{path} line {reader.line_num}: {len(fields)} fields for {len(header)} columns "
                         f"({_shown(header)})")
      if reader.line_num > start:
        _check_multiline(path, fields, separator, index.get("image"), start, reader.line_num)
      rows.append({role: fields[i] if i < len(fields) else None for role, i in index.items()})
      lines.append(start)
  return rows, lines, {role: header[i] for role, i in index.items()}, ignored


#: The image extensions a row-like line inside a quoted field is recognised by.
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".ppm", ".pgm")


def _next_row(reader, path: str) -> list[str] | None:
  """The reader's next row (None at the end); the csv module's errors as one line naming the file and line."""
  start = reader.line_num + 1
  try:
    return next(reader)
  except StopIteration:
    return None
  except csv.Error as e:
    text = str(e)
    if text == "unexpected end of data":
      why = (f"a quoted field opened on line {start} is not closed before the end of the file (line "
             f"{reader.line_num}), so the rest of the file would read as one field; allowed: a quote that opens a "
             'field closed by another, a quote inside a quoted field written twice ("")')
    elif text.startswith("field larger than field limit"):
      why = (f"a field longer than {csv.field_size_limit()} characters (the csv module's limit; usually a quote "
             "that was never closed); allowed: fields of at most that length")
    else:  # a quote closed and followed by more text, e.g. "a" b
      why = f"{text} (csv quoting); allowed: a quoted field that ends at its closing quote"
    raise InputError(f"{path} line {start}: {why}") from None


def _check_multiline(path: str, fields: list[str], separator: str, image: int | None,
                     start: int, end: int) -> None:
  """A quoted field spanning lines may hold a line break; lines in it that read as rows of the file were swallowed."""
  for field in fields:
    for offset, text in enumerate(field.split("\n")[1:], start=1):
      parts = text.rstrip("\r").split(separator)
      # the last line is cut where the quote closes: an image path and one separator are enough
      if image is not None and 2 <= len(parts) and image < len(parts) and \
          parts[image].strip().lower().endswith(_IMAGE_SUFFIXES):
        raise InputError(f"{path} line {start}: a quoted field runs from line {start} to line {end} and holds line "
                         f"{start + offset} ({text.strip()[:60]!r}), which reads as a row of this file: a stray quote "
                         "swallowed the rows between into one caption; allowed: a quote inside a quoted field written "
                         'twice (""), line breaks only inside a caption')


def _column_index(path: str, header: list[str], layout: CsvLayout, separator: str) -> dict[str, int]:
  """``{role: header index}`` of the roles the file has; a required one missing or any used one repeated is an
  InputError naming the config key it came from and the columns present."""
  index = {}
  for role in ROLES:
    column = layout.columns[role]
    found = [i for i, c in enumerate(header) if c == column]
    if len(found) > 1:
      raise InputError(f"{path}: column {column!r} appears twice in the header ({_shown(header)}); allowed: each "
                       f"column once (it is the {role} column, {layout.source(role)})")
    if found:
      index[role] = found[0]
    elif layout.required(role):
      required = ", ".join(layout.columns[r] for r in ROLES if layout.required(r))
      raise InputError(f"{path}: no {column!r} column (columns: {_shown(header)}); required: {required}; the "
                       f"{role} column is {layout.source(role)}{_hint(header, layout, separator)}")
  return index


def _hint(header: list[str], layout: CsvLayout, separator: str) -> str:
  """A likely fix when the header reads as another layout's: another separator, or open_clip's columns."""
  if len(header) == 1:
    for other in _OTHER_SEPARATORS:
      if other != separator and other in header[0]:
        if not layout.format and other == "\t" and {"filepath", "title"} <= {c.strip() for c in header[0].split(other)}:
          return " (this is open_clip's layout: set data.csv_format='open_clip')"
        # repr spells a tab '\t', which data.csv_separator takes as written
        return f" (the header splits on {other!r}: set data.csv_separator={other!r})"
    return ""
  if not layout.format and {"filepath", "title"} <= set(header):  # open_clip's columns, this file's separator
    return f" (this is open_clip's layout: set data.csv_format='open_clip' data.csv_separator={separator!r})"
  return ""


def _read_jsonl(path: str) -> tuple[list[dict], list[int], dict[str, str]]:
  """Rows, their lines and ``{column: column}`` of the columns present (jaxlab's names only)."""
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
  unknown = [c for c in columns if c not in COLUMNS]
  if unknown:
    raise InputError(f"{path}: unknown column {unknown[0]!r}; allowed columns: {', '.join(COLUMNS)}")
  missing = [c for c in REQUIRED_COLUMNS if c not in columns]
  if missing:
    raise InputError(f"{path}: no {missing[0]!r} column (columns: {', '.join(columns) or 'none'}); required: "
                     f"{', '.join(REQUIRED_COLUMNS)}")
  return rows, lines, {c: c for c in COLUMNS if c in columns}


def _unique_keys(path: str, line_num: int, pairs: list[tuple[str, object]]) -> dict:
  """A JSON object whose keys are unique (json.loads would keep the last of a repeated key)."""
  keys = [k for k, _ in pairs]
  for i, key in enumerate(keys):
    if key in keys[:i]:
      raise InputError(f"{path} line {line_num}: key {key!r} appears twice in one object; allowed: each key once")
  return dict(pairs)


def _check_images_exist(path: str, base: str, paths: str, names: list[str], images: list[str], lines: list[int]
                        ) -> None:
  missing = [i for i, image in enumerate(images) if not os.path.isfile(image)]
  if missing:
    shown = ", ".join(f"{names[i]!r} (row {i}, line {lines[i]})" for i in missing[:SHOWN_MISSING])
    if paths == "file":
      where, allowed = "the captions file's folder", f"image files relative to {base} or absolute paths"
    else:
      where = "the current directory, as open_clip opens them (data.csv_format='open_clip')"
      allowed = "image paths relative to the directory the run is started in, or absolute paths"
    raise InputError(f"{path}: {len(missing)} of {len(images)} rows name images that do not exist, first: {shown}; "
                     f"a relative path is resolved against {where}, {base} (the first: {images[missing[0]]}); "
                     f"allowed: {allowed}")
