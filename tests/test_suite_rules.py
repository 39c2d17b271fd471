"""The suite's own rules.

* No Python file under tests/ imports a test module (``test_*.py``) or a ``conftest.py``; what tests
  share lives in tests/support/ (or a helper module beside them) or in a conftest fixture. A test
  module imported by another one runs its module-level code twice; a conftest imported as a library is
  loaded a second time under another name.
* A test that compiles a program "as users get it" (``tests.support.xla.AS_USERS_COMPILE``) gets what
  XLA compiles without the suite's compile-time flags.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

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


# A program whose fusions the suite's flags change (XLA:CPU's two fusion code generators fuse a softmax differently).
SOFTMAX = "import jax\nlowered = jax.jit(lambda x: jax.nn.softmax(x, -1)).lower(jax.numpy.ones((64, 32)))\n"


def _instructions(hlo_text: str) -> list[str]:
  """A compiled HLO module's computations, without source metadata (file names, lines and stack frames)."""
  return [re.sub(r", metadata=\{[^}]*\}", "", line) for line in hlo_text.splitlines()
          if line.startswith(("%", " ", "ENTRY", "}"))]


def test_as_users_compile_gives_the_program_xla_compiles_without_the_suites_flags(cli):
  from tests.support.xla import AS_USERS_COMPILE  # pylint: disable=import-outside-toplevel
  namespace: dict = {}
  exec(SOFTMAX, namespace)  # pylint: disable=exec-used
  pinned = _instructions(namespace["lowered"].compile(AS_USERS_COMPILE).as_text())
  assert _instructions(namespace["lowered"].compile().as_text()) != pinned  # the suite's flags change this program
  plain = cli.run([sys.executable, "-c", SOFTMAX + "print(lowered.compile().as_text())"], env={"XLA_FLAGS": None})
  assert plain.returncode == 0, plain.stderr[-2000:]
  assert pinned and _instructions(plain.stdout) == pinned
