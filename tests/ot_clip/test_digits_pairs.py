"""Digits caption pairs: vocabulary, held-out prompts, caption swaps, long-tailed subset."""

import numpy as np

from jaxlab.data.digits import load_digits_split
from jaxlab.ot_clip import digits_pairs


def test_held_out_templates_are_not_training_templates_and_tokenise():
  assert not set(digits_pairs.HELD_OUT_TEMPLATES) & set(digits_pairs.TRAIN_TEMPLATES)
  vocab = digits_pairs.build_vocab()
  prompts = digits_pairs.class_prompt_tokens(vocab)
  assert prompts.shape == (10, len(digits_pairs.HELD_OUT_TEMPLATES), digits_pairs.MAX_LEN)
  assert prompts.min() >= 0 and prompts.max() <= len(vocab)
  assert len({tuple(p) for p in prompts.reshape(-1, digits_pairs.MAX_LEN)}) == prompts.shape[0] * prompts.shape[1]


def test_swap_moves_exactly_the_chosen_fraction():
  tokens = np.arange(100)[:, None].repeat(3, 1)
  out, swapped = digits_pairs.swap_captions(tokens, 0.2, np.random.default_rng(0))
  assert swapped.sum() == 20
  assert np.all(out[swapped] != tokens[swapped]) and np.all(out[~swapped] == tokens[~swapped])
  assert sorted(out[swapped, 0]) == sorted(tokens[swapped, 0])  # a permutation of the chosen


def test_long_tailed_subset_has_the_imbalance_and_its_prior():
  labels = np.repeat(np.arange(10), 50)
  idx, prior = digits_pairs.long_tailed_indices(labels, 10.0, np.random.default_rng(0))
  counts = np.bincount(labels[idx], minlength=10)
  assert counts[0] == 50 and counts[-1] == 5
  np.testing.assert_allclose(prior, counts / counts.sum())
  assert np.all(np.diff(counts) <= 0)


def test_digits_split_is_disjoint_and_scaled():
  d = load_digits_split(0.3)
  assert len(d["x_train"]) + len(d["x_test"]) == 1797
  assert d["x_train"].min() >= 0 and d["x_train"].max() <= 1 and d["x_train"].shape[1] == 64
