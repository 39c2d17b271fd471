"""Writes colabs/<name>.ipynb, executed with outputs, from colabs/src/<name>.py (percent format).

  python scripts/make_colabs.py                 # every notebook, full size (a few minutes on CPU)
  python scripts/make_colabs.py quickstart dpot # some of them

A code cell holding ``# {install}`` gets the shared install cell (colabs/src/_install.py) in that
place, followed by the ``TINY = False`` parameters cell that the tests flip.

Several notebooks run one per subprocess, each in a fresh Python as in Colab: a notebook that
sets ``XLA_FLAGS`` (8 virtual CPU devices) before jax starts must not find jax already started.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "colabs", "src")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from notebooks import execute, read_cells, to_ipynb  # noqa: E402


def notebook_names() -> list[str]:
  return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(SRC, "*.py"))
                if not os.path.basename(p).startswith("_"))


def notebook_cells(name: str) -> list[tuple[str, str]]:
  install, params = read_cells(os.path.join(SRC, "_install.py"))
  out = []
  for kind, source in read_cells(os.path.join(SRC, f"{name}.py")):
    if kind == "code" and "# {install}" in source:
      out += [("code", source.replace("# {install}", install[1])), params]
    else:
      out.append((kind, source))
  return out


def main(names: list[str]) -> None:
  names = names or notebook_names()
  if len(names) > 1:
    for name in names:
      subprocess.run([sys.executable, os.path.abspath(__file__), name], check=True)
    return
  os.chdir(os.path.join(REPO, "colabs"))  # notebooks must not depend on the working directory
  for name in names:
    cells = notebook_cells(name)
    t0 = time.time()
    outputs = execute(cells, tiny=False)
    with open(os.path.join(REPO, "colabs", f"{name}.ipynb"), "w") as f:
      json.dump(to_ipynb(cells, outputs), f, indent=1)
      f.write("\n")
    print(f"colabs/{name}.ipynb: {len(cells)} cells, executed in {time.time() - t0:.0f} s")


if __name__ == "__main__":
  main(sys.argv[1:])
