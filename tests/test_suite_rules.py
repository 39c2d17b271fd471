"""The suite's own rules.

* No Python file under tests/ imports a test module (``test_*.py``) or a ``conftest.py``; what tests
  share lives in tests/support/ or in a conftest fixture. A test module imported by another one runs
  its module-level code twice; a conftest imported as a library is loaded a second time under another name.
* tests/ mirrors the layers: a test of ``jaxlab/<package>`` lives under ``tests/<package>`` (a test of
  a top-level module such as ``jaxlab/main.py``, and of the repository as a whole, directly in tests/;
  a test of a script in ``benchmarks/`` under tests/benchmarks). A test module below the mirror of a
  method package or of the trainer imports that package, its subject; a test that drives a whole run
  through a shipped config or a command lives with the layer that turns a config into a run
  (tests/tasks, tests/experiment) or at the top. Outside tests/support, every Python file is a test
  module, a ``conftest.py`` or an ``__init__.py``.
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
  for source in ("from tests.support.replay_frames import fill", "from tests.support.tolerances import ops_rtol",
                 "from .fixtures import load", "import pytest"):
    assert not imported_test_modules(source, "tests.pde.test_dpot"), source


#: Folders of the repository besides jaxlab/ whose scripts tests/ mirrors.
SCRIPT_FOLDERS = ("benchmarks",)
#: The mirrors of the layer that turns a config into a run: their tests may drive a whole run without importing it.
RUN_LAYERS = ("tasks", "experiment")


def _imported(source: str) -> set[str]:
  """Every module ``source`` imports by absolute name, anywhere in it (``from a import b`` gives a and a.b)."""
  names: set[str] = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      names |= {a.name for a in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
  return names


def layout_offences(tests: pathlib.Path, repo: pathlib.Path) -> list[str]:
  """Each way the tests under ``tests`` leave the layout of the module docstring, one line each."""
  offences = []
  for path in sorted(tests.rglob("*.py")):
    rel = path.relative_to(tests)
    folders = rel.parts[:-1]
    if folders[:1] in (("support",), ("data",)):
      continue
    if not (path.name.startswith("test_") or path.name in ("conftest.py", "__init__.py")):
      offences.append(f"tests/{rel}: a helper; it belongs in tests/support/")
      continue
    if not folders:
      continue
    mirrored = repo.joinpath("jaxlab", *folders)
    if folders[0] in SCRIPT_FOLDERS:
      mirrored, subject = repo.joinpath(*folders), ".".join(folders)
    else:
      subject = ".".join(("jaxlab",) + folders)
    if not mirrored.is_dir():
      offences.append(f"tests/{rel}: {mirrored.relative_to(repo)}/ is not a folder of the repository")
      continue
    if not path.name.startswith("test_") or folders[0] in RUN_LAYERS:
      continue
    imported = _imported(path.read_text(encoding="utf-8"))
    if not any(m == subject or m.startswith(subject + ".") for m in imported):
      offences.append(f"tests/{rel}: imports nothing of {subject}; a test of a whole run belongs in "
                      f"tests/{' or tests/'.join(RUN_LAYERS)}, a test of another package under its mirror")
  return offences


def test_tests_mirror_the_layers():
  offences = layout_offences(TESTS, TESTS.parent)
  assert not offences, "\n".join(offences)


def test_the_layout_check_finds_each_misplaced_file(tmp_path):
  repo = tmp_path
  for folder in ("jaxlab/rl", "jaxlab/tasks", "benchmarks"):
    (repo / folder).mkdir(parents=True)
  files = {
      "tests/rl/test_replay.py": "from jaxlab.rl import replay\n",  # fine: imports its subject
      "tests/rl/test_networks.py": "import jaxlab.rl.networks as n\n",  # fine
      "tests/tasks/test_dqn_cli.py": "def test_run(cli):\n  cli.main()\n",  # fine: the run layer's mirror
      "tests/benchmarks/test_rl_study.py": "from benchmarks import rl_study\n",  # fine
      "tests/test_main.py": "import jaxlab.main\n",  # fine: the top
      "tests/support/cli.py": "import subprocess\n",  # fine: a helper where helpers live
      "tests/rl/test_dqn_cli.py": "def test_run(cli):\n  cli.main()\n",  # a whole run under a method package
      "tests/rl/layouts.py": "X = 1\n",  # a helper beside the tests
      "tests/moe/test_softmoe.py": "import jaxlab.moe\n",  # no jaxlab/moe to mirror
      "tests/benchmarks/test_other.py": "from benchmarks import rl_study\nimport jaxlab.rl\n",  # fine
      "tests/benchmarks/test_plain.py": "import json\n",  # imports no benchmark script
  }
  for name, text in files.items():
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)
  offences = layout_offences(repo / "tests", repo)
  assert [o.split(":")[0] for o in offences] == ["tests/benchmarks/test_plain.py", "tests/moe/test_softmoe.py",
                                                 "tests/rl/layouts.py", "tests/rl/test_dqn_cli.py"], offences


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
