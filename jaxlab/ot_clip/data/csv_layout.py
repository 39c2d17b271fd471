"""How a CSV captions file is laid out: its separator, which columns hold what, where its image paths start.

Two formats (``data.csv_format``), each a set of defaults:

* ``""`` (jaxlab's own): comma-separated (tab-separated for a ``.tsv`` file), columns ``image``,
  ``caption`` and optionally ``label`` and ``split``; a relative image path is relative to the
  captions file's folder;
* ``"open_clip"``: what open_clip's ``CsvDataset`` reads with its defaults: tab-separated, the
  image path in ``filepath`` (``--csv-img-key``) and the caption in ``title``
  (``--csv-caption-key``); image paths are opened as written, so a relative one is relative to
  the current directory (the folder the run is launched from), as in open_clip.

An absolute image path works in either. A non-empty ``data.csv_separator``, ``data.csv_img_key``,
``data.csv_caption_key``, ``data.csv_label_key`` or ``data.csv_split_key`` (open_clip's option
names in snake case, plus jaxlab's two optional columns) replaces its format's value. The label and
split columns are used when a column of their default name (``label``, ``split``) is there, and
required when named. Columns no key names are ignored, as pandas-based readers do. The empty
defaults keep a run started before these keys existed resumable.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from jaxlab.errors import InputError

#: ``data.csv_format`` values: ``""`` (jaxlab's own layout) and ``"open_clip"``.
FORMATS = ("", "open_clip")
#: The roles of the columns, in header order of jaxlab's layout; image and caption are required.
ROLES = ("image", "caption", "label", "split")
#: Each role's config key (open_clip's ``--csv-img-key`` / ``--csv-caption-key`` in snake case).
KEYS = {"image": "data.csv_img_key", "caption": "data.csv_caption_key", "label": "data.csv_label_key",
        "split": "data.csv_split_key"}
_DEFAULTS = {
    "": {"image": "image", "caption": "caption", "paths": "file"},
    "open_clip": {"image": "filepath", "caption": "title", "paths": "cwd"},
}
_OPTIONAL = {"label": "label", "split": "split"}  # the same in both formats
_ESCAPED = {"\\t": "\t", "tab": "\t"}  # a tab as a shell passes it without $'\t'


@dataclasses.dataclass(frozen=True)
class CsvLayout:
  """A CSV captions file's layout (see the module docstring).

  Attributes:
    format: ``data.csv_format`` (``""`` or ``"open_clip"``).
    separator: the field separator ``data.csv_separator`` names, one character; ``""``: the
      format's (see :meth:`~jaxlab.ot_clip.data.csv_layout.CsvLayout.field_separator`).
    columns: ``{role: column name}`` for ``image``, ``caption``, ``label``, ``split``.
    named: the roles whose column the config names explicitly (then required); image and
      caption are always required.
    paths: ``"file"`` (relative image paths start at the captions file's folder) or ``"cwd"``
      (at the current directory: opened as written).
  """
  format: str = ""
  separator: str = ""
  columns: dict[str, str] = dataclasses.field(default_factory=lambda: {role: role for role in ROLES})
  named: frozenset[str] = frozenset()
  paths: str = "file"

  def field_separator(self, path: str) -> str:
    """The separator of the file ``path``: the one named, else a tab for open_clip's format or a ``.tsv`` file,
    else a comma."""
    if self.separator:
      return self.separator
    return "\t" if self.format == "open_clip" or path.lower().endswith(".tsv") else ","

  def required(self, role: str) -> bool:
    """Whether the file must have ``role``'s column."""
    return role in ("image", "caption") or role in self.named

  def source(self, role: str) -> str:
    """Where ``role``'s column name came from, for messages: ``"data.csv_img_key='path'"`` or its default."""
    if role in self.named:
      return f"{KEYS[role]}={self.columns[role]!r}"
    return f"{KEYS[role]} (default {self.columns[role]!r} for data.csv_format={self.format!r})"

  def is_default(self) -> bool:
    """Whether every key is at its empty default (jaxlab's layout: the only one a JSONL file has)."""
    return self == CsvLayout()


def csv_layout(data: Mapping[str, Any]) -> CsvLayout:
  """The layout the ``data.csv_*`` keys describe, checked.

  Args:
    data: the config's ``data`` block; missing ``csv_*`` keys count as empty.

  Returns:
    The :class:`CsvLayout`.

  Raises:
    InputError: one line naming the bad key, its value and what is allowed.
  """
  fmt = data.get("csv_format", "")
  if fmt not in FORMATS:
    raise InputError(f"data.csv_format={fmt!r}; allowed: '' (jaxlab's layout: comma-separated image, caption "
                     "columns, paths relative to the file) or 'open_clip' (tab-separated filepath, title columns, "
                     "paths as written)")
  defaults = _DEFAULTS[fmt]
  separator = _separator(data.get("csv_separator", ""))
  columns, named = {}, set()
  for role in ROLES:
    key = KEYS[role]
    value = data.get(key.split(".", 1)[1], "")
    if not isinstance(value, str) or (value and not value.strip()):
      raise InputError(f"{key}={value!r}; allowed: a column name of the captions file, or '' for the default")
    if value:
      named.add(role)
    columns[role] = value.strip() or defaults.get(role) or _OPTIONAL[role]
  for i, role in enumerate(ROLES):
    for other in ROLES[:i]:
      if columns[role] == columns[other]:
        raise InputError(f"{KEYS[role]} and {KEYS[other]} both name column {columns[role]!r}; allowed: a "
                         "different column for each")
  return CsvLayout(format=fmt, separator=separator, columns=columns, named=frozenset(named),
                   paths=defaults["paths"])


def _separator(value: object) -> str:
  if not isinstance(value, str):
    raise InputError(f"data.csv_separator={value!r}; allowed: one character (',', '\\t' or 'tab' for a tab, ';', "
                     "'|'), or '' for the format's")
  separator = _ESCAPED.get(value, value)
  if separator and (len(separator) != 1 or separator in "\"\r\n" or separator.isalnum()):
    raise InputError(f"data.csv_separator={value!r}; allowed: one character (',', '\\t' or 'tab' for a tab, ';', "
                     "'|'; not a quote, newline, letter or digit), or '' for the format's")
  return separator
