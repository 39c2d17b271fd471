"""A missing optional package is one line naming its extra, whichever door the user comes through.

Doors: a module import (an ``ImportError``, so ``try: import ... except ImportError`` keeps working),
a public function, a registry entry and a command-line task. Each runs in a fresh process in which
the package looks not installed (``None`` in ``sys.modules`` makes its import fail as a missing
package's does; nothing is uninstalled). Every import of an optional package in jaxlab goes
through :func:`jaxlab.registry.optional_imports`; the last test reads the source to keep it so.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from jaxlab.registry import EXTRAS

REPO = pathlib.Path(__file__).resolve().parents[1]


def _line(what: str, module: str) -> str:
  return (f"{what} needs the optional package {module!r}, which is not installed: "
          f"pip install 'jaxlab[{EXTRAS[module]}]'")


# (door, the package made missing, code that goes through the door, the expected ``what``)
DOORS = [
    ("function", "gymnax", "import jaxlab.rl\njaxlab.rl.make_env('breakout')", "jaxlab.rl.make_env"),
    ("function", "flashbax", "from jaxlab.rl import make_replay", "jaxlab.rl.make_replay"),
    ("function", "envpool", "from jaxlab.rl.atari import make_atari\nmake_atari('Pong')",
     "Atari backend 'envpool'"),
    ("registry", "ale_py", "from jaxlab.rl.atari import get_backend\nget_backend('ale_py')", "Atari backend 'ale_py'"),
    ("module", "ale_py", "import jaxlab.rl.atari_ale", "jaxlab.rl.atari_ale"),
    ("function", "sklearn", "from jaxlab.data.digits import load_digits_split\nload_digits_split()",
     "jaxlab.data.digits.load_digits_split"),
    ("function", "rliable", "from jaxlab.report import iqm_ci\niqm_ci([[1.0], [2.0]])", "jaxlab.report.iqm_ci"),
    ("function", "rliable", "from jaxlab.rl.atari_scores import iqm_with_ci\niqm_with_ci({'a': [[1.0]]})",
     "jaxlab.rl.atari_scores.iqm_with_ci"),
    ("function", "matplotlib", "from jaxlab.report import plot_curves\nplot_curves([], {}, 'x.png')",
     "jaxlab.report.plot_curves"),
    ("function", "pyarrow", "open('pairs.parquet', 'wb').close()\nfrom jaxlab.ot_clip.data.embeddings import "
     "read_embeddings\nread_embeddings('pairs.parquet')", "reading the Parquet file pairs.parquet"),
    ("function", "exponax", "import jaxlab.pde.data as d\nd.generate(d.dataset_spec('ns_fno', 1, resolution=16))",
     "a generated PDE data set"),
    ("function", "exponax", "import jaxlab.pde.data as d\nd.load_or_generate(d.dataset_spec('ns_fno', 1), 'cache')",
     "a generated PDE data set"),
    ("module", "exponax", "import jaxlab.pde.data.steppers", "jaxlab.pde.data.steppers"),
    ("module", "h5py", "import jaxlab.pde.data.files", "jaxlab.pde.data.files.records"),
    ("module", "gymnax", "import jaxlab.rl.envs", "jaxlab.rl.env_names"),
    ("module", "flashbax", "import jaxlab.rl.replay", "jaxlab.rl.replay"),
    ("module", "grain", "import jaxlab.ot_clip.data.pairs", "jaxlab.ot_clip.data.pairs"),
    ("module", "tokenizers", "import jaxlab.ot_clip.data.tokenizer", "jaxlab.ot_clip.data.tokenizer"),
    ("module", "PIL", "import jaxlab.ot_clip.data.images", "jaxlab.ot_clip.data.images"),
    ("registry", "gymnax", "from jaxlab.tasks import TASKS\nTASKS.get('dqn_minatar')", "task 'dqn_minatar'"),
]

_PROBE = textwrap.dedent("""
    import json, sys
    out = []
    for module, code in json.loads(sys.argv[1]):
      saved = {name: mod for name, mod in sys.modules.items() if name.startswith("jaxlab")}
      for name in saved:  # each door from a fresh import of jaxlab's modules
        del sys.modules[name]
      sys.modules[module] = None  # as if not installed
      try:
        exec(code, {})
        out.append(["no error", ""])
      except BaseException as e:
        out.append([type(e).__name__, str(e), isinstance(e, ImportError), isinstance(e, ValueError),
                    getattr(e, "name", None), e.__cause__ is None and e.__suppress_context__])
      finally:
        del sys.modules[module]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> list:
  """Each door of ``DOORS`` run in one fresh process, its package missing: ``[type, message, ...]``."""
  cwd = tmp_path_factory.mktemp("doors")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
  p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([[m, c] for _, m, c, _ in DOORS])], cwd=cwd,
                     env=env, capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr
  return json.loads(p.stdout.splitlines()[-1])


