"""Each notebook in colabs/ is in sync with its jupytext source, its install cell installs only what is
missing and stops in one line without a source (run in a fake environment), and it runs top to bottom
in a kernel at tiny size (``TINY = True`` injected after its parameters cell; the three longest only
with ``make test-slow``)."""

import ast
import difflib
import importlib.util
import json
import os
import subprocess
import sys

import jupytext
import nbclient
import nbformat
import pytest

from jaxlab.errors import InputError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("make_colabs", os.path.join(REPO, "scripts", "make_colabs.py"))
make_colabs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_colabs)

NAMES = make_colabs.notebook_names()


def _fail_unless_same(actual: str, expected: str, message: str, actual_name: str, expected_name: str) -> None:
  """Fails with message and the first lines of a unified diff (the cells as percent-format text)."""
  if actual != expected:
    diff = difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), expected_name, actual_name)
    pytest.fail(message + "\n" + "".join(list(diff)[:40]), pytrace=False)


def test_every_source_has_its_notebook():
  assert NAMES and all(os.path.exists(make_colabs.notebook_path(n)) for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_source_holds_the_shared_cells(name):
  path = make_colabs.source_path(name)
  source = jupytext.read(path)
  _fail_unless_same(
      make_colabs.cells_text(source), make_colabs.cells_text(make_colabs.with_shared_cells(source, path)),
      f"colabs/src/{name}.py: its install/parameters cells differ from colabs/src/_install.py: "
      f"run python scripts/make_colabs.py {name}", f"colabs/src/{name}.py", "with colabs/src/_install.py's cells")


# Executing a notebook at tiny size takes 10-110 s (a kernel, jax, every program compiled); the three
# longest (composition ~107 s, ot_clip ~48 s, dpot ~26 s on 2 cores) run with `make test-slow`, the
# rest in the default suite. Every notebook's sync with its source is checked by default.
SLOW_NOTEBOOKS = ("composition", "ot_clip", "dpot")


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_in_sync_with_its_source(name):
  path = make_colabs.notebook_path(name)
  nb = nbformat.read(path, as_version=4)
  assert nb.metadata.kernelspec.name == "python3" and "colab" in nb.metadata, f"{path}: metadata {nb.metadata}"
  _fail_unless_same(
      make_colabs.cells_text(nb), make_colabs.cells_text(jupytext.read(make_colabs.source_path(name))),
      f"colabs/{name}.ipynb is stale (its cells differ from colabs/src/{name}.py): run "
      f"jupytext --sync colabs/src/{name}.py (keeps the outputs) or python scripts/make_colabs.py {name} "
      f"(executes at full size)", f"colabs/{name}.ipynb", f"colabs/src/{name}.py")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_NOTEBOOKS else n
                                  for n in NAMES])
def test_notebook_runs_at_tiny_size(name, tmp_path):
  path = make_colabs.notebook_path(name)
  nb = nbformat.read(path, as_version=4)
  make_colabs.execute(nb, cwd=str(tmp_path), tiny=True, where=path)  # no dependence on the working directory
  assert any(c.get("outputs") for c in nb.cells), f"{path}: executed but no cell has an output"


def test_slow_notebooks_exist():
  assert set(SLOW_NOTEBOOKS) < set(NAMES)  # a renamed notebook must not silently leave the slow set


def test_shared_cells_are_restored_and_a_source_without_parameters_cell_is_refused():
  path = make_colabs.source_path("quickstart")
  source = jupytext.read(path)
  i = make_colabs.parameters_index(source, path)
  edited = jupytext.read(path)
  edited.cells[i - 1].source = edited.cells[i - 1].source.replace("import jax\n", "import jax  # edited\n")
  edited.cells[i].source = "TINY = True"
  restored = make_colabs.with_shared_cells(edited, path)
  assert make_colabs.cells_text(edited) != make_colabs.cells_text(source)
  assert make_colabs.cells_text(restored) == make_colabs.cells_text(source)
  del edited.cells[i].metadata["tags"]
  with pytest.raises(InputError, match="quickstart.py: needs exactly one code cell tagged parameters"):
    make_colabs.with_shared_cells(edited, path)


