"""Each notebook in colabs/ is in sync with its jupytext source and runs top to bottom in a kernel
at tiny size (``TINY = True`` injected after its parameters cell; the three longest only with
``make test-slow``)."""

import difflib
import importlib.util
import os
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
