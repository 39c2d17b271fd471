"""Files a task derives from its data, written into the run's workdir (``Task.workdir_files``).

A new run writes them (process 0). A resumed run must find the same text: a tokenizer trained
on the captions at run start, say, comes out different when the captions file changed, and the
checkpoint's embedding rows would then silently belong to other words. So a resumed run whose
file differs is refused (a missing one is written again); for a JSON file, such as the data
fingerprint (``jaxlab.data_fingerprint``), the message names the first key that differs.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import jax

from jaxlab.errors import InputError

SHOWN = 3  # added / removed keys named in a message; the count covers the rest


def write_workdir_files(workdir: str, files: Mapping[str, str], resuming: bool) -> None:
  """Writes ``files`` (``{name: text}``) into ``workdir``; on resume, checks them instead.

  Args:
    workdir: the run's directory (exists and is writable).
    files: plain file names (no directories) and their text.
    resuming: the workdir holds a checkpoint this run continues.

  Raises:
    InputError: a name with a directory part, or (resuming) a file whose text differs.
  """
  for name, text in files.items():
    if not name or os.path.basename(name) != name or name in (".", ".."):
      raise InputError(f"Task.workdir_files name {name!r}; allowed: a plain file name")
    path = os.path.join(workdir, name)
    if resuming and os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        saved = f.read()
      if saved != text:
        difference = _json_difference(saved, text)
        raise InputError(f"{path} differs from the {name} this run derives from its data now"
                         + (f" ({difference})" if difference else "") + ": the data changed since "
                         "the run started (resuming would mix the two); restore the data or use a new --workdir")
      continue
    if jax.process_index() == 0:
      tmp = f"{path}.tmp"
      with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
      os.replace(tmp, path)  # atomic: a reader never sees half a file


def _json_difference(saved: str, now: str) -> str | None:
  """The first difference of two JSON texts, e.g. ``sets: added 'dr'``; None when either is not JSON."""
  try:
    return _first_difference(json.loads(saved), json.loads(now), "")
  except ValueError:
    return None


def _first_difference(old: Any, new: Any, where: str) -> str | None:
  """Where two JSON values first differ (keys in sorted order), and how; None when equal."""
  at = where or "top level"
  if isinstance(old, dict) and isinstance(new, dict):
    for verb, keys in (("added", new.keys() - old.keys()), ("removed", old.keys() - new.keys())):
      if keys:
        more = f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else ""
        return f"{at}: {verb} {', '.join(map(repr, sorted(keys)[:SHOWN]))}{more}"
    for key in sorted(old):
      found = _first_difference(old[key], new[key], f"{where}[{key!r}]" if where else key)
      if found:
        return found
    return None
  if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
    return next((d for i, (a, b) in enumerate(zip(old, new)) if (d := _first_difference(a, b, f"{at}[{i}]"))), None)
  return None if old == new else f"{at}: {_short(old)} -> {_short(new)}"


def _short(value: Any, limit: int = 80) -> str:
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."