def test_execute_runs_this_python_in_cwd_at_tiny_size_and_a_failing_cell_names_its_source(tmp_path):
  nb = nbformat.v4.new_notebook(cells=[
      nbformat.v4.new_code_cell("TINY = False", metadata={"tags": ["parameters"]}),
      nbformat.v4.new_code_cell("import os, sys\nprint(sys.executable, os.getcwd(), TINY)"),
      nbformat.v4.new_code_cell("x = 1\nx / 0  # the failing cell")])
  with pytest.raises(nbclient.exceptions.CellExecutionError) as failure:
    make_colabs.execute(nb, cwd=str(tmp_path), tiny=True, where="inline notebook")
  assert "x / 0  # the failing cell" in str(failure.value) and "ZeroDivisionError" in str(failure.value)
  printed = nb.cells[2].outputs[0].text.split()
  assert printed == [sys.executable, str(tmp_path.resolve()), "True"]


# The install cell (quickstart's: MODULES = jaxlab, matplotlib, sklearn), run by a plain Python
# without site-packages (-S) whose only third-party modules are fakes in a folder on PYTHONPATH:
# the present modules, jax (devices()) with its metadata, and a `pip` that appends the arguments
# of each call to a file instead of installing anything.
QUICKSTART_MODULES = ["jaxlab", "matplotlib", "sklearn"]
FAKE_JAX = "9.9.9"


def _install_cell(name: str) -> str:
  path = make_colabs.source_path(name)
  nb = jupytext.read(path)
  return nb.cells[make_colabs.parameters_index(nb, path) - 1].source


def _modules_of(cell: str) -> list:
  """The install cell's MODULES list, read without running the cell."""
  for node in ast.parse(cell).body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MODULES" for t in node.targets):
      return ast.literal_eval(node.value)
  pytest.fail(f"no MODULES = [...] line in the install cell:\n{cell}", pytrace=False)


def _fake_site(root, present):
  for name in [*present, "jax", "pip"]:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("def devices():\n  return ['fake device']\n" if name == "jax" else "")
  (root / f"jax-{FAKE_JAX}.dist-info").mkdir()
  (root / f"jax-{FAKE_JAX}.dist-info" / "METADATA").write_text(
      f"Metadata-Version: 2.1\nName: jax\nVersion: {FAKE_JAX}\n")
  # FAKE_PIP_CAP set: pip refuses the extras beside a jax pin, as when one of them caps jax below the runtime's
  (root / "pip" / "__main__.py").write_text(
      "import json, os, sys\nopen(os.environ['FAKE_PIP_LOG'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
      "if os.environ.get('FAKE_PIP_CAP') and any('[' in a for a in sys.argv) and any('jax==' in a for a in sys.argv):\n"
      "  sys.exit('ERROR: ResolutionImpossible: gymnax 1.0.1 depends on jax<0.12')\n")


def _run_install_cell(tmp_path, present, source=None, name="quickstart", modules=QUICKSTART_MODULES, capped=False):
  """name's install cell with only present importable: (exit code, stdout, stderr, pip's
  arguments: those of its one call, a list of calls when there were more, None when not called).
  ``capped``: pip refuses the extras beside the runtime's jax pin."""
  cell = _install_cell(name)
  assert _modules_of(cell) == modules
  _fake_site(tmp_path / "site", present)
  log = tmp_path / "pip_args.json"
  env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path / "site"), "FAKE_PIP_LOG": str(log)}
  if capped:
    env["FAKE_PIP_CAP"] = "1"
  if source is not None:
    env["JAXLAB_SOURCE"] = source
  done = subprocess.run([sys.executable, "-S", "-c", cell], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=120)
  calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
  return done.returncode, done.stdout, done.stderr, (calls[0] if len(calls) == 1 else calls or None)


def test_install_cell_with_every_module_present_does_not_call_pip(tmp_path):
  code, out, err, pip_args = _run_install_cell(tmp_path, QUICKSTART_MODULES, source="git+https://h/me/jaxlab")
  assert (code, out, err, pip_args) == (0, "['fake device']\n", "", None)


@pytest.mark.parametrize("source", ["git+https://example.org/me/jaxlab@0123abc", "checkout", "jaxlab.whl"])
def test_install_cell_with_a_module_missing_installs_from_the_source_with_jax_pinned(tmp_path, source):
  if source == "checkout":  # a local folder or wheel, relative to the kernel's working directory
    (tmp_path / source).mkdir()
  elif source.endswith(".whl"):
    (tmp_path / source).write_text("")
  spec = f"jaxlab[data,notebooks] @ {source}" if "://" in source else f"{source}[data,notebooks]"
  code, out, err, pip_args = _run_install_cell(tmp_path, ["jaxlab", "matplotlib"], source=source)
  assert code == 0, err
  assert pip_args == ["install", "-q", spec, f"jax=={FAKE_JAX}"]
  assert out.splitlines()[0] == f"jaxlab install: sklearn not importable; pip install {spec} jax=={FAKE_JAX}"


