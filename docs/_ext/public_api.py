"""Sphinx extension: every public name is on an API page and has a docstring, or the build fails.

The public names of a module are its ``__all__``; a module without one exports the names it binds
at top level that do not start with ``_``: its functions, classes and constants, and, for a
package, what its ``__init__`` imports from the same top-level package (its re-exports). What a
plain module imports, and what any module imports from elsewhere (``jax``, ``typing``), is not its
API.

Configuration (``conf.py``):

* ``public_api_modules``: the modules whose public names the API pages must document;
* ``public_api_packages``: packages searched for modules that define ``__all__``; each such module
  must be in ``public_api_modules``.

Checks, each a warning naming the object (the build fails on them also without ``-W``):

* a public name without a docstring: a function or class whose ``__doc__`` is empty or only the
  signature a dataclass / NamedTuple generates, or a constant without a ``#:`` comment or a
  docstring below its assignment (Sphinx's attribute docs);
* a public name that no ``auto*`` / ``py:*`` directive documents, neither under ``<module>.<name>``
  nor (a re-export) under another name of the same object;
* a module with ``__all__`` missing from ``public_api_modules``.

Constants documented with ``autodata`` get the docs of their assignment even when the module
re-exports them (autodoc alone would show the docstring of the value's type). A reference to one
of our objects by the path where it is defined resolves to where it is documented (see
``_resolve_own``).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import re
import sys
from typing import Any

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

PROBLEMS = "public_api_problems"
_BY_OBJECT = "public_api_by_object"  # cache of documented_objects for the write phase
MISSING = object()


@functools.lru_cache(maxsize=None)
def _source_tree(modname: str) -> ast.Module:
  module = importlib.import_module(modname)
  with open(inspect.getsourcefile(module), encoding="utf-8") as f:
    return ast.parse(f.read())


def _absolute(node: ast.ImportFrom, modname: str, is_package: bool) -> str:
  if not node.level:
    return node.module or ""
  parts = modname.split(".")
  base = parts if is_package else parts[:-1]
  base = base[:len(base) - node.level + 1]
  return ".".join(base + ([node.module] if node.module else []))


def _assigned_names(tree: ast.Module) -> set[str]:
  """Names a module assigns at top level (``X = ...``, ``X: T = ...``), not defs or imports."""
  names = set()
  for node in tree.body:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    for target in targets:
      names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
  return names


def public_names(modname: str) -> list[str]:
  """The public names of ``modname``: its ``__all__``, else what it defines or imports from its package."""
  module = importlib.import_module(modname)
  if hasattr(module, "__all__"):
    return list(module.__all__)
  root = modname.split(".")[0]
  is_package = hasattr(module, "__path__")
  names = []
  for node in _source_tree(modname).body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.append(node.name)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
      value = node.value
      if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "TypeVar":
        continue  # a typing variable, not a value of the API
      names.extend(sorted(_assigned_names(ast.Module(body=[node], type_ignores=[]))))
    elif isinstance(node, ast.ImportFrom) and is_package:  # a package re-exports; a module's imports are its own
      source = _absolute(node, modname, is_package)
      if source == root or source.startswith(root + "."):
        names.extend(a.asname or a.name for a in node.names)
  return [n for n in dict.fromkeys(names) if not n.startswith("_")]


def _generated_doc(obj: Any) -> bool:
  """The docstring a dataclass or NamedTuple writes when the class has none: ``Name(field, ...)``."""
  doc = obj.__dict__.get("__doc__")
  return bool(doc) and re.fullmatch(rf"{re.escape(obj.__name__)}\(.*\)", doc.strip(), re.S) is not None


def _defining_modules(obj: Any, name: str, modname: str) -> list[str]:
  """Modules (imported ones of the same package) that assign ``name`` to this very object."""
  root = modname.split(".")[0]
  found = []
  for other, module in sorted(sys.modules.items()):
    if module is None or not (other == root or other.startswith(root + ".")):
      continue
    if getattr(module, "__dict__", {}).get(name, MISSING) is not obj:
      continue
    try:
      if name in _assigned_names(_source_tree(other)):
        found.append(other)
    except (OSError, TypeError, SyntaxError):
      continue
  return found


def attribute_doc(modname: str, name: str) -> list[str]:
  """The ``#:`` comment or docstring of the assignment that made ``modname.name`` (maybe re-exported)."""
  obj = getattr(importlib.import_module(modname), name)
  for defining in [modname] + _defining_modules(obj, name, modname):
    try:
      docs = ModuleAnalyzer.for_module(defining).find_attr_docs()
    except Exception:  # noqa: BLE001 - no source: no attribute docs there
      continue
    if ("", name) in docs:
      return [line for line in docs[("", name)]]
  return []


def missing_docstring(modname: str, name: str) -> str | None:
  """Why ``modname.name`` counts as undocumented, or None when it has a docstring."""
  module = importlib.import_module(modname)
  try:
    obj = getattr(module, name)
  except AttributeError:
    return f"{modname}.{name} is in the public names of {modname} but does not exist"
  if inspect.ismodule(obj):
    return None if (obj.__doc__ or "").strip() else f"module {obj.__name__} has no docstring"
  if isinstance(obj, type):
    own = obj.__dict__.get("__doc__")
    if not (own or "").strip() or _generated_doc(obj):
      return f"class {modname}.{name} has no docstring"
    return None
  if callable(obj) and (inspect.isroutine(obj) or hasattr(obj, "__wrapped__")):
    return None if (getattr(obj, "__doc__", None) or "").strip() else f"function {modname}.{name} has no docstring"
  if any(line.strip() for line in attribute_doc(modname, name)):
    return None
  return (f"constant {modname}.{name} has no docs (a '#:' comment above its assignment "
          f"or a docstring below it)")


