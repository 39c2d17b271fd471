"""The code blocks a guide page shows, for tests that run a documented command as written."""

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def guide_block(page: str, marker: str, lang: str = "bash") -> str:
  """The one ``lang`` block of ``docs/guides/<page>`` that contains ``marker`` (asserted unique)."""
  path = os.path.join(REPO, "docs", "guides", page)
  with open(path, encoding="utf-8") as f:
    blocks = re.findall(rf"^```{lang}\n(.*?)^```", f.read(), re.S | re.M)
  found = [b for b in blocks if marker in b]
  assert len(found) == 1, f"expected one {lang} block with {marker!r} in {path}, found {len(found)}"
  return found[0]
