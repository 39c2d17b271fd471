"""Prints jaxlab's packages as their imports draw them, floor by floor of the import contract (setup.cfg).

  python scripts/layer_graph.py                 # the jaxlab that Python imports (the checkout's, with PYTHONPATH=.)
  PYTHONPATH=<other checkout> python scripts/layer_graph.py --config=setup.cfg   # another tree, this contract

Each top-level module or package (``jaxlab.rl``, ``jaxlab.errors``, ...) is printed under the layer of the
``[importlinter:contract:layers]`` contract that lists it (top first), with the packages it imports; an
import of a package on a higher floor, or of an independent (``|``) sibling, is marked ``UP`` or
``SIDEWAYS``, and a package the contract does not list goes under "not in the contract". The graph is
grimp's (the one import-linter checks), counting imports inside functions too; the contract's
``ignore_imports`` are listed, not hidden.
"""

from __future__ import annotations

import argparse
import collections
import configparser
import os
import re

import grimp

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_layers(config_path: str) -> tuple[list[tuple[list[str], bool]], list[str]]:
  """``([(packages, independent), ...] top first, ignore_imports)`` of the layers contract in ``config_path``."""
  cfg = configparser.ConfigParser()
  cfg.read(config_path)
  contract = cfg["importlinter:contract:layers"]
  layers = []
  for line in contract["layers"].strip().splitlines():
    independent = "|" in line
    layers.append(([p.strip() for p in re.split(r"[|:]", line)], independent))
  ignored = [line.strip() for line in contract.get("ignore_imports", "").splitlines()
             if line.strip() and not line.strip().startswith("#")]
  return layers, ignored


def top_level(module: str) -> str:
  return ".".join(module.split(".")[:2])


def package_edges(graph: grimp.ImportGraph, root: str) -> dict[str, dict[str, list[str]]]:
  """``{importer package: {imported package: [module -> module, ...]}}`` between top-level packages of ``root``."""
  edges: dict[str, dict[str, list[str]]] = collections.defaultdict(lambda: collections.defaultdict(list))
  for module in sorted(graph.modules):
    if not module.startswith(root + "."):
      continue
    for imported in sorted(graph.find_modules_directly_imported_by(module)):
      a, b = top_level(module), top_level(imported)
      if imported.startswith(root + ".") and a != b:
        edges[a][b].append(f"{module} -> {imported}")
  return edges


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(REPO, "setup.cfg"), help="the file holding the contract")
  parser.add_argument("--modules", action="store_true", help="also list the module imports behind each edge")
  args = parser.parse_args(argv)
  layers, ignored = read_layers(args.config)
  declared = set(ignored)
  graph = grimp.build_graph("jaxlab", cache_dir=None)
  edges = package_edges(graph, "jaxlab")
  floor = {p: i for i, (packages, _) in enumerate(layers) for p in packages}
  independent = {p: ind for packages, ind in layers for p in packages}
  packages = sorted({top_level(m) for m in graph.modules if m != "jaxlab"})
  import jaxlab  # noqa: PLC0415 - only to say which tree was read
  print(f"jaxlab of {os.path.dirname(os.path.dirname(os.path.abspath(jaxlab.__file__)))}; contract: {args.config}")
  rows = [(i, packages_of) for i, (packages_of, _) in enumerate(layers)]
  rows.append((len(layers), sorted(p for p in packages if p not in floor)))
  for i, members in rows:
    title = f"floor {len(layers) - i}" if i < len(layers) else "not in the contract"
    print(f"\n{title}: {(' | ' if i < len(layers) and layers[i][1] else ' : ').join(members)}")
    for p in members:
      if p not in packages:
        continue
      targets = edges.get(p, {})
      marks = []
      for q in sorted(targets):
        kind = ""
        if p in floor and q in floor:
          if floor[q] < floor[p]:
            kind = " UP"
          elif floor[q] == floor[p] and independent[p]:
            kind = " SIDEWAYS"
        elif p in floor or q in floor:
          kind = " ?"
        if kind and all(edge in declared for edge in targets[q]):
          kind += " (declared)"
        marks.append(f"{q.removeprefix('jaxlab.')}{kind}")
      print(f"  {p.removeprefix('jaxlab.'):<20} -> {', '.join(marks) if marks else '-'}")
      if args.modules:
        for q in sorted(targets):
          for edge in targets[q]:
            print(f"      {edge}")
  if ignored:
    print("\nignore_imports (declared, each with its reason in the contract):")
    for line in ignored:
      print(f"  {line}")


if __name__ == "__main__":
  main()
