"""Each notebook in colabs/ runs top to bottom (shell and magic lines skipped)."""

import glob
import json
import os

import matplotlib
import pytest

matplotlib.use("Agg")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "colabs", "*.ipynb")))


def _code(path: str) -> str:
  cells = json.load(open(path))["cells"]
  lines = []
  for cell in cells:
    if cell["cell_type"] == "code":
      lines += [l for l in "".join(cell["source"]).splitlines() if not l.lstrip().startswith(("!", "%"))]
  return "\n".join(lines)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, monkeypatch):
  monkeypatch.chdir(REPO)
  exec(compile(_code(path), path, "exec"), {"__name__": "__notebook__"})
