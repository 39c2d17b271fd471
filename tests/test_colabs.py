"""Each notebook in colabs/ matches its source and runs top to bottom at tiny size (TINY = True)."""

import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("make_colabs", os.path.join(REPO, "scripts", "make_colabs.py"))
make_colabs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_colabs)
from notebooks import execute, ipynb_cells  # noqa: E402  (scripts/ is on the path now)

NAMES = make_colabs.notebook_names()


def test_every_source_has_its_notebook():
  assert NAMES and all(os.path.exists(os.path.join(REPO, "colabs", f"{n}.ipynb")) for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_in_sync_and_runs_at_tiny_size(name, tmp_path, monkeypatch):
  path = os.path.join(REPO, "colabs", f"{name}.ipynb")
  cells = ipynb_cells(path)
  assert cells == make_colabs.notebook_cells(name), f"{path} is stale: run python scripts/make_colabs.py {name}"
  monkeypatch.chdir(tmp_path)  # no dependence on the working directory
  execute(cells, tiny=True)
