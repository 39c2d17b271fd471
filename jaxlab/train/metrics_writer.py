"""Metrics to ``workdir/metrics.jsonl`` and TensorBoard event files (process 0 only).

On resume, lines and TensorBoard events past the restored step are dropped: the resumed run
logs those steps again.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import jax
import numpy as np


def _to_python(v: Any) -> Any:
  v = np.asarray(v)
  return v.item() if v.ndim == 0 else v.tolist()


class MetricsWriter:
  """Appends one JSON line per logged step; under a run axis a value is a list (one per run)."""

  def __init__(self, workdir: str, resume_step: int = 0, tensorboard: bool = True):
    self.active = jax.process_index() == 0
    self.path = os.path.join(workdir, "metrics.jsonl")
    self._tb = None
    self._rows: list[dict[str, Any]] = []
    if not self.active:
      return
    if os.path.exists(self.path):  # a killed run logged steps that the resumed run will redo
      with open(self.path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
      self._rows = [r for r in rows if r.get("step", 0) <= resume_step]
      with open(self.path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in self._rows)
    if tensorboard:
      from tensorboardX import SummaryWriter
      # purge_step: TensorBoard drops events at or after it that an earlier run wrote.
      self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=resume_step + 1 if resume_step else None)

  def last_row(self, require: str | None = None) -> dict[str, Any] | None:
    """The newest logged row (holding ``require``, if given): a rerun's summary comes from it."""
    for row in reversed(self._rows):
      if require is None or require in row:
        return row
    return None

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    if not self.active:
      return
    row = {"step": int(step), **{k: _to_python(v) for k, v in metrics.items()}}
    self._rows.append(row)
    with open(self.path, "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k, v in row.items():
        if k != "step" and np.size(v) > 0 and np.issubdtype(np.asarray(v).dtype, np.number):
          mean = float(np.nanmean(v)) if np.any(np.isfinite(v)) else float("nan")
          if np.isfinite(mean):  # e.g. no episode finished yet: nothing to plot
            self._tb.add_scalar(k, mean, step)  # the mean over runs

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()


def read_metrics(workdir: str) -> list[dict[str, Any]]:
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]
