"""A two-tower data set from the user's files: ``data.*`` config keys -> train records, test split, classes.

Two sources (``data.embeddings`` empty or not):

* images: a folder of images with a captions file (``data.dir`` / ``data.captions``, see
  ``captions``; a CSV file's layout, jaxlab's or open_clip's, from ``data.csv_*``, see
  ``csv_layout``); images are decoded and resized as batches need them (``images``), captions are
  tokenized up front by a tokenizer trained on the training captions or given
  (``data.tokenizer``, see ``tokenizer``), which is also saved into the run's workdir;
* precomputed paired embeddings (``data.dir`` / ``data.embeddings``, see ``embeddings``), read
  row by row from memory-mapped ``.npy`` files (or from an ``.npz`` / Parquet file in memory).

The held-out split (``split``) is decoded into memory for evaluation. With a ``label`` column,
classes are the sorted distinct labels; their zero-shot "prompts" are the class names put into
``eval.templates`` (images), or the mean raw text embedding of each class's training rows
(embeddings: there is no text to put a class name into).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping

import numpy as np

from jaxlab.errors import InputError, check_int
from jaxlab.ot_clip.data import tokenizer as tokenizer_lib
from jaxlab.ot_clip.data.captions import read_captions
from jaxlab.ot_clip.data.csv_layout import csv_layout
from jaxlab.ot_clip.data.embeddings import EmbeddingTable, check_finite_rows, read_embeddings
from jaxlab.ot_clip.data.fingerprint import captions_fingerprint, embeddings_fingerprint
from jaxlab.ot_clip.data.images import decode_image
from jaxlab.ot_clip.data.split import split_rows
from jaxlab.data_fingerprint import FINGERPRINT_FILE, fingerprint_text
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  import grain

TOKENIZER_FILE = "tokenizer.json"  # in the run's workdir
ROWS_PER_READ = 4096  # embedding rows per read when averaging a class's text embeddings


@dataclasses.dataclass(frozen=True)
class Pairs:
  """A paired data set, split and ready for the two-tower task.

  Attributes:
    kind: ``"images"`` or ``"embeddings"``.
    text_key: the batch key of the texts: ``"tokens"`` (ids) or ``"text"`` (embeddings).
    train: a ``grain.MapDataset`` of training pairs, element ``i`` ``{"image": ..., text_key: ...}``.
    test: the held-out pairs in memory: ``"image"``, ``text_key`` and, with labels, ``"label"``
      (class ids [N_test] int32).
    classes: the class names (empty without a label column).
    class_texts: text-tower inputs per class, ``[classes, prompts, ...]``, whose embeddings are
      averaged into the class embedding; None without labels.
    model_kwargs: ``TwoTower`` arguments the data fixes (``vocab_size`` or ``text_embedding_dim``).
    files: ``{name: text}`` the trainer writes into the workdir and a resume must find unchanged: the data's
      fingerprint (``jaxlab.ot_clip.data.fingerprint``) and the tokenizer.
    tokenizer: the ``tokenizers.Tokenizer`` (images) or None.
    description: one line for the summary table.
  """
  kind: str
  text_key: str
  train: grain.MapDataset
  test: dict[str, np.ndarray]
  classes: tuple[str, ...]
  class_texts: np.ndarray | None
  model_kwargs: dict[str, Any]
  files: dict[str, str]
  tokenizer: Any
  description: str


def resolve(data: Mapping[str, Any], key: str) -> str:
  """``data.<key>`` as a path: relative paths are under ``data.dir``; an empty result is an InputError."""
  name = data.get(key, "")
  if not isinstance(name, str):
    raise InputError(f"data.{key}={name!r}; allowed: a path (str)")
  path = os.path.join(data.get("dir", "") or "", name)
  if not name or not path:
    raise InputError(f"data.{key} is empty; set --config.data.dir=<data folder> (and data.{key}, relative to it)")
  return path


def load_pairs(data: Mapping[str, Any], templates: tuple[str, ...]) -> Pairs:
  """Reads, checks and splits the data ``data`` names.

  Args:
    data: the config's ``data`` block, a plain mapping (a ConfigDict or a dict; keys in ``configs/clip_files.py``).
    templates: ``eval.templates``, e.g. ``("a photo of a {}",)`` (images with labels only).

  Raises:
    InputError: one line naming the file or key, the bad value and what is allowed.
  """
  if not data.get("dir", "") and not data.get("embeddings", ""):
    raise InputError("data.dir is empty; set --config.data.dir=<folder of the images and captions file, or of the "
                     "embeddings>")
  if data.get("embeddings", ""):
    return _embedding_pairs(data)
  return _image_pairs(data, templates)


def _class_ids(labels: Any, file: str) -> tuple[tuple[str, ...], np.ndarray]:
  names, ids = np.unique(np.asarray(labels), return_inverse=True)
  if len(names) < 2:
    raise InputError(f"{file}: the label column has {len(names)} class ({str(names[0])!r}); zero-shot evaluation needs at "
                     "least 2 (or drop the column)")
  return tuple(str(n) for n in names), ids.astype(np.int32)


def _records(rows: np.ndarray, read: Callable[[int], dict[str, np.ndarray]]) -> grain.MapDataset:
  return grain.MapDataset.range(len(rows)).map(lambda i: read(int(rows[i])))


def _image_pairs(data: Mapping[str, Any], templates: tuple[str, ...]) -> Pairs:
  table = read_captions(resolve(data, "captions"), layout=csv_layout(data))
  size = check_int(data["image_size"], "data.image_size", 1, got=True)
  train, test = split_rows(len(table.images), data["split"], data["test_fraction"], data["split_seed"], table.splits,
                           table.file, labels=table.labels)
  if data["tokenizer"]:
    tokenizer = tokenizer_lib.load_tokenizer(resolve(data, "tokenizer"))
  else:
    tokenizer = tokenizer_lib.train_tokenizer([table.captions[i] for i in train], data["vocab_size"])
  tokens, truncated = tokenizer_lib.encode(tokenizer, table.captions, data["max_tokens"])

  def read(row: int) -> dict[str, np.ndarray]:
    return {"image": decode_image(table.images[row], size, table.where(row)), "tokens": tokens[row]}

  test_set = {"image": np.stack([read(int(r))["image"] for r in test]), "tokens": tokens[test]}
  classes, class_texts = (), None
  if table.labels is not None:
    classes, ids = _class_ids(table.labels, table.file)
    test_set["label"] = ids[test]
    class_texts = _class_prompts(tokenizer, classes, templates, data["max_tokens"], table.file)
  description = (f"clip_files: {len(train)} train / {len(test)} test image-caption pairs from {table.file}, "
                 f"{len(classes)} classes, vocabulary {tokenizer.get_vocab_size()}, {truncated} captions truncated"
                 + (f", columns ignored: {', '.join(c or repr(c) for c in table.ignored)}" if table.ignored else ""))
  return Pairs(kind="images", text_key="tokens", train=_records(train, read), test=test_set, classes=classes,
               class_texts=class_texts, model_kwargs={"vocab_size": tokenizer_lib.vocab_size(tokenizer)},
               files={FINGERPRINT_FILE: fingerprint_text(captions_fingerprint(table)),
                      TOKENIZER_FILE: tokenizer.to_str(pretty=True)}, tokenizer=tokenizer, description=description)


def _class_prompts(tokenizer: Any, classes: tuple[str, ...], templates: tuple[str, ...], max_tokens: int,
                   file: str) -> np.ndarray:
  """Token ids [classes, templates, max_tokens] of every class name in every template."""
  if not templates or any(not isinstance(t, str) or t.count("{}") != 1 for t in templates):
    raise InputError(f"eval.templates={tuple(templates)!r}; allowed: a non-empty tuple of strings with one '{{}}' "
                     "each, where the class name goes")
  for name in classes:
    if not tokenizer_lib.known_token_count(tokenizer, name):
      raise InputError(f"{file}: class {name!r} has no token the tokenizer knows, so its zero-shot prompt would be "
                       "empty; allowed: class names whose words occur in the training captions (or data.tokenizer "
                       "that knows them)")
  ids, _ = tokenizer_lib.encode(tokenizer, [t.format(name) for name in classes for t in templates], max_tokens)
  return ids.reshape(len(classes), len(templates), max_tokens)


def _embedding_pairs(data: Mapping[str, Any]) -> Pairs:
  table = read_embeddings(resolve(data, "embeddings"))
  train, test = split_rows(len(table), data["split"], data["test_fraction"], data["split_seed"], table.splits, table.file,
                           labels=table.labels)

  def rows_of(column: str, rows: np.ndarray) -> np.ndarray:
    values = np.asarray(getattr(table, column)[rows], np.float32)
    check_finite_rows(table, rows, column, values)
    return values

  def read(row: int) -> dict[str, np.ndarray]:
    one = np.array([row])
    return {"image": rows_of("image", one)[0], "text": rows_of("text", one)[0]}

  test_set = {"image": rows_of("image", test), "text": rows_of("text", test)}
  classes, class_texts = (), None
  if table.labels is not None:
    classes, ids = _class_ids(table.labels, table.file)
    test_set["label"] = ids[test]
    class_texts = _class_mean_texts(table, ids, train, len(classes), rows_of)
  description = (f"clip_files: {len(train)} train / {len(test)} test embedding pairs from {table.file}, "
                 f"{len(classes)} classes")
  return Pairs(kind="embeddings", text_key="text", train=_records(train, read), test=test_set, classes=classes,
               class_texts=class_texts, model_kwargs={"text_embedding_dim": int(table.text.shape[1])},
               files={FINGERPRINT_FILE: fingerprint_text(embeddings_fingerprint(table))}, tokenizer=None,
               description=description)


def _class_mean_texts(table: EmbeddingTable, ids: np.ndarray, train: np.ndarray, num_classes: int,
                      rows_of: Callable[[str, np.ndarray], np.ndarray]) -> np.ndarray:
  """[classes, 1, D_text]: the mean raw text embedding of each class's training rows, read in chunks."""
  sums = np.zeros((num_classes, table.text.shape[1]), np.float64)
  counts = np.zeros(num_classes, np.int64)
  for start in range(0, len(train), ROWS_PER_READ):
    rows = train[start:start + ROWS_PER_READ]
    np.add.at(sums, ids[rows], rows_of("text", rows))
    counts += np.bincount(ids[rows], minlength=num_classes)
  if counts.min() == 0:
    name = np.unique(table.labels)[int(np.flatnonzero(counts == 0)[0])]
    raise InputError(f"{table.file}: class {str(name)!r} has no training row, so it has no text embedding to classify "
                     "by; allowed: every class in the training split")
  return (sums / counts[:, None]).astype(np.float32)[:, None, :]
