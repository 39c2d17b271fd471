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
``.json``. An empty caption counts as no caption. Names whose key holds a dot
(``img.000001.jpg``: key ``img``, extension ``000001.jpg`` by webdataset's rule) merge a shard's
samples into one key: such a sample is refused, naming the rule, rather than skipped as one.

A shard must end at tar's end-of-archive marker: tarfile and webdataset stop quietly at a shard
cut after a complete member or at a damaged header, so either is refused, naming the byte where
the shard stops. Bytes after the marker are ignored, as tar and webdataset ignore them, and
counted (``ShardIndex.trailing``); a second archive there (shards joined with ``cat``) is refused,
since its members would not be read.
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
    trailing: ``{shard: bytes}`` of the shards with bytes after their end-of-archive marker other
      than zero padding (ignored, as tar and webdataset ignore them).
  """
  files: list[str]
  shard: np.ndarray
  keys: list[str]
  image_names: list[str]
  image_offset: np.ndarray
  image_size: np.ndarray
  captions: list[str]
  skipped: dict[str, int]
  trailing: dict[str, int] = dataclasses.field(default_factory=dict)

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
      shard, one ``tarfile`` cannot read, that is truncated (also at a member boundary) or holds a
      second archive, a sample with two members of one extension, keys holding dots that merge
      samples, or a caption that is not UTF-8 (naming its key).
  """
  missing = [f for f in files if not os.path.isfile(f)]
  if missing:
    raise InputError(f"{key}: {len(missing)} of {len(files)} shards do not exist, first: {missing[0]!r}; allowed: "
                     "existing .tar files (relative paths are under data.dir)")
  columns: dict[str, list] = {c: [] for c in ("shard", "keys", "image_names", "image_offset", "image_size",
                                              "captions")}
  skipped = dict.fromkeys(SKIP_REASONS, 0)
  trailing: dict[str, int] = {}
  for number, path in enumerate(files):
    with open(path, "rb") as f:  # the headers are read first, then the captions by offset
      infos, trailing_bytes = _members(f, path, key)
      if trailing_bytes:
        trailing[path] = trailing_bytes
      for sample_key, group in _samples(infos, path, key):
        image = next((group[e] for e in IMAGE_EXTENSIONS if e in group), None)
        caption = group.get(CAPTION_EXTENSION)
        reason = "no image" if image is None else "no caption" if caption is None else None
        if reason:
          _check_dotted_key(group, path, sample_key, key)
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
                    skipped=skipped, trailing=trailing)


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


def _members(f, path: str, key: str) -> tuple[list[tarfile.TarInfo], int]:
  """The members of shard ``path`` (open as ``f``), checked to end at the end-of-archive marker, and the count of
  the bytes after it that are not zero padding."""
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
  return members, _check_end(f, path, key, end, members[-1].name)


def _samples(members: list[tarfile.TarInfo], path: str, key: str):
  """(sample key, {extension: TarInfo}) of each sample of shard ``path``, in tar order."""
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


def _check_dotted_key(group: dict[str, tarfile.TarInfo], path: str, sample_key: str, key: str) -> None:
  """A sample without an image or caption whose members' extensions hold a dot and end in an image or caption
  extension is several samples merged by their keys' dots: refused, not skipped as one."""
  wanted = IMAGE_EXTENSIONS + (CAPTION_EXTENSION,)
  merged = [info.name for ext, info in group.items() if "." in ext and ext.rsplit(".", 1)[1] in wanted]
  if merged:
    ext = next(e for e, info in group.items() if info.name == merged[0])
    raise InputError(f"{key}: shard {path!r}: {len(group)} members ({', '.join(map(repr, merged[:2]))}, ...) share "
                     f"the key {sample_key!r}: a webdataset key ends at the first dot of the file name "
                     f"(webdataset's tariterators.base_plus_ext), so {merged[0]!r} is key {sample_key!r} with "
                     f"extension {ext!r}, and they read as one sample without an image and a caption; allowed: member "
                     "names <key>.<extension> with no dot in the key's file name (e.g. 'img_000001.jpg')")


def _check_end(f, path: str, key: str, end: int, last: str) -> int:
  """Where tarfile stopped (``end``) must be the end-of-archive marker, else the shard is cut short or damaged.

  tarfile (and so webdataset) stops quietly at a file that ends after a complete member, at a
  partial header and at a header it cannot read: the samples after that point would be lost
  without a word. After the marker, zero padding is what tar writes; other bytes are ignored by
  tar and webdataset and so here (their count is returned), except a second archive (shards
  joined with ``cat``), whose members they would not read.
  """
  block = _read_at(f, end, tarfile.BLOCKSIZE)
  if not block:
    raise InputError(f"{key}: shard {path!r} is cut short: it ends after member {last!r} (byte {end}) without the "
                     "end-of-archive marker every tar writer ends with (two zero blocks), so its later samples are "
                     "missing; allowed: a complete tar file (copy or download it again)")
  if any(block):
    what = "a partial header" if len(block) < tarfile.BLOCKSIZE else "a member header tarfile cannot read"
    raise InputError(f"{key}: shard {path!r} is cut short or damaged ({what} at byte {end}, after member {last!r}); "
                     "tarfile and webdataset stop reading there, so the samples after it would be lost; allowed: a "
                     "complete tar file")
  at = _first_nonzero(f, end + tarfile.BLOCKSIZE)
  if at is not None and at % tarfile.BLOCKSIZE == 0 and _is_header(_read_at(f, at, tarfile.BLOCKSIZE)):
    raise InputError(f"{key}: shard {path!r} holds a second tar archive after its end-of-archive marker (at byte "
                     f"{at}; shards joined with cat?): tarfile and webdataset stop at the marker, so its members "
                     "would not be read; allowed: one archive per shard (join tars with tar --concatenate)")
  return 0 if at is None else os.fstat(f.fileno()).st_size - at


def _first_nonzero(f, start: int) -> int | None:
  """The offset of the first non-zero byte of ``f`` at or after ``start``, or None."""
  f.seek(start)
  while block := f.read(1 << 16):
    stripped = block.lstrip(b"\0")
    if stripped:
      return start + len(block) - len(stripped)
    start += len(block)
  return None


def _is_header(block: bytes) -> bool:
  """Whether ``block`` is a valid tar member header (its checksum holds)."""
  try:
    tarfile.TarInfo.frombuf(block, tarfile.ENCODING, "surrogateescape")
  except tarfile.HeaderError:
    return False
  return True


def _caption(f, path: str, info: tarfile.TarInfo, sample_key: str, key: str) -> str:
  data = _read_at(f, info.offset_data, info.size)  # within the file: tarfile checks each member's end
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise InputError(f"{key}: shard {path!r} key {sample_key!r}: caption {info.name!r} is not UTF-8 (byte "
                     f"{data[e.start:e.start + 1]!r} at offset {e.start}: {e.reason}); allowed: UTF-8 text") from None
