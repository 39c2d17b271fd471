"""A two-tower data set from webdataset tar shards, as img2dataset and open_clip write them.

Config keys (``configs/clip_files.py``): ``data.train_shards``, a brace pattern of shards such as
``"shards/{00000..00099}.tar"`` (several joined by ``::``, as open_clip's ``--train-data``; see
``brace``), relative to ``data.dir`` unless absolute; setting it selects this source. The
held-out split is either ``data.eval_shards`` (a pattern of its own: those shards are held out
whole, and ``data.split`` / ``data.test_fraction`` are not used) or, without it, a seeded
``data.test_fraction`` of the training shards' samples (``data.split='fraction'``, ``split``).

Every process indexes every shard once at start (``tar_index``: the member headers and the
captions; samples without an image or a caption are skipped and counted in the run's
description), so a sample is random access: the training records are a ``grain.MapDataset``
whose element ``i`` reads one image from its shard by offset and decodes it (``images``), and
batches are drawn by ``batches.ShardedBatches`` as for the captions-file source: the batch of
step ``s`` is a pure function of (seed, ``s``), and each process reads only its own rows. The
captions are tokenized up front, by a tokenizer trained on the training captions or given
(``data.tokenizer``). Shards carry no class labels, so evaluation is retrieval only. The held-out
images are decoded into memory, so keep the held-out split small.

A resume must find the same shards: the fingerprint lists each shard's name (as the pattern
expands it), size and a hash of its ends (``jaxlab.data_fingerprint``) and the pair counts. The
same digest refuses a held-out shard that is a byte copy of a training shard (one named twice
is refused by its path already).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import numpy as np

from jaxlab.errors import InputError, check_int
from jaxlab.ot_clip.data import tokenizer as tokenizer_lib
from jaxlab.ot_clip.data.brace import expand_shard_patterns
from jaxlab.ot_clip.data.images import decode_image
from jaxlab.ot_clip.data.pairs import TOKENIZER_FILE, Pairs, _records, resolve
from jaxlab.ot_clip.data.split import split_rows
from jaxlab.ot_clip.data.tar_index import IMAGE_EXTENSIONS, ShardIndex, index_shards
from jaxlab.data_fingerprint import FINGERPRINT_FILE, file_digest, fingerprint_text

#: The ``data`` keys that name shards; either set selects this source.
SHARD_KEYS = ("train_shards", "eval_shards")


def uses_shards(data: Mapping[str, Any]) -> bool:
  """Whether ``data`` selects webdataset shards (``data.train_shards`` or ``data.eval_shards`` set)."""
  return any(data.get(key, "") for key in SHARD_KEYS)


def shard_names(data: Mapping[str, Any], key: str) -> list[str]:
  """``data.<key>``'s shard names as its pattern expands them (``brace.expand_shard_patterns``)."""
  return expand_shard_patterns(data.get(key, ""), f"data.{key}")


def load_shard_pairs(data: Mapping[str, Any]) -> Pairs:
  """Indexes, checks and splits the shards ``data`` names (see the module docstring).

  Args:
    data: the config's ``data`` block, a plain mapping (a ConfigDict or a dict; keys in ``configs/clip_files.py``).

  Returns:
    The :class:`~jaxlab.ot_clip.data.pairs.Pairs` (``kind="images"``, no classes).

  Raises:
    InputError: one line naming the config key and the pattern or shard: a source set twice, a
      pattern matching no file, an empty, compressed, unreadable or truncated shard, shards with
      no usable sample, a caption that is not UTF-8, a held-out split that is empty, a held-out
      shard that is (a copy of) a training shard.
  """
  if data.get("embeddings", ""):
    raise InputError(f"data.train_shards={data.get('train_shards', '')!r} and data.embeddings={data['embeddings']!r} "
                     "are both set; allowed: one source (clear one of them)")
  if not data.get("train_shards", ""):
    raise InputError(f"data.eval_shards={data['eval_shards']!r} is set but data.train_shards is empty; allowed: "
                     "data.train_shards (a brace pattern of .tar shards), data.eval_shards optional")
  size = check_int(data["image_size"], "data.image_size", 1, got=True)
  names = {key: shard_names(data, key) for key in SHARD_KEYS if data.get(key, "")}
  files = {key: [_path(data, n) for n in found] for key, found in names.items()}
  _check_disjoint(files)
  indexes = {key: _index(found, key) for key, found in files.items()}
  digests = {key: [file_digest(path) for path in found] for key, found in files.items()}
  _check_not_copies(files, digests)
  train_index = indexes["train_shards"]
  if "eval_shards" in indexes:
    test_index = indexes["eval_shards"]
    train, test = np.arange(len(train_index)), np.arange(len(test_index))
  else:
    if data["split"] != "fraction":
      raise InputError(f"data.split={data['split']!r} with data.train_shards; allowed: 'fraction' (a seeded "
                       "data.test_fraction of the samples is held out), or data.eval_shards (held-out shards)")
    test_index = train_index
    train, test = split_rows(len(train_index), data["split"], data["test_fraction"], data["split_seed"], None,
                             f"data.train_shards={data['train_shards']!r}")
  if data["tokenizer"]:
    tokenizer = tokenizer_lib.load_tokenizer(resolve(data, "tokenizer"))
  else:
    tokenizer = tokenizer_lib.train_tokenizer([train_index.captions[i] for i in train], data["vocab_size"])
  train_tokens, truncated = tokenizer_lib.encode(tokenizer, train_index.captions, data["max_tokens"])
  test_tokens = (train_tokens if test_index is train_index
                 else tokenizer_lib.encode(tokenizer, test_index.captions, data["max_tokens"])[0])
  read_train = _reader(train_index, train_tokens, size)
  read_test = _reader(test_index, test_tokens, size)
  test_set = {"image": np.stack([read_test(int(r))["image"] for r in test]), "tokens": test_tokens[test]}
  skipped = {reason: sum(ix.skipped[reason] for ix in indexes.values()) for reason in train_index.skipped}
  description = (f"clip_files: {len(train)} train / {len(test)} test image-caption pairs from "
                 f"{sum(len(f) for f in files.values())} webdataset shards "
                 f"({', '.join(f'data.{key}={data[key]!r}' for key in names)}), 0 classes, vocabulary "
                 f"{tokenizer.get_vocab_size()}, {truncated} captions truncated, {sum(skipped.values())} samples "
                 f"skipped ({', '.join(f'{n} {reason}' for reason, n in skipped.items())})"
                 + _trailing_note(indexes))
  fingerprint = shards_fingerprint(names, files, indexes, digests)
  return Pairs(kind="images", text_key="tokens", train=_records(train, read_train), test=test_set, classes=(),
               class_texts=None, model_kwargs={"vocab_size": tokenizer_lib.vocab_size(tokenizer)},
               files={FINGERPRINT_FILE: fingerprint_text(fingerprint), TOKENIZER_FILE: tokenizer.to_str(pretty=True)},
               tokenizer=tokenizer, description=description)


