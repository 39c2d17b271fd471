"""The clip_files task on webdataset shards: the guide's command, run as written, on TarWriter shards."""

import json
import math

from tests.support.clip_shards import write_shards
from tests.support.guide_blocks import guide_block

def guide_shards_block() -> str:
  """The guide's bash block that trains on shards."""
  return guide_block("ot_clip.md", "data.train_shards")


def test_the_guides_shards_command_trains_on_tarwriter_shards(cli, tmp_path):
  def edit(i, sample):  # one failed download, as img2dataset leaves it
    return {"__key__": sample["__key__"], "json": sample["json"]} if i == 13 else sample
  write_shards(tmp_path / "data", num_shards=4, per_shard=10, ext="mixed", edit=edit)
  workdir = tmp_path / "run"
  p = cli.bash(guide_shards_block(), env={"DATA": str(tmp_path / "data"), "WORKDIR": str(workdir)})
  assert p.returncode == 0, p.stderr[-3000:]
  assert "31 train / 8 test image-caption pairs from 4 webdataset shards" in p.stdout, p.stdout
  assert "1 samples skipped (1 no image, 0 no caption, 0 empty caption)" in p.stdout
  rows = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [2, 4, 6, 8]
  for key in ("loss", "pairs_per_sec", "i2t_recall_at_1", "t2i_recall_at_1"):
    assert math.isfinite(rows[-1][key]), (key, rows[-1])
  assert "zero_shot_accuracy" not in rows[-1]  # shards carry no labels: retrieval only
  fingerprint = json.loads((workdir / "data_fingerprint.json").read_text())
  assert [s["name"] for s in fingerprint["train_shards"]] == [f"{i:05d}.tar" for i in range(4)]
  assert fingerprint["skipped"]["train_shards"]["no image"] == 1
  assert (workdir / "tokenizer.json").is_file()
