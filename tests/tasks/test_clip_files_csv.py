"""The clip_files task on a CSV made for open_clip: the guide's command, run as written, trains on it."""

import json
import math

from tests.support.clip_data import write_open_clip_csv
from tests.support.guide_blocks import guide_block

def guide_open_clip_block() -> str:
  """The guide's bash block that trains on open_clip's CSV (``data.csv_format=open_clip``)."""
  return guide_block("ot_clip.md", "csv_format=open_clip")


def test_the_guides_command_trains_on_open_clips_default_csv_from_the_launch_folder(cli, tmp_path):
  write_open_clip_csv(tmp_path, num_images=40)  # filepath<TAB>title<TAB>url, paths relative to tmp_path
  p = cli.bash(guide_open_clip_block(), cwd=tmp_path)
  assert p.returncode == 0, p.stderr[-3000:]
  assert "32 train / 8 test image-caption pairs from ./train.csv, 0 classes" in p.stdout, p.stdout[-3000:]
  assert "columns ignored: url" in p.stdout
  workdir = tmp_path / "runs" / "clip_csv"
  rows = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [2, 4, 6, 8]
  for key in ("loss", "i2t_recall_at_1", "t2i_recall_at_1"):
    assert math.isfinite(rows[-1][key]), (key, rows[-1])
  assert "zero_shot_accuracy" not in rows[-1]  # no label column: retrieval only
  fingerprint = json.loads((workdir / "data_fingerprint.json").read_text())
  assert fingerprint["pairs"] == 40 and fingerprint["images"]["count"] == 40
