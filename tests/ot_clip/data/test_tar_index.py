"""The index of TarWriter shards: every sample found where webdataset finds it, read back by offset."""

import io

import numpy as np
import webdataset as wds
from PIL import Image

from jaxlab.ot_clip.data.images import decode_image
from jaxlab.ot_clip.data.tar_index import index_shards
from tests.support.clip_shards import encoded, sample_caption, sample_image, write_shards


def test_the_index_finds_webdatasets_samples_and_reads_their_bytes_by_offset(tmp_path):
  paths = write_shards(tmp_path, num_shards=3, per_shard=7, ext="mixed")
  index = index_shards(paths, "data.train_shards")
  # What webdataset's own reader yields from the same shards, sample for sample.
  theirs = list(wds.WebDataset(paths, shardshuffle=False))
  assert len(index) == len(theirs) == 21
  for i, sample in enumerate(theirs):
    assert index.keys[i] == sample["__key__"]
    ext = next(e for e in ("jpg", "png", "webp") if e in sample)
    assert index.image_names[i] == f"{sample['__key__']}.{ext}"
    assert index.read_image(i) == sample[ext]  # the exact bytes, read at the indexed offset
    assert index.captions[i] == sample["txt"].decode("utf-8") == sample_caption(i)
  assert index.shard.tolist() == [s for s in range(3) for _ in range(7)]
  assert index.skipped == {"no image": 0, "no caption": 0, "empty caption": 0}
  # Lossless formats decode to the pixels written; JPEG to what Pillow decodes of the bytes.
  for i in (0, 1, 2):
    image = decode_image(index.image_names[i], 12, index.where(i), data=index.read_image(i))
    lossy = index.image_names[i].endswith(".jpg")
    expected = np.asarray(Image.open(io.BytesIO(index.read_image(i))).convert("RGB")) if lossy else sample_image(i)
    np.testing.assert_array_equal(np.round(image * 255), expected)


def test_samples_without_an_image_or_a_caption_are_skipped_and_counted(tmp_path):
  def edit(i, sample):
    if i == 2:  # a failed download as img2dataset leaves it: only the metadata
      return {"__key__": sample["__key__"], "json": sample["json"]}
    if i == 5:
      return {k: v for k, v in sample.items() if k != "txt"}
    if i == 6:
      return {**sample, "txt": "  "}
    if i == 8:
      return None  # not written at all
    if i == 9:  # an upper-case extension is the same extension, as webdataset lowercases it
      return {"__key__": sample["__key__"], "PNG": sample["png"], "txt": sample["txt"]}
    return sample
  paths = write_shards(tmp_path, num_shards=2, per_shard=5, edit=edit)
  index = index_shards(paths, "data.train_shards")
  assert index.skipped == {"no image": 1, "no caption": 1, "empty caption": 1}
  assert index.keys == ["000000000", "000000001", "000000003", "000000004", "000010002", "000010004"]
  assert index.image_names[-1] == "000010004.PNG"
  assert index.read_image(len(index) - 1) == encoded(sample_image(9), "png")
  assert index.where(2) == f"shard {paths[0]!r} key '000000003'"


def test_keys_with_folders_and_dots_split_as_webdataset_splits_them(tmp_path):
  path = str(tmp_path / "0.tar")
  png = encoded(sample_image(0), "png")
  with wds.TarWriter(path) as sink:
    sink.write({"__key__": "part.a/img1", "png": png, "txt": "one", "seg.png": png})
    sink.write({"__key__": "part.a/img2", "png": png, "txt": "two"})
  index = index_shards([path], "data.train_shards")
  theirs = list(wds.WebDataset([path], shardshuffle=False))
  assert index.keys == [s["__key__"] for s in theirs] == ["part.a/img1", "part.a/img2"]
  assert index.captions == ["one", "two"] and index.image_names[0] == "part.a/img1.png"
