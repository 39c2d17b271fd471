"""Captions -> ids: a deterministic word-level tokenizer, 0 as padding, a user's tokenizer.json."""

import numpy as np

from jaxlab.ot_clip.data import tokenizer as tok

CAPTIONS = ["a red square", "a blue bar", "A red bar!", "zz yy xx", "a green square"]


def test_trained_tokenizer_is_a_function_of_the_captions():
  first = tok.train_tokenizer(CAPTIONS, vocab_size=100).to_str()
  assert tok.train_tokenizer(list(CAPTIONS), vocab_size=100).to_str() == first  # ties broken by the word
  small = tok.train_tokenizer(CAPTIONS, vocab_size=4)
  assert small.get_vocab_size() == 4  # [UNK] and the 3 most frequent words


def test_encode_pads_with_zero_shifts_ids_and_counts_truncation():
  t = tok.train_tokenizer(CAPTIONS, vocab_size=100)
  ids, truncated = tok.encode(t, ["a red square", "A RED square and more"], max_tokens=4)
  assert ids.dtype == np.int32 and ids.shape == (2, 4)
  assert ids[0, 3] == 0 and np.all(ids[0, :3] > 0)  # padding is 0
  assert ids[0, :3].tolist() == ids[1, :3].tolist()  # lower-cased
  unk = t.token_to_id(tok.UNK_TOKEN) + 1
  assert ids[1, 3] == unk and truncated == 1  # "and" is unknown; "more" was cut
  assert tok.vocab_size(t) == t.get_vocab_size() + 1
  assert tok.known_token_count(t, "red") == 1 and tok.known_token_count(t, "purple") == 0


def test_a_saved_tokenizer_loads_with_the_same_ids(tmp_path):
  t = tok.train_tokenizer(CAPTIONS, vocab_size=100)
  t.save(str(tmp_path / "tokenizer.json"))
  loaded = tok.load_tokenizer(str(tmp_path / "tokenizer.json"))
  assert np.array_equal(tok.encode(loaded, CAPTIONS, 6)[0], tok.encode(t, CAPTIONS, 6)[0])
