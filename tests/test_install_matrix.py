"""The install lines of the getting-started page are the ones the install matrix ran, and passed.

The matrix itself needs the package index and minutes a cell (``benchmarks/install_matrix.py``);
the suite, offline, checks what can drift: every ``pip install`` line of the page has a cell
installing the same extras and running the same next command, the result file has a passing row
for it on Python 3.11 and 3.12, the versions the page quotes are the ones resolved, and the
table in BUILD_NOTES.md is the one the result file gives.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from benchmarks.install_matrix import CELLS, RECIPES, table

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULT = json.loads((REPO / "benchmarks" / "results" / "install" / "matrix.json").read_text())
GUIDE = (REPO / "docs" / "getting_started.md").read_text()
#: the page's block of one command per use (the accelerator section's lines are the recipe cells)
BLOCK = re.search(r"one command per use.*?```bash\n(.*?)```", GUIDE, re.S).group(1)

#: ``pip install -e ".[extras]"  # then: <next command>`` in the page's install block
LINE = re.compile(r'^pip install -e "?\.(?:\[([\w,]+)\])?"?\s+# (?:then: )?(.*)$', re.M)
GUIDE_LINES = LINE.findall(BLOCK)


def _row(python: str, cell: str) -> dict:
  rows = [r for r in RESULT["rows"] if r["python"].startswith(python + ".") and r["extra"] == cell]
  assert len(rows) == 1, (python, cell, len(rows))
  return rows[0]


def test_the_page_has_its_install_lines():
  assert len(GUIDE_LINES) >= 8, GUIDE_LINES  # core, data, rl, pde, atari, clip_data, notebooks, tensorboard


@pytest.mark.parametrize("extras, then", GUIDE_LINES, ids=[e or "core" for e, _ in GUIDE_LINES])
def test_each_install_line_of_the_page_passed_in_fresh_venvs_on_both_pythons(extras, then):
  cells = [name for name, (installed, _) in CELLS.items() if installed == extras and name not in RECIPES]
  assert len(cells) == 1, (extras, cells)
  steps = CELLS[cells[0]][1]
  config = re.search(r"--config=(\S+)", then)
  if config:  # the page's next command is the one the cell runs
    assert any(f"--config={config.group(1)}" in argv for argv, *_ in steps), (then, steps)
  for python in ("3.11", "3.12"):
    row = _row(python, cells[0])
    assert row["ok"] and row["install"]["rc"] == 0, row


def test_the_jax_versions_the_pages_quote_are_the_resolved_ones():
  newest = _row("3.12", "data")["versions"]["jax"]
  capped = _row("3.12", "rl")["versions"]["jax"]
  assert capped != newest  # gymnax's jax<0.12: the page explains why rl gets another jax
  assert _row("3.11", "rl")["versions"]["jax"] == _row("3.11", "data")["versions"]["jax"]
  for page in (GUIDE, (REPO / "BUILD_NOTES.md").read_text()):
    assert f"{capped} on Python 3.12" in page and newest in page
  # the accelerator recipe keeps jax: first installed stays; rl then -U jax reaches the newest
  first = _row("3.12", "jax_first")
  assert first["ok"] and first["jax_before"] == first["versions"]["jax"] == newest
  upgraded = _row("3.12", "rl+newest_jax")
  assert upgraded["ok"] and upgraded["versions_after_steps"]["jax"] == newest
  together = _row("3.12", "rl_with_jax")
  assert together["ok"] and together["versions"]["jax"] == capped


def test_the_build_notes_table_is_the_result_files():
  notes = (REPO / "BUILD_NOTES.md").read_text()
  block = re.search(r"<!-- install-matrix:.*?-->\n(.*?)\n<!-- /install-matrix -->", notes, re.S)
  assert block, "BUILD_NOTES.md has no generated install-matrix block"
  assert block.group(1) == table(RESULT), "regenerate: python benchmarks/install_matrix.py --table --out=..."
