"""Writes colabs/<name>.ipynb from colabs/src/<name>.py (a jupytext pair), executed in a kernel.

  python scripts/make_colabs.py                  # every notebook, full size, a fresh kernel each
  python scripts/make_colabs.py quickstart dpot  # some of them
  jupytext --sync colabs/src/momo.py             # after a text-only edit: the cells, outputs kept

colabs/jupytext.toml pairs each source (percent format) with its notebook, the file Colab opens
and the docs render, committed with its outputs. A source holds its whole notebook, install cell
included, so that ``jupytext --sync`` is a real pairing. The part all notebooks share has one
copy, colabs/src/_install.py: the install cell's body (from the line that starts it, after a
notebook's own lines such as ``EXTRAS``) and the parameters cell ``TINY = False``, tagged
"parameters" as papermill expects. This script writes that copy into each source it builds;
tests/test_colabs.py fails when a source differs from it.

nbclient executes each notebook in a fresh ipykernel running this interpreter, as Colab runs a
notebook in a fresh Python (a notebook that sets ``XLA_FLAGS`` before jax starts must not find
jax started); the inline backend stores figures as PNG.
"""

from __future__ import annotations

import copy
import glob
import os
import sys
import time

import jupytext
import nbformat
import zmq
from ipykernel.kernelspec import RESOURCES, get_kernel_dict
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from traitlets import default

from jaxlab.errors import InputError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLABS = os.path.join(REPO, "colabs")
SRC = os.path.join(COLABS, "src")
SHARED = os.path.join(SRC, "_install.py")
KERNEL = "python3"
METADATA = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": KERNEL},
            "language_info": {"name": "python"}, "colab": {"provenance": []}}


def notebook_names() -> list[str]:
  """The notebooks: colabs/src/<name>.py, the shared _install.py left out."""
  return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(SRC, "*.py"))
                if not os.path.basename(p).startswith("_"))


def source_path(name: str) -> str:
  return os.path.join(SRC, f"{name}.py")


def notebook_path(name: str) -> str:
  return os.path.join(COLABS, f"{name}.ipynb")


