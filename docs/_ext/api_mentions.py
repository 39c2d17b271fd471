"""Sphinx extension: a page that names one of our public objects links it, or the build fails.

What counts as a mention: an inline code span in the prose of a checked page whose text begins
with a dotted name under one of our packages (```jaxlab.load_run``` and
```jaxlab.load_run(workdir, step=None)```, whose name is ``jaxlab.load_run``). Code blocks are
exempt (examples, not prose), and so is inline code inside a link or a role (it *is* the link);
a name with a part that starts with ``_`` is private, and ``python -m jaxlab.main`` does not begin
with a name. One link to the object anywhere in the page covers all its mentions there: a role
(``{func}`jaxlab.load_run```, ``:class:`...``` in reST) or a MyST link
(``[`jaxlab.load_run(...)`](#jaxlab.load_run)``), under any name of the same object
(``jaxlab.train.make_mesh`` links ``jaxlab.train.mesh.make_mesh``).

Each mention is checked once the whole site is read; a problem is a warning located at the page
and line (``guides/x.md:12: WARNING: ...``) that names the name (the build fails on them also without ``-W``, as for ``public_api``):

* a name that denotes nothing (a typo, a renamed function);
* a name whose object is on no API page (document it under docs/api/, or do not name it);
* a name whose object is documented but linked nowhere in the page.

Configuration (``conf.py``): ``api_mentions_pages``, the documents checked (``fnmatch`` patterns
over document names, e.g. ``"guides/*"``); the packages are the top-level ones of
``public_api_modules``.
"""

from __future__ import annotations

import fnmatch
import inspect
import re
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging

import public_api

logger = logging.getLogger(__name__)

_KEY = "api_mentions"  # env attribute: docname -> (mentions [(line, name)], link targets)


def _line(node: nodes.Node) -> int | None:
  """The source line of an inline node: its block's line plus the line breaks before it there.

  (MyST gives an inline node the line of its paragraph.)
  """
  block = node
  while block is not None and (isinstance(block, nodes.Inline) or block.line is None):
    block = block.parent
  if block is None:
    return None
  breaks = 0
  for text in block.findall(nodes.Text):
    if text.parent is node:
      break
    breaks += text.astext().count("\n")
  return block.line + breaks


def _inside(node: nodes.Node, kinds: tuple[type, ...]) -> bool:
  parent = node.parent
  while parent is not None:
    if isinstance(parent, kinds):
      return True
    parent = parent.parent
  return False


def mentions(doctree: nodes.document, roots: set[str]) -> list[tuple[int | None, str]]:
  """(line, dotted name) of each inline code span in the prose that begins with one of our names."""
  pattern = re.compile(rf"(?:{'|'.join(map(re.escape, sorted(roots)))})(?:\.\w+)+")
  found = []
  for literal in doctree.findall(nodes.literal):
    if _inside(literal, (addnodes.pending_xref, nodes.reference, nodes.literal_block)):
      continue
    match = pattern.match(literal.astext())
    if match and not any(part.startswith("_") for part in match.group().split(".")):
      found.append((_line(literal), match.group()))
  return found


def links(doctree: nodes.document) -> set[str]:
  """The targets of the page's cross-references (roles and MyST ``#target`` links), unresolved."""
  return {ref["reftarget"].lstrip("~.") for ref in doctree.findall(addnodes.pending_xref) if ref.get("reftarget")}


def _checked(app: Sphinx, docname: str) -> bool:
  return any(fnmatch.fnmatch(docname, pattern) for pattern in app.config.api_mentions_pages)


def _collect(app: Sphinx, doctree: nodes.document) -> None:
  docname = app.env.docname
  if not _checked(app, docname):
    return
  roots = {m.split(".")[0] for m in app.config.public_api_modules}
  getattr(app.env, _KEY)[docname] = (mentions(doctree, roots), links(doctree))


def _init(app: Sphinx) -> None:
  if not hasattr(app.env, _KEY):
    setattr(app.env, _KEY, {})


def _purge(app: Sphinx, env: Any, docname: str) -> None:
  getattr(env, _KEY, {}).pop(docname, None)


def _merge(app: Sphinx, env: Any, docnames: set[str], other: Any) -> None:
  found = getattr(other, _KEY, {})
  getattr(env, _KEY).update({d: found[d] for d in docnames if d in found})


def _role(obj: Any) -> str:
  """The MyST role that links ``obj``: ``mod``, ``class``, ``func`` or ``data``."""
  if inspect.ismodule(obj):
    return "mod"
  if inspect.isclass(obj):
    return "class"
  return "func" if callable(obj) else "data"


def _problem(app: Sphinx, docname: str, line: int | None, message: str) -> None:
  getattr(app, public_api.PROBLEMS).append(message)
  logger.warning(message, location=(docname, line), type="api_mentions", subtype="unlinked")


def _check(app: Sphinx, env: Any) -> None:
  by_object = public_api.documented_objects(env)
  for docname, (found, targets) in sorted(getattr(env, _KEY, {}).items()):
    linked = {id(obj) for obj in map(public_api.object_at, targets) if obj is not public_api.MISSING}
    reported = set()
    for line, name in found:
      if name in reported:
        continue
      obj = public_api.object_at(name)
      if obj is public_api.MISSING:
        why = f"`{name}` names nothing (no such module or attribute)"
      elif id(obj) not in by_object:
        why = f"`{name}` is on no API page (document it under docs/api/, or do not name it)"
      elif id(obj) not in linked:
        why = (f"`{name}` is mentioned but linked nowhere on this page: write {{{_role(obj)}}}`{name}` "
               f"at its first mention, or [`...`](#{by_object[id(obj)]})")
      else:
        continue
      reported.add(name)
      _problem(app, docname, line, why)


def setup(app: Sphinx) -> dict[str, Any]:
  app.setup_extension("public_api")
  app.add_config_value("api_mentions_pages", [], "env", types=[list, tuple])
  app.connect("builder-inited", _init)
  app.connect("doctree-read", _collect)
  app.connect("env-purge-doc", _purge)
  app.connect("env-merge-info", _merge)
  # after public_api's own env check, which caches the documented objects for the write phase
  app.connect("env-check-consistency", _check, priority=600)
  return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
