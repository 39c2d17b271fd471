"""The held-out split: seeded and stratified by label, or the file's split column."""

import numpy as np

from jaxlab.ot_clip.data.split import split_rows


def test_fraction_split_is_seeded_stratified_and_a_partition():
  labels = ["a"] * 10 + ["b"] * 20 + ["c"] * 5
  train, test = split_rows(35, "fraction", 0.2, 3, None, "f", labels=labels)
  again = split_rows(35, "fraction", 0.2, 3, None, "f", labels=labels)
  assert np.array_equal(train, again[0]) and np.array_equal(test, again[1])
  assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(35))
  held = np.asarray(labels)[test]
  assert [int(np.sum(held == c)) for c in "abc"] == [2, 4, 1]  # round(0.2 n) of each class
  other = split_rows(35, "fraction", 0.2, 4, None, "f", labels=labels)[1]
  assert not np.array_equal(test, other)  # the seed matters


def test_fraction_split_without_labels_and_column_split():
  train, test = split_rows(10, "fraction", 0.3, 0, None, "f")
  assert len(test) == 3 and len(train) == 7 and not set(train) & set(test)
  train, test = split_rows(4, "column", 0.3, 0, ["train", "test", "train", "test"], "f")
  assert train.tolist() == [0, 2] and test.tolist() == [1, 3]
