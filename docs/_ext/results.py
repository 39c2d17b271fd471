"""Sphinx extension: figures read from benchmarks/results/ at build time, and the results page.

* The role ``{result}`` renders a value of a results file: ``{result}`rl/throughput.json:heads.dense.frames_per_sec.jaxlab;,.0f```
  reads ``benchmarks/results/rl/throughput.json``, follows the keys (a list takes an integer
  index, a list of numbers also ``mean``, ``std``, ``min`` or ``max``; a key with a dot in it is
  written in brackets, ``results.[dispatch_bound_4.8k_params].speedup``)
  and formats the value with the Python format spec after ``;`` (optional; without it an int is
  shown as is and a float to 4 significant digits); ``;*1000:.1f`` multiplies by 1000 first
  (seconds shown as ms). ``;``, not ``|``: a ``|`` would end a cell of
  a Markdown table.
  A missing file or key is an error naming the page, its line and the reference, which fails the
  ``-W`` build. So a figure quoted in the docs cannot differ from its file.
* The page ``results`` (docs/results.md) gets, where its line ``% results-sections`` is, one
  section per ``benchmarks/results/**.json`` file: what it is and the command that wrote it
  (``results_catalog.py``), the date (its last commit) and the machine where the file records
  them, its figures (the first leaf values, with the key path the role takes) and the .md / .png
  files beside it.

tests/test_results_page.py resolves every reference of every page through :func:`lookup` and
checks the page lists every results file, without a Sphinx build.

Configuration (``conf.py``): ``results_dir``, the folder the references are relative to.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import subprocess
from typing import Any

from docutils import nodes

from results_catalog import CATALOG

#: A reference in a page's source: {result}`path:key.key;format`.
REFERENCE = re.compile(r"(?<!`)\{result\}`([^`\n]+)`")  # not `{result}` in code
#: The line of docs/results.md that the generated sections replace.
MARKER = "% results-sections"
#: One key of a key path: ``[a key.with dots]`` or a run of characters without dots.
_KEY = re.compile(r"\[([^\]]+)\]|([^.\[\]]+)")
_KEY_PATH = re.compile(r"(?:\[[^\]]+\]|[^.\[\]]+)(?:\.(?:\[[^\]]+\]|[^.\[\]]+))*")
#: Top-level keys that say where a file was measured.
MACHINE_KEYS = ("machine", "device", "devices", "cpu", "cpus", "platform", "backend", "processor", "jax",
                "optax", "xla_flags", "load_avg_1m", "load_average", "load_avg_start", "load_average_start")
_LEAVES_SHOWN = 12


class ResultError(ValueError):
  """A ``{result}`` reference that does not resolve (a missing file, key or a bad format)."""


def _is_number(value: Any) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mean(values: list[float]) -> float:
  return sum(values) / len(values)


#: What a key path may take of a list of numbers (the seeds of a cell). ``std`` is numpy's default,
#: the population standard deviation (ddof 0), as the studies' tables report it.
_STATISTICS = {
    "mean": _mean,
    "std": lambda v: math.sqrt(sum((x - _mean(v)) ** 2 for x in v) / len(v)),
    "min": min,
    "max": max,
}


def _load(results_dir: pathlib.Path, relpath: str) -> Any:
  file = results_dir / relpath
  if not file.is_file():
    raise ResultError(f"no file benchmarks/results/{relpath}")
  return json.loads(file.read_text(encoding="utf-8"))


def lookup(results_dir: pathlib.Path | str, reference: str) -> str:
  """The text a ``{result}`` reference renders as.

  Args:
    results_dir: the folder the references are relative to (benchmarks/results/).
    reference: ``path:key.key...`` with an optional ``;format`` (a Python format spec); a key
      with a dot in it is written in brackets.

  Returns:
    The value, formatted.

  Raises:
    ResultError: the file, a key or the format does not exist or does not apply; the message
      names which.
  """
  body, _, spec = reference.partition(";")
  relpath, sep, keypath = body.strip().partition(":")
  if not sep or not keypath:
    raise ResultError(f"{reference!r} is not 'FILE.json:key.key[;format]'")
  value: Any = _load(pathlib.Path(results_dir), relpath)
  walked = []
  keys = [quoted or plain for quoted, plain in _KEY.findall(keypath)]
  if not _KEY_PATH.fullmatch(keypath.strip()):
    raise ResultError(f"{reference!r}: the key path {keypath!r} does not parse (a key with a dot goes in brackets)")
  for key in keys:
    if isinstance(value, list) and re.fullmatch(r"-?\d+", key) and -len(value) <= int(key) < len(value):
      value = value[int(key)]
    elif isinstance(value, dict) and key in value:
      value = value[key]
    elif isinstance(value, list) and key in _STATISTICS and value and all(_is_number(v) for v in value):
      value = _STATISTICS[key](value)  # over seeds: "l2re.mean", "l2re.std"
    else:
      where = ".".join(walked) or "the top level"
      have = list(value)[:12] if isinstance(value, dict) else (f"a list of {len(value)}" if isinstance(value, list)
                                                                else repr(value))
      raise ResultError(f"benchmarks/results/{relpath} has no key {key!r} under {where} (there: {have})")
    walked.append(key)
  if isinstance(value, (dict, list)):
    raise ResultError(f"benchmarks/results/{relpath}:{keypath} is a {type(value).__name__}, not a value")
  return _format(value, spec.strip(), reference)


def _format(value: Any, spec: str, reference: str) -> str:
  if value is None:
    return "n/a"
  scale = re.fullmatch(r"\*([0-9.e+-]+):(.*)", spec)  # "*1000:.1f": seconds shown as ms
  if scale:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
      raise ResultError(f"{value!r} is not a number to scale ({reference})")
    value, spec = value * float(scale.group(1)), scale.group(2)
  if spec:
    try:
      return format(value, spec)
    except (ValueError, TypeError) as error:
      raise ResultError(f"format {spec!r} does not apply to {value!r} ({reference}): {error}") from None
  if isinstance(value, float) and math.isfinite(value):
    return f"{value:.4g}"
  return str(value)


def references(text: str) -> list[tuple[int, str]]:
  """(1-based line, reference) of every ``{result}`` role in a page's source."""
  return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in REFERENCE.finditer(text)]


