"""Notebooks from percent-format sources, executed in-process with their outputs (no kernel needed).

``colabs/src/<name>.py`` holds the cells (``# %% [markdown]`` / ``# %%``, as jupytext writes
them); ``python scripts/make_colabs.py`` executes each one at full size and writes
``colabs/<name>.ipynb`` with its outputs (text, the last expression's value, matplotlib figures as
PNG), so a reader on the web sees the plots. ``tests/test_colabs.py`` executes the committed
notebooks' code with ``TINY = True`` (the parameters cell) and fails when a cell fails.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import io
import json
import re
import traceback
from typing import Any

_CELL = re.compile(r"^# %%(?P<kind> \[markdown\])?[^\n]*\n", re.M)


def read_cells(path: str) -> list[tuple[str, str]]:
  """``[(kind, source)]`` from a percent-format file; markdown cells lose their ``# `` prefixes."""
  text = open(path).read()
  marks = list(_CELL.finditer(text))
  cells = []
  for i, m in enumerate(marks):
    body = text[m.end():marks[i + 1].start() if i + 1 < len(marks) else len(text)].strip("\n")
    if m.group("kind"):
      body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.splitlines())
      cells.append(("markdown", body))
    elif body.strip():
      cells.append(("code", body))
  return cells


def set_tiny(source: str, tiny: bool) -> str:
  return re.sub(r"^TINY = (True|False)", f"TINY = {tiny}", source, flags=re.M)


def _figures() -> list[dict]:
  import matplotlib.pyplot as plt
  out = []
  for num in plt.get_fignums():
    buf = io.BytesIO()
    plt.figure(num).savefig(buf, format="png", dpi=80, bbox_inches="tight")
    out.append({"output_type": "display_data", "metadata": {},
                "data": {"image/png": base64.b64encode(buf.getvalue()).decode(), "text/plain": ["<Figure>"]}})
  plt.close("all")
  return out


def run_cell(source: str, namespace: dict, count: int) -> list[dict]:
  """Executes one cell like IPython (the last expression is displayed); returns its outputs."""
  lines = [l for l in source.splitlines() if not l.lstrip().startswith(("!", "%"))]  # shell/magics
  tree = ast.parse("\n".join(lines))
  last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
  stdout = io.StringIO()
  outputs: list[dict] = []
  with contextlib.redirect_stdout(stdout):
    exec(compile(tree, f"<cell {count}>", "exec"), namespace)
    value = eval(compile(ast.Expression(last.value), f"<cell {count}>", "eval"), namespace) if last else None
  if stdout.getvalue():
    outputs.append({"output_type": "stream", "name": "stdout", "text": stdout.getvalue().splitlines(keepends=True)})
  if value is not None and not type(value).__module__.startswith("matplotlib"):
    outputs.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                    "data": {"text/plain": repr(value).splitlines(keepends=True)}})
  return outputs + _figures()


def execute(cells: list[tuple[str, str]], *, tiny: bool, namespace: dict | None = None) -> list[list[dict]]:
  """Runs the code cells in order (``TINY`` set as given); a failing cell raises with its number."""
  import matplotlib
  matplotlib.use("Agg")
  namespace = {"__name__": "__notebook__"} if namespace is None else namespace
  outputs, count = [], 0
  for kind, source in cells:
    if kind != "code":
      outputs.append([])
      continue
    count += 1
    try:
      outputs.append(run_cell(set_tiny(source, tiny), namespace, count))
    except Exception as e:  # noqa: BLE001 - name the cell, keep the traceback
      raise RuntimeError(f"code cell {count} failed:\n{source}\n\n{traceback.format_exc()}") from e
  return outputs


def to_ipynb(cells: list[tuple[str, str]], outputs: list[list[dict]] | None = None) -> dict:
  nb = {"cells": [], "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}, "colab": {"provenance": []}}}
  count = 0
  for i, (kind, source) in enumerate(cells):
    cell: dict[str, Any] = {"cell_type": kind, "id": f"cell-{i}", "metadata": {},
                            "source": source.splitlines(keepends=True)}
    if kind == "code":
      count += 1
      cell.update(execution_count=count if outputs else None, outputs=outputs[i] if outputs else [])
    nb["cells"].append(cell)
  return nb


def ipynb_cells(path: str) -> list[tuple[str, str]]:
  return [(c["cell_type"], "".join(c["source"])) for c in json.load(open(path))["cells"]]