@pytest.mark.parametrize("i", range(len(DOORS)), ids=[f"{d}: {c.splitlines()[-1]} without {m}"
                                                      for d, m, c, _ in DOORS])
def test_a_missing_package_is_one_line_naming_its_extra(probed, i):
  door, module, _, what = DOORS[i]
  kind, message, *flags = probed[i]
  assert kind == "MissingExtraError", (kind, message)
  assert message == _line(what, module)
  is_import_error, is_value_error, name, no_chain = flags
  assert is_import_error and is_value_error  # except ImportError (imports) and except InputError (the CLI) both catch it
  assert name == module and no_chain  # the original ModuleNotFoundError is not printed after it


def _cli(args: list[str], missing: str, cwd: pathlib.Path, module: str = "jaxlab.main") -> subprocess.CompletedProcess:
  """``python -m <module> <args>`` with ``missing`` looking not installed."""
  code = (f"import runpy, sys\nsys.modules[{missing!r}] = None\nsys.argv = [{module!r}, *{args!r}]\n"
          f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
  env = dict(os.environ, XLA_FLAGS="", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
  return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("config, missing, task", [("digits_mlp:tiny", "sklearn", "digits_classification"),
                                                   ("dqn_minatar:tiny", "gymnax", "dqn_minatar"),
                                                   ("dpot_pde:tiny", "exponax", "pde_operator"),
                                                   ("dqn_atari:tiny", "envpool", "dqn_atari"),
                                                   ("clip_files:tiny", "grain", "clip_files")])
def test_a_command_line_task_without_its_extra_is_one_line_and_leaves_no_workdir(tmp_path, config, missing, task):
  p = _cli([f"--config={config}", f"--workdir={tmp_path / 'run'}"], missing, tmp_path)
  assert p.returncode == 2, p.stderr
  lines = p.stderr.strip().splitlines()
  assert len(lines) == 1, p.stderr
  assert lines[0].startswith("jaxlab: error: ") and lines[0].endswith(
      f"needs the optional package {missing!r}, which is not installed: pip install 'jaxlab[{EXTRAS[missing]}]'")
  assert not (tmp_path / "run").exists()


def test_the_pde_data_command_without_exponax_is_one_line_and_writes_nothing(tmp_path):
  # python -m imports the package jaxlab.pde.data before its __main__: that import must not need exponax
  p = _cli(["--trajectories=1", "--resolution=16", f"--cache_dir={tmp_path / 'cache'}"], "exponax", tmp_path,
           module="jaxlab.pde.data")
  assert p.returncode == 2, p.stderr
  assert p.stderr.strip().splitlines() == ["jaxlab.pde.data: error: " + _line("a generated PDE data set", "exponax")]
  assert not (tmp_path / "cache").exists()


def test_the_report_without_matplotlib_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
  from jaxlab import report
  workdir = tmp_path / "run"
  workdir.mkdir()
  (workdir / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
  monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
  assert report.main([str(workdir), f"--out={tmp_path / 'out' / 'r'}"]) == 2
  assert capsys.readouterr().err == ("jaxlab.report: error: " + _line("the report's plot (--no_plot skips it)",
                                                                     "matplotlib") + "\n")
  assert not (tmp_path / "out").exists()
  assert report.main([str(workdir), f"--out={tmp_path / 'out' / 'r'}", "--no_plot"]) == 0


def _guarded(tree: ast.Module) -> set[int]:
  """Line numbers of the imports inside ``with optional_imports(...)`` or a ``try`` that catches ImportError."""
  lines = set()
  for node in ast.walk(tree):
    inside = []
    if isinstance(node, ast.With) and any(isinstance(i.context_expr, ast.Call) and "optional_imports" in
                                          ast.unparse(i.context_expr.func) for i in node.items):
      inside = node.body
    elif isinstance(node, ast.Try) and any(h.type is not None and "ImportError" in ast.unparse(h.type)
                                           for h in node.handlers):
      inside = node.body
    for stmt in inside:
      lines.update(n.lineno for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom)))
  return lines


def _optional(node: ast.Import | ast.ImportFrom) -> set[str]:
  names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] * (node.level == 0)
  return {n.split(".")[0] for n in names} & set(EXTRAS)


def test_every_import_of_an_optional_package_goes_through_optional_imports():
  """An optional package imported bare would be a bare ModuleNotFoundError again. Allowed besides the
  block: an import under ``try/except ImportError`` (a fallback), and a package the module already
  imports at its top inside the block (so it is installed when the function runs)."""
  bare = []
  for path in sorted((REPO / "jaxlab").rglob("*.py")):
    tree = ast.parse(path.read_text(), str(path))
    guarded = _guarded(tree)
    at_top = set().union(*(_optional(n) for stmt in tree.body if isinstance(stmt, ast.With)
                           for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno in guarded))
    for node in ast.walk(tree):
      if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in guarded and _optional(node) - at_top:
        bare.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
  assert not bare, "import these inside `with optional_imports(...)` (jaxlab.registry):\n" + "\n".join(bare)