def shards_fingerprint(names: dict[str, list[str]], files: dict[str, list[str]],
                       indexes: dict[str, ShardIndex], digests: dict[str, list[dict]] | None = None) -> dict[str, Any]:
  """The fingerprint of the shards: per config key each shard's name, size and hash of its ends; the sample counts.

  Args:
    names: per config key (``train_shards``, ``eval_shards``) the shard names as the pattern expands them.
    files: the same shards' paths.
    indexes: the same shards' :class:`~jaxlab.ot_clip.data.tar_index.ShardIndex`.
    digests: the same shards' ``jaxlab.data_fingerprint.file_digest``, when already taken (else taken here).
  """
  digests = digests or {key: [file_digest(path) for path in files[key]] for key in names}
  return {key: [{"name": name, **digest} for name, digest in zip(names[key], digests[key])]
          for key in names} | {"pairs": {key: len(ix) for key, ix in indexes.items()},
                               "skipped": {key: ix.skipped for key, ix in indexes.items()}}


def _path(data: Mapping[str, Any], name: str) -> str:
  return os.path.join(data.get("dir", "") or "", name)


def _check_disjoint(files: dict[str, list[str]]) -> None:
  """A shard both trained on and held out would be evaluated on its own training pairs."""
  if "eval_shards" in files:
    train = {os.path.realpath(f) for f in files["train_shards"]}
    shared = [f for f in files["eval_shards"] if os.path.realpath(f) in train]
    if shared:
      raise InputError(f"data.eval_shards and data.train_shards both name shard {shared[0]!r}; allowed: held-out "
                       "shards that are not trained on")


def _check_not_copies(files: dict[str, list[str]], digests: dict[str, list[dict]]) -> None:
  """A held-out shard that is a byte copy of a training shard (same size and hash of its ends) evaluates on its
  training pairs."""
  if "eval_shards" not in files:
    return
  train = {(d["size"], d["sha256_ends"]): path for path, d in zip(files["train_shards"], digests["train_shards"])}
  for path, d in zip(files["eval_shards"], digests["eval_shards"]):
    copied = train.get((d["size"], d["sha256_ends"]))
    if copied is not None:
      raise InputError(f"data.eval_shards shard {path!r} is a copy of data.train_shards shard {copied!r} (the same "
                       f"{d['size']} bytes by size and the sha256 of its first and last MiB): evaluation would be on "
                       "training pairs; allowed: held-out shards that are not copies of training shards")


def _trailing_note(indexes: dict[str, ShardIndex]) -> str:
  """``", 37 bytes after the end-of-archive marker of 1 shard ignored (first: 's/00001.tar')"``, or ``""``."""
  trailing = {path: n for ix in indexes.values() for path, n in ix.trailing.items()}
  if not trailing:
    return ""
  first = next(iter(trailing))
  return (f", {sum(trailing.values())} bytes after the end-of-archive marker of {len(trailing)} shard"
          f"{'s' if len(trailing) > 1 else ''} ignored, as tar and webdataset ignore them (first: {first!r})")


def _index(files: list[str], key: str) -> ShardIndex:
  index = index_shards(files, f"data.{key}")
  if not len(index):
    counts = ", ".join(f"{n} {reason}" for reason, n in index.skipped.items())
    raise InputError(f"data.{key}: the {len(files)} shards hold no usable sample (skipped: {counts}); allowed: "
                     f"samples with an image ({', '.join(IMAGE_EXTENSIONS)}) and a non-empty .txt caption")
  return index


def _reader(index: ShardIndex, tokens: np.ndarray, size: int) -> Callable[[int], dict[str, np.ndarray]]:
  """Sample ``i`` of ``index`` as a pair: its image read from the shard by offset and decoded, its token ids."""
  def read(i: int) -> dict[str, np.ndarray]:
    image = decode_image(index.image_names[i], size, index.where(i), data=index.read_image(i))
    return {"image": image, "tokens": tokens[i]}
  return read