def parameters_index(nb: nbformat.NotebookNode, where: str) -> int:
  """The index of the one code cell tagged "parameters" (where: the file, for the message)."""
  found = [i for i, c in enumerate(nb.cells)
           if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
  if len(found) != 1:
    raise InputError(f"{where}: needs exactly one code cell tagged parameters "
                     f"(`# %% tags=[\"parameters\"]`), found {len(found)}")
  return found[0]


def shared_cells() -> tuple[str, str]:
  """(install body, parameters cell) of colabs/src/_install.py."""
  nb = jupytext.read(SHARED)
  i = parameters_index(nb, SHARED)
  return nb.cells[i - 1].source, nb.cells[i].source


def with_shared_cells(nb: nbformat.NotebookNode, where: str) -> nbformat.NotebookNode:
  """A copy of nb whose install cell body and parameters cell are colabs/src/_install.py's.

  The install cell is the code cell before the parameters cell; its body starts at the line
  that starts _install.py's body, and the lines above it are the notebook's own.
  """
  body, parameters = shared_cells()
  nb = copy.deepcopy(nb)
  i = parameters_index(nb, where)
  install = nb.cells[i - 1] if i else None
  first = body.splitlines()[0]
  lines = install.source.splitlines() if install is not None and install.cell_type == "code" else []
  if first not in lines:
    raise InputError(f"{where}: the code cell before the parameters cell must hold the install "
                     f"body of {os.path.relpath(SHARED, REPO)}, starting with the line {first!r}")
  own = lines[:lines.index(first)]
  install.source = "\n".join(own + [body])
  nb.cells[i].source = parameters
  return nb


def sync_source(name: str) -> bool:
  """Writes the shared cells into colabs/src/<name>.py; True when that changed the file."""
  path = source_path(name)
  nb = jupytext.read(path)
  refreshed = with_shared_cells(nb, path)
  if refreshed == nb:
    return False
  jupytext.write(refreshed, path, fmt="py:percent")
  return True


def cells_text(nb: nbformat.NotebookNode) -> str:
  """The cells as jupytext's percent format writes them: inputs and cell metadata, no outputs."""
  nb = copy.deepcopy(nb)
  nb.metadata = {"jupytext": {"notebook_metadata_filter": "-all"}}
  return jupytext.writes(nb, fmt="py:percent")


def to_ipynb(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
  """The notebook as committed: the metadata a Colab user needs, stable cell ids, no outputs."""
  out = nbformat.v4.new_notebook(metadata=copy.deepcopy(METADATA))
  for i, cell in enumerate(nb.cells):
    new = nbformat.v4.new_code_cell if cell.cell_type == "code" else nbformat.v4.new_markdown_cell
    out.cells.append(new(cell.source, metadata=copy.deepcopy(cell.metadata), id=f"cell-{i}"))
  return out


class _ThisInterpreterSpecs(KernelSpecManager):
  """ipykernel's own "python3" kernel spec, run by sys.executable; installed kernelspecs are
  not consulted, so a user's "python3" pointing at another Python cannot be picked up."""

  def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
    if kernel_name != KERNEL:
      raise NoSuchKernel(kernel_name)
    return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())


class _Kernel(AsyncKernelManager):
  """nbclient's kernel manager with the spec above (nbclient still starts and shuts it down)."""

  @default("kernel_spec_manager")
  def _specs(self) -> KernelSpecManager:
    return _ThisInterpreterSpecs()

  @default("transport_encryption")
  def _encryption(self) -> str:
    return "auto" if zmq.has("curve") else "disabled"  # without it the kernel warns on stderr


def _kernel_env() -> dict[str, str]:
  """This process's environment, PYTHONPATH made absolute: the kernel runs elsewhere (cwd) and
  must import the same jaxlab as this process."""
  env = dict(os.environ)
  if env.get("PYTHONPATH"):
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
  return env


def execute(nb: nbformat.NotebookNode, *, cwd: str, tiny: bool = False,
            where: str = "notebook") -> nbformat.NotebookNode:
  """Executes nb top to bottom in a fresh kernel (working directory cwd); outputs stored in nb.

  Args:
    nb: the notebook; its cells get their outputs.
    cwd: the kernel's working directory.
    tiny: when True, a cell ``TINY = True`` tagged "injected-parameters" follows the parameters
      cell (papermill's convention), so every cell runs at a tiny size.
    where: the notebook's file, named in errors.

  Returns:
    nb, executed.

  Raises:
    nbclient.exceptions.CellExecutionError: a cell failed; the message holds its source and the
      error with its traceback.
  """
  if tiny:
    i = parameters_index(nb, where)
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(
        "TINY = True", metadata={"tags": ["injected-parameters"]}, id="injected-parameters"))
  client = NotebookClient(
      nb, kernel_manager_class=_Kernel, kernel_name=KERNEL, resources={"metadata": {"path": cwd}},
      startup_timeout=300,  # a loaded machine can take a while to start python
      record_timing=False,  # no timestamps in the committed notebooks
      coalesce_streams=True,  # one stdout/stderr output per cell, a progress bar's \r resolved
      extra_arguments=["--InteractiveShell.colors=nocolor"])  # tracebacks in errors without ANSI codes
  client.execute(env=_kernel_env())
  return nb


def main(names: list[str]) -> None:
  for name in names:
    if name not in notebook_names():
      raise InputError(f"notebook {name!r} (command-line argument): not one of {notebook_names()} "
                       f"(colabs/src/<name>.py)")
  for name in names or notebook_names():
    if sync_source(name):
      print(f"colabs/src/{name}.py: shared cells updated from colabs/src/_install.py")
    nb = to_ipynb(jupytext.read(source_path(name)))
    t0 = time.time()
    execute(nb, cwd=COLABS, where=source_path(name))  # where Jupyter runs a notebook opened from colabs/
    nbformat.write(nb, notebook_path(name))
    print(f"colabs/{name}.ipynb: {len(nb.cells)} cells, executed in {time.time() - t0:.0f} s")


if __name__ == "__main__":
  main(sys.argv[1:])
