"""Metrics to ``workdir/metrics.jsonl`` and TensorBoard event files (process 0 only)."""

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
  """Appends one JSON line per logged step; on resume, drops lines past the restored step."""

  def __init__(self, workdir: str, resume_step: int = 0, tensorboard: bool = True):
    self.active = jax.process_index() == 0
    self.path = os.path.join(workdir, "metrics.jsonl")
    self._tb = None
    if not self.active:
      return
    if os.path.exists(self.path):  # a killed run logged steps that the resumed run will redo
      with open(self.path) as f:
        kept = [line for line in f if line.strip() and json.loads(line).get("step", 0) <= resume_step]
      with open(self.path, "w") as f:
        f.writelines(kept)
    if tensorboard:
      from tensorboardX import SummaryWriter
      self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    if not self.active:
      return
    row = {"step": int(step), **{k: _to_python(v) for k, v in metrics.items()}}
    with open(self.path, "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k, v in row.items():
        if k != "step" and np.ndim(v) == 0:
          self._tb.add_scalar(k, v, step)

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()


def read_metrics(workdir: str) -> list[dict[str, Any]]:
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]
