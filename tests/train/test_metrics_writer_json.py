"""metrics.jsonl is strict JSON (NaN / inf as null) and reads back as NaN; TensorBoard: a series per run."""

from __future__ import annotations

import glob
import json
import math
import os
import struct

import numpy as np
import pytest

from jaxlab.train.metrics_writer import MetricsWriter, read_metrics, tensorboard_scalars


def strict_rows(path):
  def refuse(token):
    pytest.fail(f"non-strict JSON token {token} in {path}")
  return [json.loads(line, parse_constant=refuse) for line in open(path)]


def tensorboard_tags(workdir):
  """Every scalar tag in the workdir's event files (TFRecord framing: length, crc, data, crc)."""
  from tensorboardX.proto import event_pb2
  tags = set()
  for path in glob.glob(os.path.join(workdir, "tensorboard", "events.*")):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
      (n,) = struct.unpack("<Q", data[i:i + 8])
      event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
      tags |= {v.tag for v in event.summary.value}
      i += 12 + n + 4
  return tags


def test_non_finite_values_are_null_and_read_back_as_nan(tmp_path):
  w = MetricsWriter(str(tmp_path))
  w.write(5, {"loss": np.array([0.5, np.nan, np.inf], np.float32), "eval_return": float("nan"),
              "nonfinite_skipped": np.array([0, 1, 2])})
  w.write(10, {"loss": np.array([0.25, 0.5, -np.inf], np.float32), "eval_return": 1.5,
               "nonfinite_skipped": np.array([0, 1, 2])})
  w.close()
  raw = strict_rows(tmp_path / "metrics.jsonl")
  assert raw[0]["loss"] == [0.5, None, None] and raw[0]["eval_return"] is None
  assert raw[1]["loss"] == [0.25, 0.5, None]
  rows = read_metrics(str(tmp_path))
  assert rows[0]["loss"][0] == 0.5 and math.isnan(rows[0]["loss"][1]) and math.isnan(rows[0]["eval_return"])
  # A resumed run's summary comes from last_row: NaN again, not None.
  resumed = MetricsWriter(str(tmp_path), resume_step=5, tensorboard=False)
  assert math.isnan(resumed.last_row(require="loss")["loss"][2])
  assert [r["step"] for r in strict_rows(tmp_path / "metrics.jsonl")] == [5]
  # One series per run, non-finite points left out (run 2's loss never finite); a scalar keeps its name.
  assert tensorboard_tags(str(tmp_path)) == {"run_0/loss", "run_1/loss", "eval_return",
                                             "run_0/nonfinite_skipped", "run_1/nonfinite_skipped",
                                             "run_2/nonfinite_skipped"}


def test_tensorboard_points_per_run():
  points = tensorboard_scalars({"step": 3, "loss": [1.0, float("nan")], "lr": 0.1, "name": "x"})
  assert points == [("run_0/loss", 1.0), ("lr", 0.1)]


def test_old_files_with_bare_nan_are_read_and_rewritten_strict(tmp_path):
  (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": NaN}\n{"step": 2, "loss": [Infinity, 1.0]}\n')
  assert math.isnan(read_metrics(str(tmp_path))[0]["loss"])
  MetricsWriter(str(tmp_path), resume_step=2, tensorboard=False)  # a resume rewrites the kept lines
  assert strict_rows(tmp_path / "metrics.jsonl") == [{"step": 1, "loss": None}, {"step": 2, "loss": [None, 1.0]}]


def test_resume_after_a_kill_mid_row_drops_the_cut_line_and_logs_on(tmp_path):
  # A run killed while writing its row at step 15: the file ends in half a line.
  (tmp_path / "metrics.jsonl").write_text('{"step": 5, "loss": 1.0}\n{"step": 10, "loss": 0.5}\n{"step": 15, "lo')
  w = MetricsWriter(str(tmp_path), resume_step=10, tensorboard=False)  # resumed from the checkpoint at 10
  assert w.last_row()["step"] == 10
  w.write(15, {"loss": 0.25})
  assert [r["step"] for r in strict_rows(tmp_path / "metrics.jsonl")] == [5, 10, 15]
  assert os.listdir(tmp_path) == ["metrics.jsonl"]  # no temporary file left beside it


def test_resume_rewrite_goes_through_a_replace_and_a_failure_keeps_the_history(tmp_path, monkeypatch):
  text = '{"step": 5, "loss": 1.0}\n{"step": 10, "loss": 0.5}\n'
  (tmp_path / "metrics.jsonl").write_text(text)
  replaced = []

  def killed(src, dst):  # the process dies at the moment of the rewrite
    replaced.append((os.path.dirname(src), os.path.basename(dst)))
    raise OSError("killed")

  monkeypatch.setattr(os, "replace", killed)
  with pytest.raises(OSError, match="killed"):
    MetricsWriter(str(tmp_path), resume_step=5, tensorboard=False)
  assert replaced == [(str(tmp_path), "metrics.jsonl")]  # written beside the file, then moved over it
  assert (tmp_path / "metrics.jsonl").read_text() == text  # the history is intact
  assert os.listdir(tmp_path) == ["metrics.jsonl"]
