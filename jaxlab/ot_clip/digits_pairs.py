"""Image-caption pairs from scikit-learn's 8x8 digits, for a small two-tower study (no download).

Each training image gets a caption from one of the TRAIN_TEMPLATES; zero-shot class prompts use
HELD_OUT_TEMPLATES, which the text encoder never sees in training (their new context words keep
their random embeddings). Also here: caption swaps (noisy correspondences) and a long-tailed
test subset with its class prior.
"""

from __future__ import annotations

import math

import numpy as np

from jaxlab.errors import InputError, check_int, check_probability, check_range

NUM_CLASSES = 10
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
TRAIN_TEMPLATES = ("a photo of the digit {w}", "a handwritten {w}", "the number {n}",
                   "{w} written by hand", "a scan of the numeral {n}", "an image showing a {w}")
HELD_OUT_TEMPLATES = ("a drawing of a {w}", "this is {n}", "a picture of the number {w}",
                      "a blurry {w}")
MAX_LEN = 8


def _caption(template: str, label: int) -> str:
  return template.format(w=WORDS[label], n=str(label))


def build_vocab() -> dict[str, int]:
  """Every word of every template and class name; id 0 is padding."""
  words = sorted({tok for tpl in TRAIN_TEMPLATES + HELD_OUT_TEMPLATES for c in range(NUM_CLASSES)
                  for tok in _caption(tpl, c).split()})
  return {w: i + 1 for i, w in enumerate(words)}


def tokenize(text: str, vocab: dict[str, int], max_len: int = MAX_LEN) -> np.ndarray:
  check_int(max_len, "max_len", 1, got=True)
  unknown = [tok for tok in text.split() if tok not in vocab]
  if unknown:
    raise InputError(f"word {unknown[0]!r} of {text!r} is not in the vocabulary ({len(vocab)} words)")
  ids = [vocab[tok] for tok in text.split()][:max_len]
  return np.array(ids + [0] * (max_len - len(ids)), np.int32)


def caption_tokens(labels: np.ndarray, vocab: dict[str, int], rng: np.random.Generator) -> np.ndarray:
  """One training caption per label, templates drawn uniformly: [N, MAX_LEN] int32."""
  templates = rng.integers(len(TRAIN_TEMPLATES), size=len(labels))
  return np.stack([tokenize(_caption(TRAIN_TEMPLATES[t], int(c)), vocab) for t, c in zip(templates, labels)])


def swap_captions(tokens: np.ndarray, p: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
  """Noisy correspondences: a fraction p of the pairs get another selected pair's caption.

  The selected captions are rotated by one place among themselves, so each one moves. Returns
  (tokens, swapped mask).
  """
  check_probability(p, "p", got=True)
  n = len(tokens)
  chosen = rng.choice(n, size=int(round(p * n)), replace=False)
  out = tokens.copy()
  if len(chosen) > 1:
    out[chosen] = tokens[np.roll(chosen, 1)]
  swapped = np.zeros(n, bool)
  swapped[chosen] = True
  return out, swapped


def class_prompt_tokens(vocab: dict[str, int]) -> np.ndarray:
  """Held-out prompts: [NUM_CLASSES, len(HELD_OUT_TEMPLATES), MAX_LEN] int32."""
  return np.stack([np.stack([tokenize(_caption(t, c), vocab) for t in HELD_OUT_TEMPLATES])
                   for c in range(NUM_CLASSES)])


def long_tailed_indices(labels: np.ndarray, imbalance: float, rng: np.random.Generator,
                        num_classes: int = NUM_CLASSES) -> tuple[np.ndarray, np.ndarray]:
  """Subset with class k keeping n_max * imbalance^(-k / (K - 1)) samples; returns (indices, prior).

  n_max is the smallest class count, so every class can supply its quota (Cui et al., CVPR 2019).
  ``labels`` are class ids in [0, num_classes); every class needs at least one sample.
  """
  check_range(imbalance, "imbalance", 1, math.inf, high_open=True, got=True)
  check_int(num_classes, "num_classes", 2, got=True)
  labels = np.asarray(labels)
  if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
    bad = labels[(labels < 0) | (labels >= num_classes)][0]
    raise InputError(f"long_tailed_indices: label {bad} is outside [0, num_classes={num_classes})")
  counts = np.bincount(labels, minlength=num_classes)
  if counts.min() == 0:
    raise InputError(f"long_tailed_indices: class {int(np.flatnonzero(counts == 0)[0])} has no sample among the "
                     f"{len(labels)} labels; every class needs at least one")
  n_max = counts.min()
  quota = np.maximum(1, np.floor(n_max * imbalance ** (-np.arange(num_classes) / (num_classes - 1)))).astype(int)
  idx = np.concatenate([rng.choice(np.flatnonzero(labels == k), quota[k], replace=False)
                        for k in range(num_classes)])
  return np.sort(idx), quota / quota.sum()
