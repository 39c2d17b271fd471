"""An index of webdataset tar shards: where each sample's image lies, and its caption, for random access.

A shard is an uncompressed tar whose members are grouped into samples as webdataset groups them
(``tariterators.group_by_keys``): a member ``dir/key.ext`` belongs to sample ``dir/key`` (the
key ends at the first dot of the file name, the extension is lowercased), consecutive members
with the same key form one sample, and non-file members, names without an extension and
top-level ``__*__`` names are skipped. img2dataset and open_clip's data write per sample
``{key}.jpg`` (or png / webp) + ``{key}.txt`` (+ ``{key}.json``).

Indexing reads every member header (``tarfile``, which seeks past the data) and every caption
(small, read as the headers are); images stay in the shard and are read later by their offset
(:func:`read_member`), so a sample is random access. The image is the first of ``jpg``,
``png``, ``jpeg``, ``webp`` present (open_clip's ``"jpg;png;jpeg;webp"``); the caption is
``txt``, UTF-8; every other member (``json``, ...) is ignored. A sample without an image or a
caption is skipped and counted: img2dataset writes a failed download as a key with only its
``.json``. An empty caption counts as no caption.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tarfile

import numpy as np

from jaxlab.errors import InputError

#: The image extensions, in order of preference: the first a sample has is its image (open_clip's order).
IMAGE_EXTENSIONS = ("jpg", "png", "jpeg", "webp")
#: The caption's extension.
CAPTION_EXTENSION = "txt"
#: Why a sample is skipped, as ``ShardIndex.skipped`` counts them.
SKIP_REASONS = ("no image", "no caption", "empty caption")
_KEY_AND_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # webdataset's base_plus_ext
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZ": "bzip2", b"\xfd7": "xz", b"\x28\xb5": "zstd"}


@dataclasses.dataclass(frozen=True)
class ShardIndex:
  """The usable samples of a list of shards, in shard order then tar order.

  Attributes:
    files: the shard files.
    shard: each sample's position in ``files`` (int32).
    keys: each sample's key (``dir/key`` inside its tar).
    image_names: each sample's image member name (``key.jpg``), for messages.
    image_offset: where each image's bytes start in its shard (int64).
    image_size: the image's length in bytes (int64).
    captions: each sample's caption.
    skipped: samples left out, by reason (:data:`SKIP_REASONS`).
  """
  files: list[str]
  shard: np.ndarray
  keys: list[str]
  image_names: list[str]
  image_offset: np.ndarray
  image_size: np.ndarray
  captions: list[str]
  skipped: dict[str, int]

  def __len__(self) -> int:
    return len(self.keys)

  def where(self, i: int) -> str:
    """``"shard '<file>' key '<key>'"``, for messages about sample ``i``."""
    return f"shard {self.files[int(self.shard[i])]!r} key {self.keys[i]!r}"

  def read_image(self, i: int) -> bytes:
    """Sample ``i``'s image file, read from its shard by offset."""
    return read_member(self.files[int(self.shard[i])], int(self.image_offset[i]), int(self.image_size[i]),
                       self.image_names[i])


def index_shards(files: list[str], key: str) -> ShardIndex:
  """Indexes ``files`` (see the module docstring).

  Args:
    files: the shard files, in order (e.g. from ``jaxlab.ot_clip.data.brace.expand_shard_patterns``).
    key: the config key that named them, for messages.

  Returns:
    The :class:`ShardIndex` of their usable samples.

  Raises:
    InputError: one line naming ``key`` and the shard: a missing file, an empty or compressed
      shard, one ``tarfile`` cannot read or that is truncated, a sample with two members of one
      extension, or a caption that is not UTF-8 (naming its key).
  """
  missing = [f for f in files if not os.path.isfile(f)]
  if missing:
    raise InputError(f"{key}: {len(missing)} of {len(files)} shards do not exist, first: {missing[0]!r}; allowed: "
                     "existing .tar files (relative paths are under data.dir)")
  columns: dict[str, list] = {c: [] for c in ("shard", "keys", "image_names", "image_offset", "image_size",
                                              "captions")}
  skipped = dict.fromkeys(SKIP_REASONS, 0)
  for number, path in enumerate(files):
    with open(path, "rb") as f:  # the headers are read first, then the captions by offset
      for sample_key, members in _samples(f, path, key):
        image = next((members[e] for e in IMAGE_EXTENSIONS if e in members), None)
        caption = members.get(CAPTION_EXTENSION)
        reason = "no image" if image is None else "no caption" if caption is None else None
        text = None if reason else _caption(f, path, caption, sample_key, key)
        if reason is None and not text.strip():
          reason = "empty caption"
        if reason:
          skipped[reason] += 1
          continue
        columns["shard"].append(number)
        columns["keys"].append(sample_key)
        columns["image_names"].append(image.name)
        columns["image_offset"].append(image.offset_data)
        columns["image_size"].append(image.size)
        columns["captions"].append(text)
  return ShardIndex(files=list(files), shard=np.asarray(columns["shard"], np.int32), keys=columns["keys"],
                    image_names=columns["image_names"], image_offset=np.asarray(columns["image_offset"], np.int64),
                    image_size=np.asarray(columns["image_size"], np.int64), captions=columns["captions"],
                    skipped=skipped)


