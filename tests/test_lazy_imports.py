"""Importing a method package imports no large library that only some of its functions use.

``import jaxlab.ot_clip`` imports no ott-jax (nor equinox, jaxopt, scipy, which ott brings): its
Sinkhorn is imported by the functions that call it (``use_ott=True``, ``implicit=True``). ``import
jaxlab.pde.data`` imports no exponax: reading the field's data files needs none, generating does.
Each check runs in a fresh process (what a module imports shows in ``sys.modules``).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _imported_after(code: str, names: list[str]) -> list[str]:
  """Which of ``names`` (top-level packages) are in ``sys.modules`` after running ``code`` in a fresh process."""
  probe = f"import json, sys\n{code}\nprint(json.dumps([n for n in {names!r} if n in sys.modules]))"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
  p = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr
  return json.loads(p.stdout.splitlines()[-1])


@pytest.mark.parametrize("module, absent", [("jaxlab.ot_clip", ["ott", "equinox", "jaxopt", "scipy"]),
                                            ("jaxlab.pde.data", ["exponax"])])
def test_importing_a_package_imports_none_of_its_function_level_libraries(module, absent):
  assert _imported_after(f"import {module}", absent) == []


def test_ott_is_imported_by_the_function_that_uses_it():
  # the other side of the first test: the same probe sees ott once a function solves with it
  code = ("import jax.numpy as jnp\nfrom jaxlab.ot_clip.plans import sinkhorn_log_plan\n"
          "sinkhorn_log_plan(jnp.eye(3), 0.1, use_ott=True)")
  assert _imported_after(code, ["ott"]) == ["ott"]


def test_the_build_notes_import_table_is_the_result_files():
  from benchmarks.import_times import table
  result = json.loads((REPO / "benchmarks" / "results" / "install" / "import_times.json").read_text())
  notes = (REPO / "BUILD_NOTES.md").read_text()
  block = re.search(r"<!-- import-times:.*?-->\n(.*?)\n<!-- /import-times -->", notes, re.S)
  assert block, "BUILD_NOTES.md has no generated import-times block"
  assert block.group(1) == table(result), "regenerate: python benchmarks/import_times.py --table --out=..."
  rows = {r["package"]: r for r in result["rows"]}
  assert "ott" in rows["jaxlab.ot_clip"]["large_before"] and "ott" not in rows["jaxlab.ot_clip"]["large_after"]
