"""Shard names from a brace pattern, as webdataset and open_clip's ``--train-data`` expand them.

``"data/{00000..00099}.tar"`` is 100 names; several patterns joined by ``::`` are expanded one
after the other (``"a/{0..9}.tar::b/{0..4}.tar"``), as webdataset's ``expand_urls`` splits them.
The expansion is bash's, as the ``braceexpand`` package (which webdataset uses) implements it:

* ``{a..b}`` and ``{a..b..step}``: integers from ``a`` to ``b`` inclusive, in either direction,
  negative allowed; when either end is written with a leading zero, every number is zero-padded
  to the wider end's width (``{07..10}`` -> ``07 08 09 10``);
* ``{x..y}``: a letter range (``A-Z`` then ``a-z``);
* ``{p,q,...}``: each alternative (which may be empty or hold braces of its own);
* braces holding none of these stay as they are (``{x}`` is the literal ``{x}``), their inside
  expanded; a pattern's parts combine as a product, leftmost slowest.

Unlike ``braceexpand`` a backslash is an ordinary character (no escaping), and unbalanced braces
are an ``InputError`` naming the config key. The names are counted before any is made: a value
standing for more than ``MAX_NAMES`` (a range one digit too wide) is an ``InputError`` with
the count, not a ``MemoryError``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import string
from typing import Union

from jaxlab.errors import InputError

#: Joins several patterns into one value, as open_clip's ``--train-data`` and webdataset take them.
SEPARATOR = "::"
_LETTERS = string.ascii_uppercase + string.ascii_lowercase
_INT_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$")
_CHAR_RANGE = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$")


#: The most names a value may stand for: every shard is indexed at start, and the names are held in memory.
MAX_NAMES = 1_000_000


class _Unbalanced(Exception):
  pass


@dataclasses.dataclass(frozen=True)
class _Range:
  """An integer range's numbers, zero-padded to ``width`` (0: not padded), not expanded until asked."""
  numbers: range
  width: int


# A parsed pattern is a list of parts combined as a product: a literal str, a _Range, a list of
# letters, or alternatives (a tuple of parsed patterns).
_Part = Union[str, _Range, list, tuple]


def expand_braces(pattern: str) -> list[str]:
  """Every name ``pattern`` stands for, in order (see the module docstring).

  Args:
    pattern: e.g. ``"shards/{00000..00009}.tar"``.

  Returns:
    The expanded names; a pattern without braces is itself.

  Raises:
    InputError: unbalanced braces, or more than ``MAX_NAMES`` names (counted before any is made).

  >>> expand_braces("s/{008..011}.tar")
  ['s/008.tar', 's/009.tar', 's/010.tar', 's/011.tar']
  >>> expand_braces("{train,val}-{0..1}.tar")
  ['train-0.tar', 'train-1.tar', 'val-0.tar', 'val-1.tar']
  """
  parsed = _parsed(pattern)
  _check_count(_count(parsed), repr(pattern))
  return _expand(parsed)


def count_braces(pattern: str) -> int:
  """How many names ``pattern`` stands for, counted without making them.

  >>> count_braces("shards/{000000000..999999999}.tar")
  1000000000
  """
  return _count(_parsed(pattern))


def expand_shard_patterns(spec: str, key: str) -> list[str]:
  """The shard names of ``spec``: ``::``-separated brace patterns, each expanded, one after the other.

  Args:
    spec: e.g. ``"a/{0..9}.tar::b/{0..4}.tar"``.
    key: the config key ``spec`` came from, for messages.

  Raises:
    InputError: an empty pattern (an empty ``spec``, or one with an empty part between ``::``),
      unbalanced braces, or more than ``MAX_NAMES`` names in all (counted before any is made),
      naming ``key``.
  """
  if not isinstance(spec, str) or not spec.strip():
    raise InputError(f"{key}={spec!r}; allowed: a brace pattern of .tar shards such as 'shards/{{00000..00099}}.tar' "
                     "(several joined by '::')")
  parsed = []
  for part in spec.split(SEPARATOR):
    if not part.strip():
      raise InputError(f"{key}={spec!r} has an empty pattern between '::'; allowed: patterns joined by '::'")
    try:
      parsed.append(_parsed(part))
    except InputError as e:
      raise InputError(f"{key}: {e}") from None
  _check_count(sum(_count(p) for p in parsed), f"{key}={spec!r}")
  return [name for p in parsed for name in _expand(p)]