def read_member(path: str, offset: int, size: int, name: str) -> bytes:
  """``size`` bytes of ``path`` at ``offset`` (a tar member's data); InputError if the shard is now shorter."""
  with open(path, "rb") as f:
    data = _read_at(f, offset, size)
  if len(data) != size:
    raise InputError(f"shard {path!r}: member {name!r} ends past the end of the file (the shard changed after it "
                     "was indexed); allowed: shards left unchanged during a run")
  return data


def _read_at(f, offset: int, size: int) -> bytes:
  f.seek(offset)
  return f.read(size)


def _samples(f, path: str, key: str):
  """(sample key, {extension: TarInfo}) of each sample of shard ``path`` (open as ``f``), in tar order."""
  magic = f.read(2)
  f.seek(0)
  if not magic:
    raise InputError(f"{key}: shard {path!r} is empty (0 bytes); allowed: a tar file of samples")
  if magic in _COMPRESSED:
    raise InputError(f"{key}: shard {path!r} is {_COMPRESSED[magic]}-compressed; allowed: uncompressed .tar shards "
                     "(read by member offset, as img2dataset and webdataset's TarWriter write them)")
  try:
    with tarfile.open(fileobj=f, mode="r:") as tar:  # a given file object stays open
      members = tar.getmembers()
      end = tar.offset  # where tarfile stopped: the end-of-archive blocks, or a header cut short
  except tarfile.TarError as e:
    if _read_at(f, 0, tarfile.BLOCKSIZE) == bytes(tarfile.BLOCKSIZE):  # an end-of-archive block first
      members = []
    else:
      raise InputError(f"{key}: shard {path!r} is not a readable tar file, or is cut short "
                       f"({type(e).__name__}: {e}); allowed: a complete, uncompressed tar file") from None
  if not members:
    raise InputError(f"{key}: shard {path!r} holds no files; allowed: a tar file of samples")
  if any(_read_at(f, end, tarfile.RECORDSIZE)):  # tarfile ends quietly at a partial header
    raise InputError(f"{key}: shard {path!r} is cut short (a partial header at byte {end}, after member "
                     f"{members[-1].name!r}); allowed: a complete tar file")
  current, group = None, {}
  for info in members:
    if not info.isreg() or ("/" not in info.name and info.name.startswith("__") and info.name.endswith("__")):
      continue
    match = _KEY_AND_EXT.match(info.name)
    if not match:
      continue
    sample_key, ext = match[1], match[2].lower()
    if sample_key != current:
      if group:
        yield current, group
      current, group = sample_key, {}
    if ext in group:
      raise InputError(f"{key}: shard {path!r} key {sample_key!r} has two {ext!r} members ({group[ext].name!r} and "
                       f"{info.name!r}); allowed: one file per extension per sample, as webdataset reads them")
    group[ext] = info
  if group:
    yield current, group


def _caption(f, path: str, info: tarfile.TarInfo, sample_key: str, key: str) -> str:
  data = _read_at(f, info.offset_data, info.size)  # within the file: tarfile checks each member's end
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise InputError(f"{key}: shard {path!r} key {sample_key!r}: caption {info.name!r} is not UTF-8 (byte "
                     f"{data[e.start:e.start + 1]!r} at offset {e.start}: {e.reason}); allowed: UTF-8 text") from None
