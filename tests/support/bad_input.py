"""The one check every bad-input sweep makes (``tests/**/test_bad_input*.py``): one clear line."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from jaxlab.errors import InputError


def assert_one_clear_line(area: str, what: str, call: Callable[[], Any], fragment: str) -> None:
  """``call()`` raises ``InputError`` whose message holds ``fragment`` on a single line.

  A config error may append ml_collections' list of valid keys after its one line; that list
  does not count.
  """
  with pytest.raises(InputError) as info:
    call()
  message = str(info.value)
  assert fragment in message, f"{area} / {what}: {message!r} lacks {fragment!r}"
  assert "\n" not in message.split("Valid keys")[0], message