def unresolved(docs_dir: pathlib.Path | str, results_dir: pathlib.Path | str) -> list[str]:
  """'page:line: reference: why' for every reference under docs_dir (and the included top-level pages)."""
  docs_dir = pathlib.Path(docs_dir)
  pages = [p for p in sorted(docs_dir.rglob("*.md")) if not {"_build", "_generated"} & set(p.relative_to(docs_dir).parts)]
  pages += [docs_dir.parent / name for name in ("BUILD_NOTES.md", "CHANGELOG.md", "README.md")
            if (docs_dir.parent / name).exists()]
  problems = []
  for page in pages:
    for line, reference in references(page.read_text(encoding="utf-8")):
      try:
        lookup(results_dir, reference)
      except ResultError as error:
        problems.append(f"{page.relative_to(docs_dir.parent).as_posix()}:{line}: {{result}}`{reference}`: {error}")
  return problems


# ---------------------------------------------------------------- the results page

def results_files(results_dir: pathlib.Path | str) -> list[str]:
  """Every ``**/*.json`` under results_dir, relative to it, sorted."""
  results_dir = pathlib.Path(results_dir)
  return sorted(p.relative_to(results_dir).as_posix() for p in results_dir.rglob("*.json"))


def _leaves(value: Any, prefix: str = ""):
  if isinstance(value, dict):
    for key, item in value.items():
      key = f"[{key}]" if "." in str(key) else str(key)
      yield from _leaves(item, f"{prefix}.{key}" if prefix else key)
  elif isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
    numbers = [v for v in value if v is not None and math.isfinite(v)]
    shown = ", ".join(_format(v, "", prefix) for v in value[:4]) + (", ..." if len(value) > 4 else "")
    yield prefix, f"[{shown}]" + (f" (mean {sum(numbers) / len(numbers):.4g})" if len(value) > 1 and numbers else "")
  elif isinstance(value, list):
    for i, item in enumerate(value):
      yield from _leaves(item, f"{prefix}.{i}" if prefix else str(i))
  else:
    yield prefix, _format(value, "", prefix)


def _committed(file: pathlib.Path) -> str:
  try:
    out = subprocess.run(["git", "log", "-1", "--format=%cs", "--", file.name], cwd=file.parent,
                         capture_output=True, text=True, timeout=20)
    return out.stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return ""


def _cell(text: str) -> str:
  return str(text).replace("|", "\\|").replace("\n", " ")


