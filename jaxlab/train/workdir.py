"""A training workdir, read back: its checkpoints, the config saved with them, its logged metrics.

``python -m jaxlab.main --workdir=DIR`` (or ``jaxlab.experiment.train``) leaves in ``DIR``:

* ``checkpoints/<step>/``: the train state and the config it was trained with, per complete step
  (orbax's layout, which only ``jaxlab.train.checkpoint`` knows);
* ``metrics.jsonl``: one strict-JSON object per logged step (``null`` for a non-finite value);
* a suite (``configs/quickstart.py``) instead keeps one such workdir per experiment, in
  sub-directories.

:class:`Workdir` is the one reader of these, for the trainer's resume check, fine-tuning,
``jaxlab.load_run`` and ``python -m jaxlab.report``; reading writes nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any

from jaxlab.errors import CheckpointError
from jaxlab.train import checkpoint

__all__ = ["Workdir", "read_metrics", "saved_config"]

METRICS_FILE = "metrics.jsonl"
CHECKPOINTS_DIR = "checkpoints"


def from_strict_json(value: Any) -> Any:
  """A value of ``metrics.jsonl`` for arithmetic: ``None`` (JSON ``null``, a non-finite value) as NaN.

  Args:
    value: a number, ``None``, or nested lists of them (one entry per run under a run axis).

  Returns:
    ``value`` with every ``None`` replaced by ``float("nan")``.
  """
  if value is None:
    return float("nan")
  if isinstance(value, list):
    return [from_strict_json(v) for v in value]
  return value


def read_rows(path: str) -> list[dict[str, Any]]:
  """The rows of a ``metrics.jsonl`` file, ``null`` as NaN; a last line cut short by a kill is skipped.

  Any other line that is not a JSON object with an integer ``"step"`` raises ``ValueError``
  naming its line number (the file is not the trainer's).
  """
  with open(path) as f:
    lines = [(n, line) for n, line in enumerate(f, start=1) if line.strip()]
  rows = []
  for i, (n, line) in enumerate(lines):
    try:
      # parse_constant: files written before the strict format hold bare NaN / Infinity tokens.
      row = json.loads(line, parse_constant=float)
    except ValueError as e:
      if i == len(lines) - 1 and not line.endswith("\n"):
        break  # the write a killed run did not finish; the resumed run logs that step again
      raise ValueError(f"line {n} is not JSON ({e})") from None
    if not isinstance(row, dict) or not _is_step(row.get("step")):
      got = f"a {type(row).__name__}" if not isinstance(row, dict) else (
          "no 'step'" if "step" not in row else f"step={row['step']!r}")
      raise ValueError(f"line {n} is not a logged step (a JSON object with an integer 'step'; it has {got})")
    rows.append({k: from_strict_json(v) for k, v in row.items()})
  return rows


def _is_step(value: Any) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


class Workdir:
  """One training workdir, read: checkpoint steps, saved configs, metrics rows, experiments in it.

  Nothing is read until asked for, and nothing is written.

  Args:
    path: the workdir (``--workdir``).
  """

  def __init__(self, path: str | os.PathLike):
    self.path = os.fspath(path)

  def __repr__(self) -> str:
    return f"Workdir({self.path!r})"

  @property
  def checkpoints(self) -> str:
    """The checkpoints directory (``<path>/checkpoints``); it may not exist."""
    return os.path.join(self.path, CHECKPOINTS_DIR)

  @property
  def metrics_path(self) -> str:
    """``metrics.jsonl`` of this workdir; it may not exist."""
    return os.path.join(self.path, METRICS_FILE)

  @property
  def has_checkpoints(self) -> bool:
    """The workdir has a checkpoints directory (complete steps in it or not)."""
    return os.path.isdir(self.checkpoints)

  @property
  def has_metrics(self) -> bool:
    """The workdir has a ``metrics.jsonl``."""
    return os.path.isfile(self.metrics_path)

  def steps(self) -> list[int]:
    """The steps of its complete checkpoints, ascending (a step orbax is still writing is left out)."""
    return checkpoint.checkpoint_steps(self.checkpoints)

  def latest_step(self) -> int | None:
    """The newest complete checkpoint's step (None: no checkpoint)."""
    steps = self.steps()
    return steps[-1] if steps else None

  def saved_config(self, step: int | None = None, *, required: bool = False) -> dict[str, Any] | None:
    """The config saved with checkpoint ``step`` as a dict (JSON: tuples come back as lists).

    Args:
      step: a checkpoint step (None: the newest).
      required: raise instead of returning None.

    Returns:
      The config, or None when there is no such checkpoint or its config is unreadable.

    Raises:
      CheckpointError: (``required``) no checkpoint, or the config of ``step`` is unreadable;
        one line naming the place and the error.
    """
    step = self.latest_step() if step is None else step
    if step is None:
      if required:
        raise CheckpointError(f"no complete checkpoint in {self.checkpoints}")
      return None
    try:
      return checkpoint.read_config(self.checkpoints, step)
    except Exception as e:  # noqa: BLE001 - any read error: None, or name the place
      if required:
        raise CheckpointError(f"the config of {self.checkpoints}/{step} is unreadable: {type(e).__name__}: {e}") from e
      return None

  def metrics(self) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` (see :func:`read_metrics`)."""
    return read_rows(self.metrics_path)

  def logged_at(self, step: int) -> dict[str, Any]:
    """The row logged at ``step``: rows of one step (a resumed run may log a step twice) merged,
    later ones winning; ``{}`` if nothing was logged there or there is no ``metrics.jsonl``."""
    merged: dict[str, Any] = {}
    if self.has_metrics:
      for row in self.metrics():
        if row.get("step") == step:
          merged.update(row)
    return merged

  def experiments(self) -> list[Workdir]:
    """The workdirs inside this one, by name: sub-directories holding ``checkpoints/`` or
    ``metrics.jsonl`` (a suite keeps one per experiment); ``[]`` for a plain workdir."""
    if not os.path.isdir(self.path):
      return []
    inner = [Workdir(os.path.join(self.path, n)) for n in sorted(os.listdir(self.path))]
    return [w for w in inner if w.has_checkpoints or w.has_metrics]


def read_metrics(workdir: str) -> list[dict[str, Any]]:
  """The rows of ``workdir/metrics.jsonl``, ``null`` (a non-finite value) read back as NaN.

  A last line cut short by a killed run is skipped; any other line that is not JSON, or is not
  an object with an integer ``"step"``, raises ``ValueError`` naming the line.

  Args:
    workdir: a training workdir.

  Returns:
    One dict per logged step (``"step"`` and the metrics; lists under a run axis).
  """
  return Workdir(workdir).metrics()


def saved_config(workdir: str, step: int | None = None) -> dict[str, Any] | None:
  """The config saved with ``workdir``'s checkpoint ``step`` (None: the newest), or None.

  None when the workdir has no checkpoint or that config is unreadable; e.g. a fine-tuning task
  checks its ``init_from.workdir`` against it before anything is built.

  Args:
    workdir: a training workdir.
    step: a checkpoint step (None: the newest).
  """
  return Workdir(workdir).saved_config(step)
