"""The suite's own rules: no Python file under tests/ imports a test module (``test_*.py``) or a
``conftest.py``; what tests share lives in tests/support/ (or a helper module beside them) or in a
conftest fixture. A test module imported by another one runs its module-level code twice, and pytest
collects what it imports; a conftest imported as a library is loaded a second time under another name.
"""

from __future__ import annotations

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def _is_test_module(dotted: str) -> bool:
  last = dotted.rsplit(".", 1)[-1]
  return last.startswith("test_") or last == "conftest"


def imported_test_modules(source: str, module: str) -> list[str]:
  """The test modules and conftests that ``source`` (the module ``module``, dotted) imports, anywhere in it."""
  package = module.rsplit(".", 1)[0]
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      found += [a.name for a in node.names if any(_is_test_module(p) for p in a.name.split("."))]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: from the module's package, up level - 1 packages
        parent = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        base = ".".join(parent + ([base] if base else []))
      if any(_is_test_module(p) for p in base.split(".")):
        found.append(base)
      else:  # from tests.rl import test_replay_frames
        found += [f"{base}.{a.name}" for a in node.names if _is_test_module(a.name)]
  return found


def _module_name(path: pathlib.Path) -> str:
  return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)


def test_no_file_under_tests_imports_a_test_module_or_a_conftest():
  offenders = {}
  for path in sorted(TESTS.rglob("*.py")):
    if "data" in path.relative_to(TESTS).parts[:1]:
      continue
    imported = imported_test_modules(path.read_text(encoding="utf-8"), _module_name(path))
    if imported:
      offenders[str(path.relative_to(TESTS.parent))] = imported
  assert not offenders, f"move what these import into tests/support/ or a conftest fixture: {offenders}"


def test_the_check_finds_each_form_of_import():
  for source in ("from tests.rl.test_replay_frames import S", "import tests.rl.test_replay_frames",
                 "from tests.moe.conftest import soft_moe_tol", "from tests.rl import test_replay_frames",
                 "def f():\n  from tests.train.test_task_contract import CONTRACT", "from .test_batches import records",
                 "from . import conftest"):
    assert imported_test_modules(source, "tests.ot_clip.data.test_bad_input"), source
  for source in ("from tests.support.replay_frames import fill", "from tests.tolerances import ops_rtol",
                 "from .fixtures import load", "import pytest"):
    assert not imported_test_modules(source, "tests.pde.test_dpot"), source