def _section(results_dir: pathlib.Path, relpath: str, beside: list[str], page_dir: str) -> list[str]:
  file = results_dir / relpath
  data = json.loads(file.read_text(encoding="utf-8"))
  what, command, page = CATALOG.get(relpath, ("(not described in docs/_ext/results_catalog.py)", "", ""))
  up = os.path.relpath(results_dir, page_dir).replace(os.sep, "/")  # for the plots
  lines = [f"## `{relpath}`", "", what]
  if page:
    lines[-1] += f" Discussed in [{page.removesuffix('.md')}]({page})."
  lines.append("")
  if command:
    lines += ["```bash", command, "```", ""]
  recorded = []
  if isinstance(data, dict):
    recorded = [f"{k} {_format(data[k], '', k)}" for k in MACHINE_KEYS
                if k in data and not isinstance(data[k], (dict, list))]
    for group in ("machine", "config", "setup", "_meta"):
      if isinstance(data.get(group), dict):
        recorded += [f"{k} {_format(v, '', k)}" for k, v in data[group].items()
                     if k in MACHINE_KEYS and not isinstance(v, (dict, list))]
  date = _committed(file)
  facts = ([f"committed {date}"] if date else []) + ([f"recorded: {', '.join(recorded)}"] if recorded else [])
  if facts:
    lines += ["; ".join(facts).capitalize() + ".", ""]
  # the figures: numbers, not the settings the file also records
  settings = ("config", "machine", "setup", "_meta")
  leaves = [(path, value) for path, value in _leaves(data)
            if path.split(".")[0] not in settings and re.match(r"^[\[(-]?[\d.]", value) and value != "n/a"]
  lines += ["| key (for `{result}`) | value |", "|---|---|"]
  lines += [f"| `{_cell(path)}` | {_cell(value)} |" for path, value in leaves[:_LEAVES_SHOWN]]
  if len(leaves) > _LEAVES_SHOWN:
    lines += [f"| ... | {len(leaves) - _LEAVES_SHOWN} more values |"]
  lines.append("")
  for other in beside:
    if other.endswith(".png"):
      lines += [f"![{other}]({up}/{other})", ""]
    else:
      lines += [f"Beside it: `benchmarks/results/{other}`.", ""]
  return lines


def results_page_markdown(results_dir: pathlib.Path | str, page_dir: pathlib.Path | str) -> str:
  """The generated sections of the results page (Markdown), one per results file.

  Args:
    results_dir: benchmarks/results/.
    page_dir: the folder of the page the sections go in (for relative links to the .md/.png files).

  Returns:
    The Markdown that replaces the page's marker line.
  """
  results_dir = pathlib.Path(results_dir)
  jsons = results_files(results_dir)
  others = sorted(p.relative_to(results_dir).as_posix() for p in results_dir.rglob("*")
                  if p.suffix in (".md", ".png") and p.is_file())
  stem = lambda path: path.rsplit(".", 1)[0]  # noqa: E731
  owner: dict[str, str] = {}
  for other in others:
    candidates = [j for j in jsons if j.rsplit("/", 1)[0] == other.rsplit("/", 1)[0]
                  and (stem(other) == stem(j) or stem(other).startswith(stem(j) + "_"))]
    same_folder = [j for j in jsons if j.rsplit("/", 1)[0] == other.rsplit("/", 1)[0]]
    # a table or plot named after no file of its folder (rollout_ns1e-3.png) belongs to the folder's study
    studies = [j for j in same_folder if j.endswith("/study.json")]
    chosen = max(candidates, key=len) if candidates else (studies or same_folder or [None])[0]
    if chosen:
      owner[other] = chosen
  lines: list[str] = []
  for relpath in jsons:
    lines += _section(results_dir, relpath, [o for o in others if owner.get(o) == relpath], str(page_dir))
  return "\n".join(lines)


# ---------------------------------------------------------------- Sphinx

def _role(name, rawtext, text, lineno, inliner, options=None, content=None):
  app = inliner.document.settings.env.app
  try:
    value = lookup(app.config.results_dir, text)
  except ResultError as error:
    docname = inliner.document.settings.env.docname
    message = inliner.reporter.error(f"{docname}: {{result}}`{text}`: {error}", line=lineno)
    return [inliner.problematic(rawtext, rawtext, message)], [message]
  relpath = text.partition(":")[0].strip()
  inliner.document.settings.env.note_dependency(str(pathlib.Path(app.config.results_dir) / relpath))
  return [nodes.inline(rawtext, value, classes=["result"])], []


def _fill_results_page(app, docname, source):
  if MARKER not in source[0]:
    return
  page_dir = pathlib.Path(app.srcdir) / os.path.dirname(docname)
  for relpath in results_files(app.config.results_dir):
    app.env.note_dependency(str(pathlib.Path(app.config.results_dir) / relpath))
  source[0] = source[0].replace(MARKER, results_page_markdown(app.config.results_dir, page_dir))


def setup(app):
  app.add_config_value("results_dir", "", "env", types=[str])
  app.add_role("result", _role)
  app.connect("source-read", _fill_results_page)
  return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
