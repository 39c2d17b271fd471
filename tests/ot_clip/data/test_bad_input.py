"""Bad pairs data: each case is ONE line naming the file (or key), the bad value and what is allowed."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from configs.clip_files import get_config
from jaxlab.ot_clip.data.batches import ShardedBatches
from jaxlab.ot_clip.data.images import decode_image
from jaxlab.ot_clip.data.pairs import load_pairs
from jaxlab.ot_clip.data.split import split_rows
from jaxlab.ot_clip.two_tower import ConvImageEncoder, TwoTower
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.train.workdir_files import write_workdir_files
from tests.support.bad_input import assert_one_clear_line
from tests.support.clip_data import data_config, embedding_arrays, records, write_image_folder, write_open_clip_csv


def _pairs(folder, **data):
  return lambda: load_pairs(data_config(dir=str(folder), **data), ("{}",))


def _task(folder, eval_overrides=None, **data):
  config = get_config("tiny")
  config.data.update(dir=str(folder), **data)
  config.eval.update(eval_overrides or {})
  return lambda: make_task(config, task_context(config))


def _rewrite(path, old, new):
  with open(path) as f:
    text = f.read()
  with open(path, "w") as f:
    f.write(text.replace(old, new))


def _rewrite_once(path, old, new):
  with open(path) as f:
    text = f.read()
  with open(path, "w") as f:
    f.write(text.replace(old, new, 1))
  return path


def _folder(tmp_path, edit=None, fmt="csv", split=False):
  folder = tmp_path / "pairs"
  path = write_image_folder(folder, num_images=20, fmt=fmt, split=split)
  if edit:
    edit(folder, path)
  return folder


def _open_clip(tmp_path, edit=None, **data):
  """open_clip's default CSV (``train.csv`` under ``tmp_path``, paths relative to it), edited; its load_pairs call
  from the tests' directory (not ``tmp_path``: relative paths resolve elsewhere under open_clip's layout)."""
  path = write_open_clip_csv(tmp_path)
  if edit:
    edit(path)
  return _pairs(tmp_path, captions="train.csv", **data)


def _npz(tmp_path, **changes):
  arrays = {**embedding_arrays(n=20), **changes}
  np.savez(tmp_path / "emb.npz", **{k: v for k, v in arrays.items() if v is not None})
  return _pairs(tmp_path, embeddings="emb.npz")


def _npy_folder(tmp_path, **changes):
  folder = tmp_path / "emb"
  folder.mkdir()
  for name, a in {**embedding_arrays(n=20), **changes}.items():
    np.save(folder / f"{name}.npy", a)
  return _pairs(tmp_path, embeddings="emb")


def _parquet(tmp_path, **extra):
  import pyarrow as pa
  import pyarrow.parquet as pq
  arrays = embedding_arrays(n=6)
  columns = {"image": pa.array(list(arrays["image"])), "text": pa.array(list(arrays["text"])), **extra}
  pq.write_table(pa.table(columns), tmp_path / "emb.parquet")
  return _pairs(tmp_path, embeddings="emb.parquet")


def _cut(path, keep):
  """``path`` cut to its first ``keep`` bytes (negative: all but the last ``-keep``), as an interrupted copy leaves it."""
  os.truncate(path, keep if keep >= 0 else os.path.getsize(path) + keep)


def _npy_cut(tmp_path, name, keep):
  call = _npy_folder(tmp_path)
  _cut(tmp_path / "emb" / f"{name}.npy", keep)
  return call


def _npz_cut(tmp_path, keep):
  call = _npz(tmp_path)
  _cut(tmp_path / "emb.npz", keep)
  return call


def _object_labels(n=20):
  """Labels saved as a Python-object array, as ``np.save(path, list_of_mixed_values)`` does."""
  return np.array([("red", 1)[i % 2] for i in range(n)], dtype=object)


def _npy_objects(tmp_path):
  folder = tmp_path / "emb"
  folder.mkdir()
  for name, a in {**embedding_arrays(n=20), "label": _object_labels()}.items():
    np.save(folder / f"{name}.npy", a, allow_pickle=True)
  return _pairs(tmp_path, embeddings="emb")


def _npz_objects(tmp_path):
  np.savez(tmp_path / "emb.npz", **{**embedding_arrays(n=20), "label": _object_labels()})
  return _pairs(tmp_path, embeddings="emb.npz")


def _corrupt(name):
  def edit(folder, path):
    with open(folder / name, "wb") as f:
      f.write(b"\x89PNG\r\n\x1a\n not really a png")
  return edit


def _remove(*names):
  def edit(folder, path):
    for name in names:
      os.remove(folder / name)
  return edit


def _bytes_replace(old: bytes, new: bytes):
  def edit(folder, path):
    with open(path, "rb") as f:
      data = f.read()
    with open(path, "wb") as f:
      f.write(data.replace(old, new, 1))
  return edit


def _embeddings(tmp, n):
  """``pairs/emb.npz`` of ``n`` pairs; returns ``tmp``."""
  os.makedirs(tmp / "pairs", exist_ok=True)
  np.savez(tmp / "pairs" / "emb.npz", **embedding_arrays(n=n))
  return tmp


def _resumed_after(tmp, change, **data):
  """A run started on ``data`` (its workdir files written), then ``change(tmp)``: its resume, as a call."""
  config = get_config("tiny")
  config.data.update(dir=str(tmp / "pairs"), **data)
  (tmp / "run").mkdir()
  write_workdir_files(str(tmp / "run"), make_task(config, task_context(config)).workdir_files, resuming=False)
  change(tmp)
  return lambda: write_workdir_files(str(tmp / "run"), make_task(config, task_context(config)).workdir_files, resuming=True)


def _image_file(tmp, name, pixels):
  """``decode_image`` of one image written by Pillow (mode from the array: F for float32, I for int32)."""
  Image.fromarray(pixels).save(tmp / name)
  return lambda: decode_image(str(tmp / name), 4, "captions.csv row 0 (line 2)")


CASES = [
    ("no data.dir", lambda tmp: lambda: load_pairs(data_config(dir=""), ("{}",)), "data.dir is empty; set --config.data.dir="),
    ("missing captions file", lambda tmp: _pairs(_folder(tmp), captions="nope.csv"),
     "data.captions: captions file"),
    ("captions extension", lambda tmp: _pairs(_folder(tmp, lambda f, p: open(f / "c.txt", "w").close()), captions="c.txt"),
     "has extension '.txt'; allowed: .csv, .tsv, .jsonl"),
    ("unknown jsonl key", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, '"label":', '"lable":'), fmt="jsonl"),
                                             captions="captions.jsonl"),
     "captions.jsonl: unknown column 'lable'; allowed columns: image, caption, label, split"),
    ("repeated csv column", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, "image,caption,label", "image,caption,caption"))),
     "captions.csv: column 'caption' appears twice in the header (image, caption, caption); allowed: each column once"),
    ("repeated jsonl key", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, '"label":', '"caption":'), fmt="jsonl"),
                                              captions="captions.jsonl"),
     "captions.jsonl line 1: key 'caption' appears twice in one object"),
    ("non-UTF-8 csv", lambda tmp: _pairs(_folder(tmp, _bytes_replace(b"a blue square", b"a bl\xe9 square"))),
     "captions.csv line 4 (byte offset 113): byte b'\\xe9' is not UTF-8"),
    ("non-UTF-8 jsonl", lambda tmp: _pairs(_folder(tmp, _bytes_replace(b"green", b"gr\xffen"), fmt="jsonl"),
                                           captions="captions.jsonl"),
     "captions.jsonl line 2 (byte offset"),
    ("float image outside [0, 1]", lambda tmp: _image_file(tmp, "f.tiff", np.full((4, 4), 255.0, np.float32)),
     "f.tiff' is a float image with values in [255, 255]; allowed: float pixels in [0, 1]"),
    ("32-bit integer image", lambda tmp: _image_file(tmp, "i.tiff", np.full((4, 4), 70000, np.int32)),
     "has Pillow mode 'I' (32-bit or signed integer pixels, which have no fixed range)"),
    ("no caption column", lambda tmp: _pairs(_folder(tmp, lambda f, p: open(p, "w").write("image\nimg_00.png\n"))),
     "no 'caption' column (columns: image); required: image, caption; the caption column is data.csv_caption_key "
     "(default 'caption' for data.csv_format='')"),
    # a CSV's layout (data.csv_*): open_clip's or named columns
    ("open_clip csv, jaxlab's layout", lambda tmp: _open_clip(tmp),
     "train.csv: no 'image' column (columns: 'filepath\\ttitle\\turl'); required: image, caption; the image column is "
     "data.csv_img_key (default 'image' for data.csv_format='') (this is open_clip's layout: set "
     "data.csv_format='open_clip')"),
    ("open_clip columns, comma-separated", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(
        p, "image,caption,label", "filepath,title,label"))),
     "(this is open_clip's layout: set data.csv_format='open_clip' data.csv_separator=',')"),
    ("named caption column missing", lambda tmp: _open_clip(tmp, csv_format="open_clip", csv_caption_key="text"),
     "train.csv: no 'text' column (columns: filepath, title, url); required: filepath, text; the caption column is "
     "data.csv_caption_key='text'"),
    ("named label column missing", lambda tmp: _pairs(_folder(tmp), csv_label_key="class"),
     "captions.csv: no 'class' column (columns: image, caption, label); required: image, caption, class; the label "
     "column is data.csv_label_key='class'"),
    ("open_clip column missing", lambda tmp: _open_clip(tmp, lambda p: _rewrite(p, "title", "caption"), csv_format="open_clip"),
     "no 'title' column (columns: filepath, caption, url); required: filepath, title; the caption column is "
     "data.csv_caption_key (default 'title' for data.csv_format='open_clip')"),
    ("repeated open_clip column", lambda tmp: _open_clip(tmp, lambda p: _rewrite(p, "url", "title"), csv_format="open_clip"),
     "train.csv: column 'title' appears twice in the header (filepath, title, title); allowed: each column once (it is "
     "the caption column, data.csv_caption_key (default 'title' for data.csv_format='open_clip'))"),
    ("wrong separator", lambda tmp: _pairs(_folder(tmp), csv_separator=";"),
     "(the header splits on ',': set data.csv_separator=',')"),
    ("open_clip paths from another directory", lambda tmp: _open_clip(tmp, csv_format="open_clip"),
     "train.csv: 40 of 40 rows name images that do not exist, first: 'images/img_00.png' (row 0, line 2), "
     "'images/img_01.png' (row 1, line 3), 'images/img_02.png' (row 2, line 4); a relative path is resolved against "
     "the current directory, as open_clip opens them (data.csv_format='open_clip'), "),
    ("csv format", lambda tmp: _pairs(_folder(tmp), csv_format="openclip"),
     "data.csv_format='openclip'; allowed: '' (jaxlab's layout"),
    ("csv separator", lambda tmp: _pairs(_folder(tmp), csv_separator="::"), "data.csv_separator='::'; allowed: one character"),
    ("csv keys on one column", lambda tmp: _pairs(_folder(tmp), csv_img_key="x", csv_caption_key="x"),
     "data.csv_caption_key and data.csv_img_key both name column 'x'; allowed: a different column for each"),
    ("csv keys with jsonl", lambda tmp: _pairs(_folder(tmp, fmt="jsonl"), captions="captions.jsonl", csv_format="open_clip"),
     "captions.jsonl' is a JSONL file, but the data.csv_* keys are set (data.csv_format='open_clip'); allowed: those "
     "keys for a .csv file only"),
    ("missing images", lambda tmp: _pairs(_folder(tmp, _remove("img_03.png", "img_05.png", "img_06.png", "img_09.png"))),
     "4 of 20 rows name images that do not exist, first: 'img_03.png' (row 3, line 5), 'img_05.png' (row 5, line 7), "
     "'img_06.png' (row 6, line 8);"),
    ("empty caption", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, "a red bar on black", ""))),
     "row 4 (line 6): caption=''; allowed: a non-empty string"),
    # a CSV read in part without a word: quoting that swallows rows, a field past the csv module's limit
    ("unclosed quote in a caption", lambda tmp: _open_clip(tmp, lambda p: _rewrite_once(p, "a red bar", '"a red bar'),
                                                           csv_format="open_clip"),
     "train.csv line 6: a quoted field opened on line 6 is not closed before the end of the file (line 41), so the "
     "rest of the file would read as one field"),
    ("stray quote closed by a later caption", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(_rewrite_once(
        p, "a red bar on black", '"a red bar on black'), "green bar on black,", 'green bar on black",'))),
     "captions.csv line 6: a quoted field runs from line 6 to line 7 and holds line 7 ('img_05.png,a green bar on "
     "black'), which reads as a row of this file: a stray quote swallowed the rows between into one caption"),
    ("text after a closing quote", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, "a red bar on black",
                                                                                        '"a red" bar'))),
     "captions.csv line 6: ',' expected after '\"' (csv quoting); allowed: a quoted field that ends at its closing"),
    ("caption of 200,000 characters", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, "a red bar on black",
                                                                                           "a red bar " * 20000))),
     "captions.csv line 6: a field longer than 131072 characters (the csv module's limit; usually a quote that was "
     "never closed); allowed: fields of at most that length"),
    ("extra csv field", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, "green bar on black,green", "green bar,on black,green"))),
     "line 7: 4 fields for 3 columns (image, caption, label)"),
    ("bad json line", lambda tmp: _pairs(_folder(tmp, lambda f, p: open(p, "a").write("{nope\n"), fmt="jsonl"),
                                         captions="captions.jsonl"),
     "captions.jsonl line 21: not valid JSON"),
    ("bad split value", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, "red,test", "red,val"), split=True),
                                           split="column"),
     "row 0 (line 2): split='val'; allowed: train, test"),
    ("split column unused", lambda tmp: _pairs(_folder(tmp, split=True)),
     "has a split column but data.split='fraction'; set data.split='column'"),
    ("no split column", lambda tmp: _pairs(_folder(tmp), split="column"), "data.split='column' but"),
    ("split mode", lambda tmp: _pairs(_folder(tmp), split="random"), "data.split='random'; allowed: 'fraction', 'column'"),
    ("test fraction", lambda tmp: _pairs(_folder(tmp), test_fraction=1.5), "data.test_fraction=1.5; allowed: a number in (0, 1)"),
    ("undecodable test image", lambda tmp: _pairs(_folder(tmp, _corrupt("img_00.png")), test_fraction=0.5),
     "captions.csv row 0 (line 2): image"),
    ("tokenizer missing", lambda tmp: _pairs(_folder(tmp), tokenizer="tok.json"), "data.tokenizer: tokenizer file"),
    ("tokenizer corrupt", lambda tmp: _pairs(_folder(tmp, lambda f, p: open(f / "tok.json", "w").write("{")), tokenizer="tok.json"),
     "is not a tokenizer.json the tokenizers library can read"),
    ("unknown class word", lambda tmp: _pairs(_folder(tmp, lambda f, p: _rewrite(p, "yellow\n", "gold\n"))),
     "class 'gold' has no token the tokenizer knows"),
    ("one class", lambda tmp: _pairs(_folder(tmp, lambda f, p: [_rewrite(p, f",{c}\n", ",red\n") for c in ("green", "blue", "yellow")])),
     "the label column has 1 class ('red'); zero-shot evaluation needs at least 2"),
    ("templates", lambda tmp: lambda: load_pairs(data_config(dir=str(_folder(tmp))), ("a photo",)),
     "eval.templates=('a photo',); allowed: a non-empty tuple of strings with one '{}' each"),
    ("missing embeddings", lambda tmp: _pairs(tmp, embeddings="emb.npz"), "data.embeddings: "),
    ("embeddings extension", lambda tmp: (open(tmp / "emb.csv", "w").close(), _pairs(tmp, embeddings="emb.csv"))[1],
     "has extension '.csv'; allowed: a folder of image.npy + text.npy, .npz, .parquet"),
    ("npz row counts", lambda tmp: _npz(tmp, text=embedding_arrays(n=19)["text"]),
     "row counts differ (image has 20, text has 19, label has 20); allowed: the same number of rows in every one of"),
    ("npy row counts", lambda tmp: _npy_folder(tmp, label=np.arange(21) % 4),
     "row counts differ (image has 20, label has 21, text has 20)"),
    # embedding files cut short or holding Python objects
    ("npy cut short", lambda tmp: _npy_cut(tmp, "text", 300),
     "emb/text.npy: cut short: its header says shape (20, 5) float32 (528 bytes with the header), the file has 300 "
     "bytes; allowed: a complete .npy file"),
    ("npy cut in its header", lambda tmp: _npy_cut(tmp, "image", 40),
     "emb/image.npy: not a complete .npy file (EOF: reading array header"),
    ("npy of Python objects", _npy_objects,
     "emb/label.npy: holds Python objects (dtype object), which numpy reads only with allow_pickle"),
    ("npz cut short", lambda tmp: _npz_cut(tmp, -100),
     "emb.npz: not a complete .npz file (File is not a zip file; an .npz file is a zip archive, and one cut short"),
    ("npz array of Python objects", _npz_objects,
     "emb.npz: array 'label' holds Python objects (dtype object), which numpy reads only with allow_pickle"),
    ("npz unknown key", lambda tmp: _npz(tmp, texts=embedding_arrays(n=20)["text"]),
     "unknown array 'texts'; allowed: image, text, label, split"),
    ("npy unknown file", lambda tmp: _npy_folder(tmp, labels=np.arange(20)), "unknown .npy file 'labels'"),
    ("parquet unknown column", lambda tmp: _parquet(tmp, caption=["x"] * 6), "unknown column 'caption'"),
    ("no text embeddings", lambda tmp: _npz(tmp, text=None), "no 'text' embeddings (has: image, label)"),
    ("embedding rank", lambda tmp: _npz(tmp, image=np.zeros((20, 2, 3), np.float32)),
     "image embeddings have shape (20, 2, 3); allowed: [rows, dim]"),
    ("integer embeddings", lambda tmp: _npz(tmp, text=np.zeros((20, 3), np.int32)),
     "text embeddings have dtype int32; allowed: a floating dtype"),
    ("class without held-out row", lambda tmp: _task(_folder(tmp, lambda f, p: _rewrite(p, "blue,test", "blue,train"),
                                                             split=True), split="column"),
     "class 'blue' has no held-out row"),
    ("eval.imbalance", lambda tmp: _task(_folder(tmp), {"imbalance": 0.5}), "eval.imbalance=0.5; allowed: 0"),
    ("eval.epsilon", lambda tmp: _task(_folder(tmp), {"epsilon": 20.0}), "eval.epsilon must be in (0, 1], got 20.0"),
    ("batch over records", lambda tmp: lambda: ShardedBatches(records(7), 8, 2),
     "batch_size=8 needs 4 training pairs per process, but each of the 2 processes has 3 (of 7)"),
    ("batch over processes", lambda tmp: lambda: ShardedBatches(records(10), 5, 2),
     "batch_size=5 is not a multiple of the 2 processes"),
    ("text dim with vocab", lambda tmp: lambda: TwoTower(vocab_size=10, text_embedding_dim=4),
     "TwoTower.vocab_size=10 with text_embedding_dim=4"),
    ("conv channels", lambda tmp: lambda: ConvImageEncoder(channels=()), "ConvImageEncoder.channels=(); must be a non-empty"),
    # a resume on other data than the run started on
    ("resume after a caption was edited", lambda tmp: _resumed_after(
        _folder(tmp).parent, lambda t: _rewrite(t / "pairs" / "captions.csv", "a red bar", "a red square")),
     "data_fingerprint.json this run derives from its data now (captions['sha256']: '"),
    ("resume after an image was replaced", lambda tmp: _resumed_after(
        _folder(tmp).parent, lambda t: Image.new("RGB", (16, 16)).save(t / "pairs" / "img_00.png")),
     "data_fingerprint.json this run derives from its data now (images['size']: "),
    ("resume after the embeddings were replaced", lambda tmp: _resumed_after(
        _embeddings(tmp, 20), lambda t: _embeddings(t, 24), embeddings="emb.npz"),
     "data_fingerprint.json this run derives from its data now (embeddings['emb.npz']['sha256_ends']: '"),
]


@pytest.mark.parametrize("what,make,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_pairs_input_is_one_clear_line(tmp_path, what, make, fragment):
  assert_one_clear_line("clip_files", what, make(tmp_path), fragment)


def test_a_corrupt_training_image_fails_its_batch_with_file_and_row(tmp_path):
  folder = _folder(tmp_path)
  task = _task(folder)()
  inference = task.inference
  labels = [("red", "green", "blue", "yellow")[i % 4] for i in range(20)]
  _, test = split_rows(20, "fraction", 0.2, 0, None, "", labels=labels)  # the tiny config's split
  row = min(set(range(20)) - set(test.tolist()))
  _corrupt(f"img_{row:02d}.png")(folder, None)  # after the task is built: training images are read lazily
  # 16 training rows, batch 16: step 0 reads every one of them.
  assert_one_clear_line("clip_files", "corrupt train image", lambda: task.host_batch(0, np.arange(16), 0),
                        f"captions.csv row {row} (line {row + 2}): image")
  assert inference.data["test"]["image"].shape == (4, 16, 16, 3)


def test_a_non_finite_embedding_row_is_named_when_read(tmp_path):
  arrays = embedding_arrays(n=20)
  arrays["image"][5] = np.inf   # a test row (every fifth row is test)
  arrays["text"][7] = np.nan    # a training row: found when a batch reads it
  arrays["split"] = np.array(["test" if i % 5 == 0 else "train" for i in range(20)])
  np.savez(tmp_path / "emb.npz", **arrays)
  assert_one_clear_line("clip_files", "inf test row", _pairs(tmp_path, embeddings="emb.npz", split="column"),
                        "emb.npz: image row 5 has a NaN or inf entry; allowed: finite embeddings")
  arrays["image"][5] = 0.0
  del arrays["label"]  # with labels, the class means read every training text up front (and find row 7 there)
  np.savez(tmp_path / "emb.npz", **arrays)
  pairs = _pairs(tmp_path, embeddings="emb.npz", split="column")()
  batches = ShardedBatches(pairs.train, 16, 1)
  assert_one_clear_line("clip_files", "nan train row", lambda: batches(0, np.arange(16), 0),
                        "emb.npz: text row 7 has a NaN or inf entry")