def _check_count(count: int, what: str) -> None:
  if count > MAX_NAMES:
    raise InputError(f"{what} stands for {count:,} names; allowed: at most {MAX_NAMES:,} (every shard is indexed "
                     "at start; is a range of the pattern too wide?)")


def _parsed(pattern: str) -> list[_Part]:
  try:
    return _pattern(pattern)
  except _Unbalanced:
    raise InputError(f"{pattern!r} has unbalanced braces; allowed: a brace pattern such as "
                     "'shards/{00000..00099}.tar'") from None


def _pattern(text: str) -> list[_Part]:
  """A pattern: literals and brace groups at depth 0, parsed as the parts of a product."""
  items: list[_Part] = []
  start = depth = 0
  for pos, char in enumerate(text):
    if char == "{":
      if depth == 0 and pos > start:
        items.append(text[start:pos])
      if depth == 0:
        start = pos
      depth += 1
    elif char == "}":
      depth -= 1
      if depth < 0:
        raise _Unbalanced
      if depth == 0:
        inner = text[start + 1:pos]
        group = _expression(inner)
        items.extend([group] if group is not None else ["{", (_pattern(inner),), "}"])
        start = pos + 1
  if depth:
    raise _Unbalanced
  if start < len(text):
    items.append(text[start:])
  return items


def _expression(inner: str) -> _Part | None:
  """A brace group: a range or a comma sequence; None for neither (then it is literal)."""
  match = _INT_RANGE.match(inner)
  if match:
    return _int_range(*match.groups())
  match = _CHAR_RANGE.match(inner)
  if match:
    first, last = _LETTERS.index(match[1]), _LETTERS.index(match[2])
    step = int(match[3] or 1) or 1
    return [_LETTERS[i] for i in (range(first, last + 1, step) if first < last else range(first, last - 1, -step))]
  parts, start, depth = [], 0, 0
  for pos, char in enumerate(inner):
    depth += (char == "{") - (char == "}")
    if char == "," and depth == 0:
      parts.append(inner[start:pos])
      start = pos + 1
  if not parts:
    return None
  parts.append(inner[start:])
  return tuple(_pattern(part) for part in parts)


def _int_range(first: str, last: str, step: str | None) -> _Range:
  padded = any(s.startswith(("0", "-0")) for s in (first, last) if s not in ("0", "-0"))
  width = max(len(first), len(last)) if padded else 0
  a, b, by = int(first), int(last), int(step or 1) or 1
  return _Range(range(a, b + 1, by) if a < b else range(a, b - 1, -by), width)


def _count(parts: list[_Part]) -> int:
  """The names a parsed pattern stands for: the product of its parts' counts."""
  return math.prod(_part_count(p) for p in parts)


def _part_count(part: _Part) -> int:
  if isinstance(part, str):
    return 1
  if isinstance(part, _Range):
    return len(part.numbers)
  if isinstance(part, list):
    return len(part)
  return sum(_count(alternative) for alternative in part)


def _expand(parts: list[_Part]) -> list[str]:
  return ["".join(names) for names in itertools.product(*(_part_names(p) for p in parts))]


def _part_names(part: _Part) -> list[str]:
  if isinstance(part, str):
    return [part]
  if isinstance(part, _Range):
    return [f"{i:0{part.width}d}" for i in part.numbers]
  if isinstance(part, list):
    return part
  return [name for alternative in part for name in _expand(alternative)]
