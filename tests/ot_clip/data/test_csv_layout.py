"""A CSV's layout (data.csv_*): open_clip's default file, named columns, extra columns, where paths start."""

import json

import pandas as pd
import pytest
from PIL import Image

from configs.clip_files import get_config
from jaxlab.errors import InputError
from jaxlab.ot_clip.data.captions import read_captions
from jaxlab.ot_clip.data.csv_layout import CsvLayout, csv_layout
from jaxlab.ot_clip.data.pairs import load_pairs
from jaxlab.data_fingerprint import FINGERPRINT_FILE
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.train.workdir_files import write_workdir_files
from tests.support.clip_data import data_config, write_image_folder, write_open_clip_csv


def test_the_layouts_defaults_and_overrides():
  assert csv_layout(data_config()) == CsvLayout()  # the shipped config: jaxlab's layout
  open_clip = csv_layout(data_config(csv_format="open_clip"))
  assert open_clip.field_separator("train.csv") == "\t" and open_clip.paths == "cwd"
  assert (open_clip.columns["image"], open_clip.columns["caption"]) == ("filepath", "title")
  assert not open_clip.required("label") and open_clip.named == frozenset()
  assert CsvLayout().field_separator("a.csv") == "," and CsvLayout().field_separator("a.TSV") == "\t"
  for spelled in ("\\t", "tab", "\t"):  # '\t' as a shell passes it, a name, a real tab
    assert csv_layout(data_config(csv_separator=spelled)).field_separator("a.csv") == "\t"
  named = csv_layout(data_config(csv_img_key=" path ", csv_label_key="class"))
  assert named.columns["image"] == "path" and named.required("label") and named.paths == "file"
  assert named.source("label") == "data.csv_label_key='class'"


def test_open_clips_default_csv_reads_its_paths_from_the_current_directory(tmp_path, monkeypatch):
  path = write_open_clip_csv(tmp_path, num_images=8)
  layout = csv_layout(data_config(csv_format="open_clip"))
  monkeypatch.chdir(tmp_path)  # where the run is launched: the CSV's paths start here
  table = read_captions("train.csv", layout=layout)
  assert table.names[3] == "images/img_03.png" and table.images[3] == str(tmp_path / "images" / "img_03.png")
  assert table.captions[5] == "a green bar on black" and table.labels is None and table.splits is None
  assert table.ignored == ("url",) and table.base == str(tmp_path)
  # Absolute paths (what open_clip users' CSVs usually hold) work from any directory.
  frame = pd.read_csv(path, sep="\t")
  frame["filepath"] = [str(tmp_path / p) for p in frame["filepath"]]
  frame.to_csv(tmp_path / "absolute.csv", sep="\t", index=False)
  monkeypatch.chdir(tmp_path / "images")
  moved = read_captions(str(tmp_path / "absolute.csv"), layout=layout)
  assert moved.images == table.images and moved.captions == table.captions
  with pytest.raises(InputError, match="resolved against the current directory"):  # relative: from here, not there
    read_captions(path, layout=layout)


def test_a_comma_separated_file_with_its_own_column_names(tmp_path):
  """Named columns (image, caption, label, split) in a pandas-written CSV (a byte-order mark first) with columns
  the keys do not name; captions holding the separator and quotes; paths relative to the file, and absolute."""
  write_image_folder(tmp_path / "photos", num_images=20)
  colours = ("red", "green", "blue", "yellow")
  frame = pd.DataFrame({
      "id": range(20),
      "path": [f"photos/img_{i:02d}.png" if i % 2 else str(tmp_path / "photos" / f"img_{i:02d}.png")
               for i in range(20)],
      "text": [f'a {colours[i % 4]} shape, "number {i}"' for i in range(20)],
      "class": [colours[i % 4] for i in range(20)],
      "subset": ["test" if i % 5 == 0 else "train" for i in range(20)],
      "url": [f"https://example.com/{i}.png" for i in range(20)]})
  frame.to_csv(tmp_path / "pairs.csv", index=False, encoding="utf-8-sig")  # with the BOM spreadsheets write
  keys = dict(csv_img_key="path", csv_caption_key="text", csv_label_key="class", csv_split_key="subset")
  table = read_captions(str(tmp_path / "pairs.csv"), layout=csv_layout(data_config(**keys)))
  assert table.captions[7] == 'a yellow shape, "number 7"' and table.labels[:2] == ["red", "green"]
  assert table.images[1] == str(tmp_path / "photos" / "img_01.png")  # relative: to the file's folder
  assert table.images[0] == str(tmp_path / "photos" / "img_00.png") and table.ignored == ("id", "url")
  pairs = load_pairs(data_config(dir=str(tmp_path), captions="pairs.csv", split="column", **keys), ("a {}",))
  assert pairs.classes == ("blue", "green", "red", "yellow")
  assert "16 train / 4 test image-caption pairs" in pairs.description and "4 classes" in pairs.description
  assert pairs.description.endswith("columns ignored: id, url")
  assert pairs.test["label"].tolist() == [2, 1, 0, 3]  # rows 0, 5, 10, 15: red, green, blue, yellow (sorted ids)


def test_a_misspelt_csv_column_is_ignored_and_named(tmp_path):
  path = write_image_folder(tmp_path, num_images=8)
  with open(path) as f:
    text = f.read()
  with open(path, "w") as f:
    f.write(text.replace("image,caption,label", "image,caption,lable", 1))
  table = read_captions(path)
  assert table.labels is None and table.ignored == ("lable",)


def test_the_data_fingerprint_covers_an_open_clip_csvs_images(tmp_path, monkeypatch):
  write_open_clip_csv(tmp_path, num_images=20)
  monkeypatch.chdir(tmp_path)
  config = get_config("tiny")
  config.data.update(dir=".", captions="train.csv", csv_format="open_clip")
  workdir = tmp_path / "run"
  workdir.mkdir()
  write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=False)
  fingerprint = json.loads((workdir / FINGERPRINT_FILE).read_text())
  assert fingerprint["pairs"] == 20 and fingerprint["images"]["count"] == 20
  Image.new("RGB", (16, 16)).save(tmp_path / "images" / "img_04.png")  # an image replaced, the CSV unchanged
  with pytest.raises(InputError, match=r"data_fingerprint.json this run derives from its data now \(images\['size'\]"):
    write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)
