"""How much of its tolerance each float comparison uses: the audit behind ``tests/support/tolerances.py``.

With ``JAXLAB_TOLERANCE_LOG=FILE`` set, ``tests/conftest.py`` wraps ``np.testing.assert_allclose``
and ``chex.assert_trees_all_close`` so that every call appends one JSON line to FILE: the calling
test's file and line and ``used = max |actual - desired| / (atol + rtol |desired|)``. A comparison
that uses a large share of its tolerance on one machine is the one that fails on another; run the
suite under several XLA:CPU instruction sets (``XLA_FLAGS=--xla_cpu_max_isa=AVX2`` and so on) and
summarise with ``python tests/support/tolerance_log.py FILE [FILE ...]``.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from typing import Any

import numpy as np


def _used(actual: Any, desired: Any, rtol: float, atol: float) -> float:
  a = np.asarray(actual, np.float64)
  d = np.broadcast_to(np.asarray(desired, np.float64), a.shape)
  same = (a == d) | (np.isnan(a) & np.isnan(d))
  err = np.where(same, 0.0, np.abs(a - d))
  allowed = atol + rtol * np.abs(d)
  with np.errstate(divide="ignore", invalid="ignore"):
    used = np.where(err == 0, 0.0, np.where(allowed > 0, err / allowed, np.inf))
  return float(np.max(used)) if used.size else 0.0


def _caller() -> str:
  frame = sys._getframe(2)
  while frame is not None:
    name = frame.f_code.co_filename
    if f"{os.sep}tests{os.sep}" in name and not name.endswith("tolerance_log.py"):
      return f"{name[name.rindex(os.sep + 'tests' + os.sep) + 1:]}:{frame.f_lineno}"
    frame = frame.f_back
  return "?"


def install(path: str) -> None:
  """Wraps the two comparison functions so that each call logs its use of the tolerance."""
  import chex  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel

  def log(site: str, used: float) -> None:
    with open(path, "a", encoding="utf-8") as f:
      f.write(json.dumps({"site": site, "used": used}) + "\n")

  original_allclose = np.testing.assert_allclose

  def assert_allclose(actual, desired, rtol=1e-7, atol=0, *args, **kwargs):
    try:
      log(_caller(), _used(actual, desired, rtol, atol))
    except (TypeError, ValueError):
      pass
    return original_allclose(actual, desired, rtol, atol, *args, **kwargs)

  original_trees = chex.assert_trees_all_close

  def assert_trees_all_close(*trees, rtol=1e-6, atol=0.0):
    site = _caller()
    try:
      pairs = zip(jax.tree.leaves(trees[0]), *(jax.tree.leaves(t) for t in trees[1:]))
      log(site, max((_used(b, a, rtol, atol) for a, *rest in pairs for b in rest), default=0.0))
    except (TypeError, ValueError):
      pass
    return original_trees(*trees, rtol=rtol, atol=atol)

  np.testing.assert_allclose = assert_allclose
  chex.assert_trees_all_close = assert_trees_all_close


def summarise(paths: list[str], top: int = 40) -> None:
  """Per site, the largest share of its tolerance used in any of the logs, largest first."""
  worst: dict[str, float] = collections.defaultdict(float)
  for path in paths:
    with open(path, encoding="utf-8") as f:
      for line in f:
        row = json.loads(line)
        worst[row["site"]] = max(worst[row["site"]], row["used"])
  print(f"{len(worst)} comparison sites; the {top} that use most of their tolerance:")
  for site, used in sorted(worst.items(), key=lambda kv: -kv[1])[:top]:
    print(f"  {used:9.3g}  {site}")


if __name__ == "__main__":
  summarise(sys.argv[1:])
