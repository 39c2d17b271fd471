"""Sphinx extension: a Markdown link to a repository file that is not a page renders as its path.

The site holds the pages (docs/, the notebooks, the included BUILD_NOTES.md), not the code,
configs, benchmarks or results. A link such as ``[the study](../../benchmarks/rl_study.py)``
renders as its text and the path in code font, "the study (``benchmarks/rl_study.py``)" (a link
whose text is the path, as the path only), with no copy of the file in the site
(myst would otherwise offer a download of it, and could not find it at all when the link is in an
included file). A link to a file that does not exist is left alone, and myst reports it: a failed
build under ``-W``. Paths are relative to the file the link is written in; for BUILD_NOTES.md,
which docs/build_notes.md includes, that is the repository root. Files under docs/ keep myst's
behaviour (a download link).

Configuration (``conf.py``): ``repo_files_root``, the repository's root folder; links to files
outside it are left alone.
"""

from __future__ import annotations

import pathlib
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx


def _repo_path(app: Sphinx, node: nodes.Element, docname: str) -> str | None:
  """The repository-relative path a myst link names, if it is an existing file outside docs/."""
  target = node.get("reftarget", "").split("#", 1)[0]
  if not target or "://" in target:
    return None
  root = pathlib.Path(app.config.repo_files_root).resolve()
  srcdir = pathlib.Path(app.srcdir).resolve()
  bases = [pathlib.Path(node.source).parent] if node.source else []
  bases.append(pathlib.Path(app.env.doc2path(docname)).parent)
  for base in bases:
    file = (base / target).resolve()
    if file.exists() and file.is_relative_to(root) and not file.is_relative_to(srcdir):
      return file.relative_to(root).as_posix() + ("/" if file.is_dir() else "")
  return None


def _links_to_paths(app: Sphinx, doctree: nodes.document) -> None:
  docname = app.env.docname
  for node in list(doctree.findall(addnodes.download_reference)) + list(doctree.findall(addnodes.pending_xref)):
    if node.get("reftype") != "myst" or node.get("refdomain") not in (None, ""):
      continue  # myst's links to pages and headings (refdomain "doc") resolve as usual
    path = _repo_path(app, node, docname)
    if path is None:
      continue
    shown = nodes.literal(path, path, classes=["repo-file"])
    text = node.astext().strip()
    if text and text not in (path, node["reftarget"]):  # [the study](...): "the study (path)"
      shown = nodes.inline("", "", nodes.Text(f"{text} ("), shown, nodes.Text(")"))
    node.replace_self(shown)


def setup(app: Sphinx) -> dict[str, Any]:
  app.add_config_value("repo_files_root", "", "env", types=[str])
  # before Sphinx's download collector (priority 500) registers the file for copying
  app.connect("doctree-read", _links_to_paths, priority=400)
  return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
