"""Metrics to ``workdir/metrics.jsonl`` and TensorBoard event files (process 0 only).

``metrics.jsonl`` is strict JSON: one object per logged step, a non-finite value (NaN, inf) is
written as ``null`` (a list under a run axis keeps one entry per run, so the finite entries are
the non-null ones), and ``read_metrics`` (:mod:`jaxlab.train.workdir`'s, importable from here too)
/ :meth:`MetricsWriter.last_row` give ``null`` back as NaN. TensorBoard gets one scalar series per
run (``run_3/eval_return``; a single run keeps the plain name) and no mean over runs:
``python -m jaxlab.report`` aggregates.

On resume, lines and TensorBoard events past the restored step are dropped: the resumed run
logs those steps again. The kept lines are rewritten beside the file and moved over it
(``os.replace``), so a kill during the rewrite leaves the old file, never an empty one; a last
line a killed run left half-written is dropped with them.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping

import jax
import numpy as np

from jaxlab.train.workdir import Workdir, from_strict_json, read_metrics  # noqa: F401 - read_metrics: importable here too


def _to_python(v: Any) -> Any:
  v = np.asarray(v)
  return v.item() if v.ndim == 0 else v.tolist()


def to_strict_json(value: Any) -> Any:
  """``value`` (nested lists of numbers) with NaN and +-inf as ``None`` (JSON ``null``)."""
  if isinstance(value, float) and not math.isfinite(value):
    return None
  if isinstance(value, list):
    return [to_strict_json(v) for v in value]
  return value


def _encode_row(row: Mapping[str, Any]) -> str:
  # allow_nan=False: a non-finite value that slipped through is a bug, not a silent "NaN" token.
  return json.dumps({k: to_strict_json(v) for k, v in row.items()}, allow_nan=False) + "\n"


def _replace_atomically(path: str, text: str) -> None:
  """Writes ``text`` to a temporary file beside ``path``, syncs it, and moves it over ``path``.

  ``os.replace`` within one directory is atomic: a kill at any moment leaves either the old file
  or the new one whole (the history of a run is never emptied by a crash during the rewrite).
  """
  tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
  try:
    with open(tmp, "w") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


class MetricsWriter:
  """Appends one JSON line per logged step; under a run axis a value is a list (one per run)."""

  def __init__(self, workdir: str, resume_step: int = 0, tensorboard: bool = True):
    self.active = jax.process_index() == 0
    found = Workdir(workdir)  # the one reader of what the trainer wrote
    self.path = found.metrics_path
    self._tb = None
    self._rows: list[dict[str, Any]] = []
    if not self.active:
      return
    if found.has_metrics:  # a killed run logged steps that the resumed run will redo
      self._rows = [r for r in found.metrics() if r.get("step", 0) <= resume_step]
      _replace_atomically(self.path, "".join(_encode_row(r) for r in self._rows))
    if tensorboard:
      from tensorboardX import SummaryWriter
      # purge_step: TensorBoard drops events at or after it that an earlier run wrote.
      self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=resume_step + 1 if resume_step else None)

  def last_row(self, require: str | None = None) -> dict[str, Any] | None:
    """The newest logged row (holding ``require``, if given): a rerun's summary comes from it.

    Values are as logged, non-finite ones as NaN (also for rows read back from the file).
    """
    for row in reversed(self._rows):
      if require is None or require in row:
        return row
    return None

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    """Logs ``metrics`` at ``step``: a line of ``metrics.jsonl`` and a TensorBoard point per run."""
    if not self.active:
      return
    row = {"step": int(step), **{k: _to_python(v) for k, v in metrics.items()}}
    self._rows.append(row)
    with open(self.path, "a") as f:
      f.write(_encode_row(row))
    if self._tb is not None:
      for tag, value in tensorboard_scalars(row):
        self._tb.add_scalar(tag, value, step)

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()


def tensorboard_scalars(row: Mapping[str, Any]) -> list[tuple[str, float]]:
  """The TensorBoard points of one row: ``(key, v)`` for a scalar, ``(run_<i>/key, v_i)`` per run.

  Non-finite values (e.g. no episode finished yet) are left out: nothing to plot.
  """
  points = []
  for k, v in row.items():
    a = np.asarray(v)
    if k == "step" or a.size == 0 or not np.issubdtype(a.dtype, np.number) or a.ndim > 1:
      continue
    if a.ndim == 0:
      points += [(k, float(a))] if np.isfinite(a) else []
    else:
      points += [(f"run_{i}/{k}", float(x)) for i, x in enumerate(a) if np.isfinite(x)]
  return points
