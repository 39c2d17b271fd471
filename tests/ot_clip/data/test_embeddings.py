"""Paired embeddings from a folder of .npy files, an .npz and a Parquet file: the same table."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jaxlab.ot_clip.data.embeddings import read_embeddings
from jaxlab.ot_clip.data.pairs import load_pairs
from tests.support.clip_data import data_config, embedding_arrays
from tests.support.tolerances import dot_atol


def write_layout(tmp_path, layout, arrays):
  if layout == "npy":
    folder = tmp_path / "emb"
    folder.mkdir()
    for name, a in arrays.items():
      np.save(folder / f"{name}.npy", a)
    return str(folder)
  if layout == "npz":
    np.savez(tmp_path / "emb.npz", **arrays)
    return str(tmp_path / "emb.npz")
  columns = {n: (pa.array(list(a)) if a.ndim == 2 else pa.array(a)) for n, a in arrays.items()}
  pq.write_table(pa.table(columns), tmp_path / "emb.parquet")
  return str(tmp_path / "emb.parquet")


@pytest.mark.parametrize("layout", ["npy", "npz", "parquet"])
def test_every_layout_reads_the_same_arrays(tmp_path, layout):
  arrays = embedding_arrays(n=12)
  table = read_embeddings(write_layout(tmp_path, layout, arrays))
  assert len(table) == 12 and table.splits is None
  np.testing.assert_array_equal(table.image, arrays["image"])  # stored and read back in float32: exact
  np.testing.assert_array_equal(table.text, arrays["text"])
  np.testing.assert_array_equal(table.labels, arrays["label"])
  if layout == "npy":
    assert isinstance(table.image, np.memmap)  # rows are read from disk as batches need them


def test_pairs_from_embeddings_split_and_average_class_texts(tmp_path):
  arrays = embedding_arrays(n=40)
  arrays["split"] = np.array(["test" if i % 5 == 0 else "train" for i in range(40)])
  path = write_layout(tmp_path, "npz", arrays)
  pairs = load_pairs(data_config(dir=str(tmp_path), embeddings="emb.npz", split="column"), ("{}",))
  assert pairs.kind == "embeddings" and pairs.text_key == "text"
  assert set(pairs.files) == {"data_fingerprint.json"}  # what it trains on; no tokenizer (texts are embedded)
  assert pairs.model_kwargs == {"text_embedding_dim": 5} and pairs.classes == ("0", "1", "2", "3")
  test_rows = np.arange(0, 40, 5)
  np.testing.assert_array_equal(pairs.test["image"], arrays["image"][test_rows])
  np.testing.assert_array_equal(pairs.test["label"], arrays["label"][test_rows])
  train_rows = np.setdiff1d(np.arange(40), test_rows)
  np.testing.assert_array_equal(pairs.train[0]["text"], arrays["text"][train_rows[0]])
  members = [arrays["text"][train_rows[arrays["label"][train_rows] == k]] for k in range(4)]
  expected = np.stack([m.mean(0) for m in members])
  # A mean of 8 float32 values summed in float32 (numpy) vs float64 (the reader): a sum and a division.
  bound = np.stack([dot_atol(len(m) + 1, 1.0) * np.abs(m).mean(0) for m in members])
  assert np.all(np.abs(pairs.class_texts[:, 0] - expected) <= bound)
  assert path.endswith("emb.npz")
