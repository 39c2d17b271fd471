"""Bad webdataset shards and shard keys: each case is ONE line naming the config key or shard, and what is allowed."""

from __future__ import annotations

import gzip
import os
import tarfile

import numpy as np
import pytest
import webdataset as wds

from jaxlab.ot_clip.data.batches import ShardedBatches
from jaxlab.ot_clip.data.shards import load_shard_pairs
from tests.support.bad_input import assert_one_clear_line
from tests.support.clip_data import data_config
from tests.support.clip_shards import write_shards

PATTERN = "s/{00000..00001}.tar"


def _load(tmp, **data):
  return lambda: load_shard_pairs(data_config(dir=str(tmp), **data))


def _shards(tmp, edit=None, **data):
  """Two shards of 10 samples under ``tmp/s``, the second replaced by ``edit(path)``; the load, as a call."""
  paths = write_shards(tmp / "s", num_shards=2, per_shard=10)
  if edit:
    edit(paths[1])
  return _load(tmp, **{"train_shards": PATTERN, **data})


def _write(data: bytes, mode: str = "wb"):
  """Writes ``data`` to the shard (``mode="ab"``: after its end)."""
  def edit(path):
    with open(path, mode) as f:
      f.write(data)
  return edit


def _gzip(path):
  with open(path, "rb") as f:
    data = f.read()
  _write(gzip.compress(data))(path)


def _cut(where):
  """Cuts the shard short: ``where(members)`` is the byte to cut at."""
  def edit(path):
    with tarfile.open(path) as tar:
      at = where(tar.getmembers())
    os.truncate(path, at)
  return edit


def _cat_with(other):
  """Appends the whole shard ``other`` (``cat a.tar b.tar > a.tar``)."""
  def edit(path):
    with open(other, "rb") as f:
      _write(f.read(), "ab")(path)
  return edit


def _dotted_keys(path):
  """Keys holding a dot, as a tool naming files ``img.000001.jpg`` writes them with webdataset's TarWriter."""
  _samples(*({"__key__": f"img.{i:06d}", "png": b"x", "txt": f"caption {i}"} for i in range(10)))(path)


def _copied_as_eval(tmp):
  """Shard 00001 copied byte for byte to ``held/00009.tar`` and held out."""
  import shutil
  call = _shards(tmp, eval_shards="held/00009.tar")
  os.makedirs(tmp / "held")
  shutil.copyfile(tmp / "s" / "00001.tar", tmp / "held" / "00009.tar")
  return call


def _overwrite(where, data: bytes):
  """Overwrites the shard at ``where(members)`` with ``data``."""
  def edit(path):
    with tarfile.open(path) as tar:
      at = where(tar.getmembers())
    with open(path, "r+b") as f:
      f.seek(at)
      f.write(data)
  return edit


def _empty_tar(path):
  tarfile.open(path, "w").close()


def _samples(*samples):
  def edit(path):
    with wds.TarWriter(path) as sink:
      for sample in samples:
        sink.write(sample)
  return edit


def _only_metadata(tmp):
  write_shards(tmp / "s", num_shards=2, per_shard=3, edit=lambda i, s: {"__key__": s["__key__"], "json": s["json"]})
  return _load(tmp, train_shards=PATTERN)


