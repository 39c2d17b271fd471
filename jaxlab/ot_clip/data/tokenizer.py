"""Captions -> token ids with a tokenizer of Hugging Face's ``tokenizers`` library (no download).

Either a small word-level tokenizer trained on the training captions at run start
(``train_tokenizer``: NFKC + lower-casing, split on whitespace and punctuation, the most frequent
words up to ``vocab_size``, ``[UNK]`` for the rest; deterministic, so a resumed run trains the
same one) or a user's ``tokenizer.json`` (``load_tokenizer``, any model the library saves: BPE,
WordPiece, Unigram, ...). Ids are shifted by one so that 0 is padding, which the text tower
masks (``jaxlab.ot_clip.two_tower.PAD_ID``); a caption longer than ``max_tokens`` keeps its
first ``max_tokens`` ids, as CLIP truncates to its context length.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from jaxlab.errors import InputError, check_int
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

UNK_TOKEN = "[UNK]"


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Tokenizer:
  """A word-level tokenizer of the at most ``vocab_size`` most frequent words of ``texts`` (with ``[UNK]``).

  Ties in frequency are broken by the word, so the result depends on ``texts`` only.
  """
  check_int(vocab_size, "data.vocab_size", 2, got=True)
  tokenizer = Tokenizer(models.WordLevel(unk_token=UNK_TOKEN))
  tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
  tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
  trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=[UNK_TOKEN],
                                      show_progress=False)
  tokenizer.train_from_iterator(list(texts), trainer)
  return tokenizer


def load_tokenizer(path: str, key: str = "data.tokenizer") -> Tokenizer:
  """A ``tokenizer.json`` saved by the ``tokenizers`` library (``Tokenizer.save``).

  Raises:
    InputError: the file does not exist or the library cannot read it.
  """
  if not os.path.isfile(path):
    raise InputError(f"{key}: tokenizer file {path!r} does not exist; allowed: a tokenizer.json saved by the "
                     "tokenizers library, or '' to train one on the training captions")
  try:
    return Tokenizer.from_file(path)
  except Exception as e:  # the library raises a bare Exception for malformed JSON or an unknown model
    raise InputError(f"{key}: {path!r} is not a tokenizer.json the tokenizers library can read "
                     f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def vocab_size(tokenizer: Tokenizer) -> int:
  """The text tower's embedding rows: the tokenizer's ids plus padding (id 0)."""
  return tokenizer.get_vocab_size(with_added_tokens=True) + 1


def encode(tokenizer: Tokenizer, texts: Sequence[str], max_tokens: int) -> tuple[np.ndarray, int]:
  """(ids [len(texts), max_tokens] int32 with 0 as padding, number of texts truncated).

  The tokenizer's own padding and truncation settings are turned off on a copy: lengths are set
  here, and padding must be id 0.
  """
  max_tokens = check_int(max_tokens, "data.max_tokens", 1, got=True)
  tokenizer = Tokenizer.from_str(tokenizer.to_str())
  tokenizer.no_padding()
  tokenizer.no_truncation()
  out = np.zeros((len(texts), max_tokens), np.int32)
  truncated = 0
  for i, encoding in enumerate(tokenizer.encode_batch(list(texts))):
    ids = encoding.ids[:max_tokens]
    truncated += len(encoding.ids) > max_tokens
    out[i, :len(ids)] = np.asarray(ids, np.int64) + 1
  return out, truncated


def known_token_count(tokenizer: Tokenizer, text: str) -> int:
  """How many tokens of ``text`` (without special tokens) the tokenizer knows (not ``[UNK]``)."""
  unk = tokenizer.token_to_id(UNK_TOKEN)
  return sum(i != unk for i in tokenizer.encode(text, add_special_tokens=False).ids)
