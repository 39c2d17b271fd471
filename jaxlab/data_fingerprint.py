"""A cheap fingerprint of the user's data files, kept in the workdir so a resume on other data is refused.

A task that reads user files puts ``{FINGERPRINT_FILE: fingerprint_text(...)}`` into its
``Task.workdir_files``; the trainer writes it at run start and a resumed run must derive the same
text (``jaxlab.train.workdir_files``), which names the first differing key otherwise. Files are
told apart by their size and a hash of their ends, not by their modification time (a copy gets a
new one): reading 2 MiB of a multi-GB file is cheap; a change confined to the middle of a file
larger than that, same size, is not seen.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

#: The fingerprint's file name in the run's workdir.
FINGERPRINT_FILE = "data_fingerprint.json"
END_BYTES = 1 << 20  # hashed at each end of a file (a smaller file is hashed whole)


def file_digest(path: str) -> dict[str, Any]:
  """``path``'s size and the sha256 of its first and last :data:`END_BYTES` (all of it when smaller).

  Args:
    path: a regular file (a symlink is followed).

  Returns:
    ``{"size": ..., "sha256_ends": ...}``: what the file is, not where it lies (a copy of the data
    elsewhere resumes; other data under the same name does not).
  """
  size = os.path.getsize(path)
  h = hashlib.sha256(str(size).encode())
  with open(path, "rb") as f:
    if size <= 2 * END_BYTES:
      h.update(f.read())
    else:
      h.update(f.read(END_BYTES))
      f.seek(size - END_BYTES)
      h.update(f.read(END_BYTES))
  return {"size": size, "sha256_ends": h.hexdigest()}


def file_sha256(path: str) -> str:
  """The sha256 of the whole file (for small files such as a captions table)."""
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def fingerprint_text(fingerprint: Any) -> str:
  """``fingerprint`` (JSON values) as deterministic text: sorted keys, one key per line."""
  return json.dumps(fingerprint, sort_keys=True, indent=1) + "\n"
