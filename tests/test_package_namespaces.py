"""Every jaxlab package's namespace holds its API only: no names it imported for its own use.

``dir(jaxlab.rl)`` is what tab completion and ``help()`` show: its re-exports, its constants and
its submodules, never ``importlib``, ``Any`` or ``annotations`` (``from __future__ import
annotations`` binds that name). A package that imports lazily (a module ``__getattr__``) lists
the lazy names in ``__all__`` and returns exactly those from ``__dir__``.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = sorted(".".join(p.relative_to(REPO).parent.parts) for p in (REPO / "jaxlab").rglob("__init__.py"))


def _imported_helper(value: object) -> bool:
  """A module, function, class or typing object from outside jaxlab (a constant is never one)."""
  if inspect.ismodule(value):
    return not value.__name__.startswith("jaxlab.")
  module = getattr(value, "__module__", None)  # functions, classes, typing objects; not a tuple
  return isinstance(module, str) and not module.startswith("jaxlab")


def test_the_scan_finds_the_packages():
  assert {"jaxlab", "jaxlab.rl", "jaxlab.moe", "jaxlab.pde.data.files"} <= set(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_the_namespace_holds_no_imported_helpers(name):
  package = importlib.import_module(name)
  leaked = [attr for attr, value in vars(package).items() if not attr.startswith("_") and _imported_helper(value)]
  assert not leaked, f"{name} exposes names it imported for its own use: {leaked}"


@pytest.mark.parametrize("name", [p for p in PACKAGES if "__getattr__" in vars(importlib.import_module(p))])
def test_a_lazy_package_lists_its_lazy_names(name):
  package = importlib.import_module(name)
  assert "__all__" in vars(package) and "__dir__" in vars(package), name
  assert dir(package) == sorted(package.__all__)
  assert all(not n.startswith("_") for n in dir(package))
