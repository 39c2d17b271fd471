"""The captions file: CSV and JSONL give the same rows; image paths resolve against its folder."""

import os

from jaxlab.ot_clip.data.captions import read_captions
from tests.support.clip_data import write_image_folder


def test_csv_and_jsonl_read_the_same_rows(tmp_path):
  csv_table = read_captions(write_image_folder(tmp_path / "csv", num_images=8, fmt="csv"))
  jsonl_table = read_captions(write_image_folder(tmp_path / "jsonl", num_images=8, fmt="jsonl"))
  assert csv_table.captions == jsonl_table.captions and csv_table.labels == jsonl_table.labels
  assert csv_table.names == jsonl_table.names == [f"img_{i:02d}.png" for i in range(8)]
  assert csv_table.captions[5] == "a green bar on black" and csv_table.labels[5] == "green"
  assert csv_table.splits is None
  assert csv_table.images[3] == os.path.join(str(tmp_path / "csv"), "img_03.png")
  assert csv_table.lines[:2] == [2, 3] and jsonl_table.lines[:2] == [1, 2]  # a CSV header is line 1
  assert csv_table.where(1).endswith("captions.csv row 1 (line 3)")


def test_split_column_and_absolute_image_paths(tmp_path):
  table = read_captions(write_image_folder(tmp_path / "a", num_images=10, split=True))
  assert table.splits == ["test" if i % 5 == 0 else "train" for i in range(10)]
  other = tmp_path / "elsewhere.csv"  # absolute image paths work from any folder
  other.write_text("caption,image\n" + "".join(f"x {i},{p}\n" for i, p in enumerate(table.images[:3])))
  moved = read_captions(str(other))
  assert moved.images == table.images[:3] and moved.captions == ["x 0", "x 1", "x 2"] and moved.labels is None


def test_quoted_captions_with_line_breaks_and_quotes_read_as_pandas_writes_them(tmp_path):
  """Strict quoting refuses a stray quote, not the quoting a CSV writer produces: a caption holding a line break,
  a comma, doubled quotes or text that names a .png (one row each, lines counted from the row's first line)."""
  import pandas as pd
  table = read_captions(write_image_folder(tmp_path, num_images=4))
  captions = ['a red "square",\non black', "two\nlines, see img_01.png", 'say ""hi""', "plain"]
  pd.DataFrame({"image": table.names, "caption": captions}).to_csv(tmp_path / "quoted.csv", index=False)
  quoted = read_captions(str(tmp_path / "quoted.csv"))
  assert quoted.captions == captions and quoted.lines == [2, 4, 6, 7]