S1 = "s/00001.tar'"
CASES = [
    ("pattern matches no file", lambda tmp: _shards(tmp, train_shards="s/{00000..00003}.tar"),
     "data.train_shards: 2 of 4 shards do not exist, first: '"),
    ("unbalanced braces", lambda tmp: _shards(tmp, train_shards="s/{00000..00001.tar"),
     "data.train_shards: 's/{00000..00001.tar' has unbalanced braces"),
    ("eval pattern matches no file", lambda tmp: _shards(tmp, eval_shards="held/0.tar"),
     "data.eval_shards: 1 of 1 shards do not exist, first: '"),
    ("empty file", lambda tmp: _shards(tmp, _write(b"")), f"{S1} is empty (0 bytes); allowed: a tar file"),
    ("empty tar", lambda tmp: _shards(tmp, _empty_tar), f"{S1} holds no files; allowed: a tar file of samples"),
    ("not a tar", lambda tmp: _shards(tmp, _write(b"this is not a tar file" * 40)),
     f"{S1} is not a readable tar file, or is cut short (ReadError: "),
    ("gzip shard", lambda tmp: _shards(tmp, _gzip), f"{S1} is gzip-compressed; allowed: uncompressed .tar shards"),
    ("cut in the last member", lambda tmp: _shards(tmp, _cut(lambda m: m[-1].offset_data + 2)),
     f"{S1} is not a readable tar file, or is cut short (ReadError: unexpected end of data)"),
    ("cut in a header", lambda tmp: _shards(tmp, _cut(lambda m: m[5].offset + 100)),
     f"{S1} is cut short or damaged (a partial header at byte "),
    # a shard tarfile (and webdataset) would read in part without a word
    ("cut at a member boundary", lambda tmp: _shards(tmp, _cut(lambda m: m[15].offset)),
     f"{S1} is cut short: it ends after member '000010004.txt' (byte "),
    ("a damaged member header", lambda tmp: _shards(tmp, _overwrite(lambda m: m[15].offset, b"\xff" * 512)),
     f"{S1} is cut short or damaged (a member header tarfile cannot read at byte "),
    ("two shards joined with cat", lambda tmp: _shards(tmp, _cat_with(write_shards(tmp / "other", 1, 3)[0])),
     f"{S1} holds a second tar archive after its end-of-archive marker (at byte 71680; shards joined with cat?)"),
    ("keys holding a dot", lambda tmp: _shards(tmp, _dotted_keys),
     f"{S1}: 20 members ('img.000000.png', 'img.000000.txt', ...) share the key 'img': a webdataset key ends at the "
     "first dot of the file name (webdataset's tariterators.base_plus_ext), so 'img.000000.png' is key 'img' with "
     "extension '000000.png'"),
    ("a pattern of 10^9 names", lambda tmp: _shards(tmp, train_shards="s/{000000000..999999999}.tar"),
     "data.train_shards='s/{000000000..999999999}.tar' stands for 1,000,000,000 names; allowed: at most 1,000,000"),
    ("eval shard a byte copy of a train shard", _copied_as_eval,
     "held/00009.tar' is a copy of data.train_shards shard '"),
    ("non-UTF-8 caption", lambda tmp: _shards(tmp, _samples({"__key__": "k7", "png": b"x", "txt": b"caf\xe9"})),
     f"{S1} key 'k7': caption 'k7.txt' is not UTF-8 (byte b'\\xe9' at offset 3"),
    ("two images of one extension", lambda tmp: _shards(tmp, _samples({"__key__": "k", "png": b"x", "txt": "a"},
                                                                       {"__key__": "k", "png": b"y", "txt": "b"})),
     f"{S1} key 'k' has two 'png' members ('k.png' and 'k.png')"),
    ("no usable sample", _only_metadata,
     "data.train_shards: the 2 shards hold no usable sample (skipped: 6 no image, 0 no caption, 0 empty caption)"),
    ("shards and embeddings", lambda tmp: _shards(tmp, embeddings="emb.npz"),
     "data.train_shards='s/{00000..00001}.tar' and data.embeddings='emb.npz' are both set; allowed: one source"),
    ("eval shards alone", lambda tmp: _load(tmp, eval_shards="s/0.tar"),
     "data.eval_shards='s/0.tar' is set but data.train_shards is empty"),
    ("split column", lambda tmp: _shards(tmp, split="column"),
     "data.split='column' with data.train_shards; allowed: 'fraction'"),
    ("eval shard trained on", lambda tmp: _shards(tmp, eval_shards="s/00001.tar"),
     "data.eval_shards and data.train_shards both name shard '"),
]


@pytest.mark.parametrize("what, make, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_shards_are_one_clear_line(tmp_path, what, make, fragment):
  assert_one_clear_line("clip_files shards", what, make(tmp_path), fragment)


def test_a_corrupt_image_fails_its_batch_naming_shard_and_key(tmp_path):
  def corrupt(i, sample):
    return {**sample, "png": b"\x89PNG\r\n\x1a\n not really a png"} if i == 3 else sample
  paths = write_shards(tmp_path / "s", num_shards=2, per_shard=10, edit=corrupt)
  write_shards(tmp_path / "held", num_shards=1, per_shard=4, first=9)  # held out whole: decoded at the start
  pairs = load_shard_pairs(data_config(dir=str(tmp_path), train_shards=PATTERN, eval_shards="held/00009.tar"))
  batches = ShardedBatches(pairs.train, 20, 1)
  read_all = lambda: batches(0, np.arange(20), 0)  # noqa: E731  (every training sample: the corrupt one too)
  assert_one_clear_line("clip_files shards", "corrupt image", read_all,
                        f"shard {paths[0]!r} key '000000003': image '000000003.png' cannot be decoded")


def test_a_shard_cut_short_after_indexing_is_named(tmp_path):
  paths = write_shards(tmp_path / "s", num_shards=2, per_shard=10)
  pairs = load_shard_pairs(data_config(dir=str(tmp_path), train_shards=PATTERN))
  os.truncate(paths[1], 1024)
  batches = ShardedBatches(pairs.train, 16, 1)
  read_all = lambda: batches(0, np.arange(16), 0)  # noqa: E731  (every training sample)
  assert_one_clear_line("clip_files shards", "shard cut short", read_all,
                        f"shard {paths[1]!r}: member '0000100")


def test_bytes_after_the_end_of_archive_marker_are_ignored_and_counted(tmp_path):
  """tar and webdataset read a shard with bytes after its end-of-archive marker; so does jaxlab, and says so."""
  load = _shards(tmp_path, _write(b"\0" * 4096 + b"signature: 37 bytes not in the archive", "ab"))
  pairs = load()
  assert len(pairs.train) + len(pairs.test["tokens"]) == 20
  path = os.path.join(str(tmp_path), "s/00001.tar")
  assert pairs.description.endswith(f", 38 bytes after the end-of-archive marker of 1 shard ignored, as tar and "
                                    f"webdataset ignore them (first: {path!r})"), pairs.description
  assert [s["__key__"] for s in wds.WebDataset(path, shardshuffle=False)] == [f"0000100{i:02d}" for i in range(10)]
