"""Shard brace patterns expand as the braceexpand package (webdataset's, open_clip's) expands them."""

import braceexpand
import pytest

from jaxlab.errors import InputError
from jaxlab.ot_clip.data.brace import MAX_NAMES, count_braces, expand_braces, expand_shard_patterns

PATTERNS = [
    "data/{00000..00012}.tar", "shard-{0..11}.tar", "{07..10}", "{4..1}", "{2..-1}", "{-05..3}", "{-0..2}",
    "{00..-03}", "{0..10..3}", "{10..0..3}", "{0..0}", "{a..c}", "{Z..b}", "{a..g..2}", "index{,.backup}",
    "python{2.{5..7},3.{2,3}}", "a{b{c,d}e}f", "{a,{b,c}}z", "{,}", "x{}y", "{x}", "{1,2}{a..b}",
    "s/{0..1}/{000..002}.tar", "plain.tar", "laion/{000000..000099}.tar",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_expansion_is_braceexpands(pattern):
  assert expand_braces(pattern) == list(braceexpand.braceexpand(pattern))
  assert count_braces(pattern) == len(expand_braces(pattern))


def test_names_are_counted_before_they_are_made():
  assert count_braces("{0..999}/{0000..9999}.tar::x") == 10_000_000  # counted, none made
  assert len(expand_shard_patterns(f"{{1..{MAX_NAMES}}}", "data.train_shards")) == MAX_NAMES
  with pytest.raises(InputError, match=r"^data.train_shards='a/\{1..1000000\}.tar::b.tar' stands for 1,000,001 names; "
                                       r"allowed: at most 1,000,000 \(every shard is indexed at start"):
    expand_shard_patterns("a/{1..1000000}.tar::b.tar", "data.train_shards")
  with pytest.raises(InputError, match=r"^'\{0..9\}\{0..9\}\{0..9\}\{0..9\}\{0..9\}\{0..9\}\{0..9\}' stands for "
                                       "10,000,000 names"):
    expand_braces("{0..9}" * 7)


def test_zero_padding_and_order():
  assert expand_braces("{0008..0011}.tar") == ["0008.tar", "0009.tar", "0010.tar", "0011.tar"]
  assert expand_braces("{8..11}.tar") == ["8.tar", "9.tar", "10.tar", "11.tar"]  # no leading zero: no padding
  assert len(expand_braces("{00000..09999}")) == 10000


def test_double_colon_lists_are_expanded_in_turn():
  assert expand_shard_patterns("a/{0..1}.tar::b/{08..10}.tar", "data.train_shards") == [
      "a/0.tar", "a/1.tar", "b/08.tar", "b/09.tar", "b/10.tar"]


@pytest.mark.parametrize("spec, fragment", [
    ("", "data.train_shards=''; allowed: a brace pattern"),
    ("a/{0..1}.tar::", "has an empty pattern between '::'"),
    ("a/{0..1.tar", "data.train_shards: 'a/{0..1.tar' has unbalanced braces"),
    ("a/0..1}.tar", "unbalanced braces"),
])
def test_bad_patterns_are_one_line_naming_the_key(spec, fragment):
  with pytest.raises(InputError) as info:
    expand_shard_patterns(spec, "data.train_shards")
  assert fragment in str(info.value) and "\n" not in str(info.value)