@pytest.mark.parametrize("present, missing", [(["jaxlab", "matplotlib"], "sklearn"),
                                              ([], "jaxlab, matplotlib, sklearn")])
def test_install_cell_without_a_source_stops_in_one_line_before_pip(tmp_path, present, missing):
  code, out, err, pip_args = _run_install_cell(tmp_path, present, source="  ")  # blank: not set
  assert (code, out, pip_args) == (1, "", None)
  assert len(err.splitlines()) == 1, err
  assert err.startswith(f"jaxlab install: {missing} not importable and JAXLAB_SOURCE is not set: set it "
                        f"(this cell's form field or first line, or the environment variable)"), err
  assert '"git+https://github.com/<you>/jaxlab"' in err and "pip install 'jaxlab[data,notebooks]'" in err


@pytest.mark.parametrize("capped", [False, True])
def test_install_cell_of_an_rl_notebook_keeps_the_runtimes_jax_even_past_a_cap(tmp_path, capped):
  """The rl extra names gymnax, whose 1.0.1 declares jax<0.12: beside a runtime's newer jax pip refuses
  the pinned install, and the cell installs the extras with the jax they allow, then the runtime's again."""
  spec = "jaxlab[rl,notebooks] @ git+https://h/me/jaxlab"
  code, out, err, pip_calls = _run_install_cell(tmp_path, ["jaxlab", "matplotlib", "flashbax"],
                                                source="git+https://h/me/jaxlab", name="soft_moe_rl",
                                                modules=["jaxlab", "matplotlib", "gymnax", "flashbax"], capped=capped)
  assert code == 0, err
  pinned = ["install", "-q", spec, f"jax=={FAKE_JAX}"]
  if not capped:
    assert pip_calls == pinned
    return
  assert pip_calls == [pinned, ["install", "-q", spec], ["install", "-q", f"jax=={FAKE_JAX}"]]
  assert out.splitlines()[1] == (f"jaxlab install: pip cannot keep jax=={FAKE_JAX} with these extras (one caps jax, as "
                                 f"gymnax 1.0.1 declares jax<0.12); pip install {spec}, then pip install "
                                 f"jax=={FAKE_JAX} again")
  code, out, err, pip_calls = _run_install_cell(tmp_path / "unset", [], source="", name="soft_moe_rl",
                                                modules=["jaxlab", "matplotlib", "gymnax", "flashbax"])
  assert (code, pip_calls) == (1, None)
  assert "`pip install 'jaxlab[rl,notebooks]'` from a package index" in err


def test_install_cell_with_a_source_that_is_no_url_and_no_file_stops_in_one_line(tmp_path):
  code, out, err, pip_args = _run_install_cell(tmp_path, ["jaxlab"], source="jaxlab-chekout")
  assert (code, out, pip_args) == (1, "", None)
  assert err == ("jaxlab install: JAXLAB_SOURCE = 'jaxlab-chekout' is neither a URL (git+https://...) nor "
                 "an existing folder or .whl\n")


# The import names of jaxlab's install_requires (setup.cfg): installed with jaxlab itself.
INSTALLED_WITH_JAXLAB = {"jax", "flax", "optax", "chex", "orbax", "ott", "haiku", "ml_collections", "absl", "tqdm",
                         "tensorboardX", "numpy"}


@pytest.mark.parametrize("name", NAMES)
def test_install_cell_checks_every_module_the_notebook_imports(name):
  """A module that a notebook imports and its install cell does not check would fail a later cell on
  a runtime without it. jaxlab brings its install_requires (setup.cfg), INSTALLED_WITH_JAXLAB."""
  nb = jupytext.read(make_colabs.source_path(name))
  imported = set()
  for cell in nb.cells:
    if cell.cell_type == "code":
      for node in ast.walk(ast.parse(cell.source)):
        if isinstance(node, ast.Import):
          imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
          imported.add(node.module.split(".")[0])
  modules = _modules_of(_install_cell(name))
  unchecked = sorted(imported - set(modules) - set(sys.stdlib_module_names) - INSTALLED_WITH_JAXLAB)
  assert not unchecked, f"colabs/src/{name}.py imports {unchecked}, not in its install cell's MODULES"
  assert {"jaxlab", "matplotlib"} <= set(modules), f"colabs/src/{name}.py: MODULES = {modules}"
