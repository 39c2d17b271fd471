"""Files a task derives from its data, written into the run's workdir (``Task.workdir_files``).

A new run writes them (process 0). A resumed run must find the same text: a tokenizer trained
on the captions at run start, say, comes out different when the captions file changed, and the
checkpoint's embedding rows would then silently belong to other words. So a resumed run whose
file differs is refused (a missing one is written again).
"""

from __future__ import annotations

import os
from typing import Mapping

import jax

from jaxlab.errors import InputError


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
        if f.read() != text:
          raise InputError(f"{path} differs from the {name} this run derives from its data now: the data changed since "
                           "the run started (resuming would mix the two); restore the data or use a new --workdir")
      continue
    if jax.process_index() == 0:
      tmp = f"{path}.tmp"
      with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
      os.replace(tmp, path)  # atomic: a reader never sees half a file
