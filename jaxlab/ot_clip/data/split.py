"""The train / held-out split of a pairs file: a seeded fraction, or the file's own ``split`` column.

Either way the split is a pure function of the file and the config (``data.split``,
``data.test_fraction``, ``data.split_seed``), so every process and every resumed run sees the
same one.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jaxlab.errors import InputError, is_real

MODES = ("fraction", "column")


def split_rows(num_rows: int, mode: str, test_fraction: float, seed: int, column: Sequence[str] | None,
               file: str, labels: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
  """(train rows, test rows), each sorted, together every row once.

  Args:
    num_rows: rows in the file.
    mode: ``"fraction"``: ``round(test_fraction * n)`` rows drawn by ``seed`` are held out, of
      all ``n`` rows, or with ``labels`` of each class's ``n`` rows (stratified, so that every
      class with enough rows is evaluated); the file must have no ``split`` column, which
      would otherwise go unused. ``"column"``: the file's ``split`` column says (``train`` /
      ``test``).
    test_fraction: in (0, 1), for ``"fraction"``.
    seed: the split's seed (``data.split_seed``), for ``"fraction"``.
    column: the file's split column, or None.
    file: the file, for messages.
    labels: each row's class (any comparable values), or None.

  Raises:
    InputError: an unknown mode, a missing or unused split column, a fraction outside (0, 1), or
      a split that leaves either side empty.
  """
  if mode not in MODES:
    raise InputError(f"data.split={mode!r}; allowed: {', '.join(repr(m) for m in MODES)}")
  if mode == "column":
    if column is None:
      raise InputError(f"data.split='column' but {file} has no split column; add one (train / test per row) "
                       "or set data.split='fraction'")
    values = np.asarray(column)
    train, test = np.flatnonzero(values == "train"), np.flatnonzero(values == "test")
  else:
    if column is not None:
      raise InputError(f"{file} has a split column but data.split='fraction'; set data.split='column' to use it "
                       "(or remove the column)")
    if not (is_real(test_fraction) and 0 < test_fraction < 1):
      raise InputError(f"data.test_fraction={test_fraction!r}; allowed: a number in (0, 1)")
    rng = np.random.default_rng(seed)
    if labels is None:
      groups = [np.arange(num_rows)]
    else:
      ids = np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)
      groups = [np.flatnonzero(ids == k) for k in range(int(ids.max()) + 1)]
    held = [rng.permutation(g)[:int(round(test_fraction * len(g)))] for g in groups]
    test = np.sort(np.concatenate(held)).astype(np.int64)
    train = np.setdiff1d(np.arange(num_rows), test)
  if not len(train) or not len(test):
    side = "train" if not len(train) else "test"
    raise InputError(f"{file}: the {mode} split (data.split={mode!r}, data.test_fraction={test_fraction!r}) leaves "
                     f"no {side} rows of {num_rows}; allowed: at least one row on each side")
  return train, test