def modules_with_all(package: str) -> list[str]:
  """Modules of ``package`` (found by reading its files, none imported) that assign ``__all__``."""
  root = os.path.dirname(inspect.getsourcefile(importlib.import_module(package)))
  base = os.path.dirname(root)
  found = []
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
    for filename in sorted(filenames):
      if not filename.endswith(".py"):
        continue
      path = os.path.join(dirpath, filename)
      with open(path, encoding="utf-8") as f:
        if not re.search(r"^__all__\s*[:=]", f.read(), re.M):
          continue
      parts = os.path.relpath(path, base)[:-3].split(os.sep)
      found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
  return found


def _problem(app: Sphinx, message: str) -> None:
  getattr(app, PROBLEMS).append(message)
  logger.warning(message, type="public_api", subtype="missing")


def _check_docstrings(app: Sphinx) -> None:
  setattr(app, PROBLEMS, [])
  listed = list(app.config.public_api_modules)
  for package in app.config.public_api_packages:
    for modname in modules_with_all(package):
      if modname not in listed:
        _problem(app, f"{modname} defines __all__ but is not in public_api_modules (docs/conf.py), "
                      f"so its names are not checked")
  for modname in listed:
    for name in public_names(modname):
      why = missing_docstring(modname, name)
      if why:
        _problem(app, why)


def object_at(fullname: str) -> Any:
  """The Python object that a dotted name denotes, as the expression would, or ``MISSING``.

  Attribute first, submodule second (importing it): ``jaxlab.optim.momo`` is the function the
  package re-exports under its module's name, not the module.
  """
  parts = fullname.split(".")
  try:
    obj = importlib.import_module(parts[0])
  except ImportError:
    return MISSING
  for attr in parts[1:]:
    try:
      obj = getattr(obj, attr)
    except AttributeError:
      if not inspect.ismodule(obj):
        return MISSING
      try:
        obj = importlib.import_module(f"{obj.__name__}.{attr}")
      except ImportError:
        return MISSING
  return obj


def documented_objects(env: Any) -> dict[int, str]:
  """id(object) -> the name it is documented under (the first, sorted), for the py domain's objects."""
  found: dict[int, str] = {}
  for fullname in sorted(env.get_domain("py").objects):
    obj = object_at(fullname)
    if obj is not MISSING and not isinstance(obj, (int, float, str, bool)) and obj is not None:
      found.setdefault(id(obj), fullname)
  return found


def _check_pages(app: Sphinx, env: Any) -> None:
  documented = env.get_domain("py").objects
  by_object = documented_objects(env)
  setattr(app, _BY_OBJECT, by_object)
  for modname in app.config.public_api_modules:
    module = importlib.import_module(modname)
    for name in public_names(modname):
      if f"{modname}.{name}" in documented:
        continue
      elsewhere = by_object.get(id(getattr(module, name, None)))
      if elsewhere is None:  # a re-export of an object documented under another name is fine
        _problem(app, f"{modname}.{name} is public but on no API page "
                      f"(add an auto* directive for it under docs/api/)")


def _resolve_own(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
  """A reference to one of our objects by another name than the one it is documented under.

  ``jaxlab.moe.experts.init_experts`` (where it is defined) resolves to ``jaxlab.moe.init_experts``
  (where it is documented): both are the same object. An unqualified name (``InputError`` in a
  docstring, as its module imports it) resolves when exactly one documented object has that name.
  Anything else stays unresolved, and ``nitpicky`` reports it.
  """
  if node.get("refdomain") != "py":
    return None
  target = node["reftarget"].lstrip(".~")
  by_object = getattr(app, _BY_OBJECT, None) or documented_objects(env)
  candidates = set()
  obj = object_at(target) if "." in target and target.split(".")[0] in _roots(app) else MISSING
  if obj is not MISSING and id(obj) in by_object:
    candidates.add(by_object[id(obj)])
  elif "." not in target:
    candidates = {name for name in by_object.values() if name.rsplit(".", 1)[-1] == target}
  if len(candidates) != 1:
    return None
  return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, "obj", candidates.pop(),
                                           node, contnode)


def _roots(app: Sphinx) -> set[str]:
  return {m.split(".")[0] for m in app.config.public_api_modules}


def _data_docs(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
  """Constants: the docs of the assignment, also when the documented module only re-exports them."""
  if what != "data" or "." not in name:
    return
  modname, _, attr = name.rpartition(".")
  try:
    docs = attribute_doc(modname, attr)
  except (ImportError, AttributeError):
    return
  lines[:] = list(docs)  # none: nothing, rather than the docstring of the value's type


def _fail_at_end(app: Sphinx, exception: Exception | None) -> None:
  """Fails the build (exit status 1) even without ``-W``: the warnings above name each problem."""
  problems = getattr(app, PROBLEMS, [])
  if exception is None and problems:
    app.statuscode = 1
    logger.error(f"public API check: {len(problems)} problem(s), each named above")


def setup(app: Sphinx) -> dict[str, Any]:
  app.add_config_value("public_api_modules", [], "env", types=[list, tuple])
  app.add_config_value("public_api_packages", [], "env", types=[list, tuple])
  app.connect("builder-inited", _check_docstrings)
  app.connect("env-check-consistency", _check_pages)
  app.connect("autodoc-process-docstring", _data_docs)
  app.connect("missing-reference", _resolve_own)
  app.connect("build-finished", _fail_at_end)
  return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
