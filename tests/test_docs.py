"""The documentation site builds with warnings as errors, and its examples run.

* The Sphinx build of docs/ with ``-W``: autodoc of every public name, every cross-reference
  (``nitpicky``), the notebooks, and the public-API check of docs/_ext/public_api.py. Any warning
  fails it. The ``dummy`` builder reads and resolves everything the html builder does but writes
  no pages (the Makefile's ``docs`` target writes them).
* The same build with the method extras' packages hidden (gymnax, envpool, exponax, h5py, grain,
  ...: what ``make docs-light`` installs without) succeeds with ``-W`` and has every page and
  every API entry of the full build: docs/conf.py mocks each absent one.
* Every ``>>>`` example in a jaxlab docstring runs as a doctest.
* Every ``>>>`` example in a fenced ``python`` block of docs/**/*.md runs as a doctest; the blocks
  of one page run in order and share their names; blocks without a prompt are not run.
* The checks themselves: a tiny throwaway project fails to build on an undocumented public
  function, a public name on no API page, a module with ``__all__`` that is not checked, a dead
  cross-reference, a link to a missing file, and a guide naming a function in inline code without
  linking it (docs/_ext/api_mentions.py), naming each (with page and line); fixed, it builds, and
  a link to a repository file shows the file's path (docs/_ext/repo_files.py).
"""

from __future__ import annotations

import doctest
import importlib
import pathlib
import pickle
import re
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# A fence opening a code block: ```python, ~~~pycon, ```{code-block} python.
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?:\{code(?:-block|-cell)?\}\s*)?(?P<lang>[\w+-]*)")
EXAMPLE_LANGUAGES = ("python", "py", "pycon")


def _sphinx(srcdir: pathlib.Path, outdir: pathlib.Path, *options: str, builder: str = "dummy",
            launcher: tuple[str, ...] = ("-m", "sphinx")) -> subprocess.CompletedProcess:
  command = [sys.executable, *launcher, "-q", "--keep-going", *options, "-b", builder,
             "-d", str(outdir / "doctrees"), str(srcdir), str(outdir / builder)]
  return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600)


def _output(result: subprocess.CompletedProcess) -> str:
  return (result.stdout + result.stderr).strip()


@pytest.fixture(scope="module")
def full_build(tmp_path_factory) -> tuple[subprocess.CompletedProcess, pathlib.Path]:
  out = tmp_path_factory.mktemp("docs_full")
  return _sphinx(DOCS, out, "-W"), out


def test_docs_build_without_warnings(full_build):
  result, _ = full_build
  status = result.returncode
  assert status == 0, f"the docs build failed (exit {status}):\n{_output(result)[-6000:]}"


# ---------------------------------------------------------------- without the optional packages

# Runs Sphinx with the method extras' packages made unimportable, as in a venv of jaxlab's core
# dependencies and the docs extra only (`make docs-light`).
HIDE_AND_RUN_SPHINX = """\
import importlib.abc, runpy, sys

HIDDEN = set(sys.argv.pop(1).split(","))


class Hidden(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if name.partition(".")[0] in HIDDEN:
      raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
    return None


sys.meta_path.insert(0, Hidden())
sys.argv[0] = "sphinx"
runpy.run_module("sphinx", run_name="__main__", alter_sys=True)
"""


def _environment(out: pathlib.Path):
  with open(out / "doctrees" / "environment.pickle", "rb") as f:
    return pickle.load(f)


def test_docs_build_with_the_optional_packages_absent(full_build, tmp_path):
  """Every page and every API entry of the full build, with each extra's package mocked (~25 s)."""
  from jaxlab.registry import EXTRAS  # noqa: PLC0415 - the packages docs/conf.py mocks when absent
  hidden = sorted(EXTRAS)
  assert {"gymnax", "flashbax", "envpool", "exponax", "h5py", "grain", "tokenizers", "PIL"} <= set(hidden)
  script = tmp_path / "hide_and_run_sphinx.py"
  script.write_text(HIDE_AND_RUN_SPHINX, encoding="utf-8")
  light = _sphinx(DOCS, tmp_path / "out", "-W", launcher=(str(script), ",".join(hidden)))
  assert light.returncode == 0, f"the build without the extras failed:\n{_output(light)[-6000:]}"
  env, full_env = _environment(tmp_path / "out"), _environment(full_build[1])
  assert env.config.autodoc_mock_imports == hidden  # each one was absent, hence mocked
  assert full_env.config.autodoc_mock_imports == []  # the full build imports them for real
  assert env.found_docs == full_env.found_docs and len(env.found_docs) > 30
  # the same entries: what imports gymnax, envpool, exponax, h5py, grain ... is documented too
  objects, full_objects = (set(e.domaindata["py"]["objects"]) for e in (env, full_env))
  assert objects == full_objects
  assert {"jaxlab.rl.make_env", "jaxlab.rl.make_atari", "jaxlab.pde.data.generate",
          "jaxlab.pde.data.files.TheWell", "jaxlab.ot_clip.data.tokenizer.train_tokenizer"} <= objects


# ---------------------------------------------------------------- docstring examples

def _modules_with_examples() -> list[str]:
  found = []
  for path in sorted((REPO / "jaxlab").rglob("*.py")):
    if path.name != "__main__.py" and ">>>" in path.read_text(encoding="utf-8"):
      parts = path.relative_to(REPO).with_suffix("").parts
      found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
  return found


def _run(tests: list[doctest.DocTest]) -> tuple[int, str]:
  runner = doctest.DocTestRunner(optionflags=FLAGS)
  report: list[str] = []
  for test in tests:
    runner.run(test, out=report.append)
  return runner.failures, "".join(report)


def test_the_scan_finds_docstring_examples():
  assert "jaxlab.optim.momo" in _modules_with_examples()


@pytest.mark.parametrize("modname", _modules_with_examples())
def test_docstring_examples(modname):
  tests = [t for t in doctest.DocTestFinder().find(importlib.import_module(modname)) if t.examples]
  assert tests, f"{modname} has '>>>' in its source but no docstring example"
  failures, report = _run(tests)
  assert failures == 0, report


# ---------------------------------------------------------------- examples in the Markdown pages

def python_blocks(text: str) -> list[tuple[int, str]]:
  """(0-based line of the first code line, code) of each fenced python block that has a ``>>>``."""
  blocks, lines, i = [], text.splitlines(), 0
  while i < len(lines):
    opening = FENCE.match(lines[i])
    if not opening:
      i += 1
      continue
    fence, indent = opening["fence"], len(opening["indent"])
    end = i + 1
    while end < len(lines) and not re.match(rf"^ {{0,{indent + 3}}}{fence[0]}{{{len(fence)},}}\s*$", lines[end]):
      end += 1
    code = textwrap.dedent("\n".join(lines[i + 1:end]))
    if opening["lang"] in EXAMPLE_LANGUAGES and re.search(r"^\s*>>>", code, re.M):
      blocks.append((i + 1, code + "\n"))
    i = end + 1
  return blocks


def page_doctest(path: pathlib.Path) -> doctest.DocTest:
  """The ``>>>`` examples of a Markdown page as one doctest, their line numbers those of the page."""
  text = path.read_text(encoding="utf-8")
  name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
  examples = []
  for first_line, code in python_blocks(text):
    for example in doctest.DocTestParser().get_examples(code, name):
      example.lineno += first_line
      examples.append(example)
  return doctest.DocTest(examples, {"__name__": "__docs__"}, name, str(path), 0, text)


def _pages_with_examples() -> list[str]:
  pages = [p for p in sorted(DOCS.rglob("*.md")) if not {"_build", "_generated"} & set(p.relative_to(DOCS).parts)]
  return [p.relative_to(DOCS).as_posix() for p in pages if python_blocks(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", _pages_with_examples())
def test_page_examples(page):
  failures, report = _run([page_doctest(DOCS / page)])
  assert failures == 0, report


def test_page_examples_runs_prompted_python_blocks_only(tmp_path):
  page = tmp_path / "page.md"
  page.write_text(textwrap.dedent("""\
      # A page

      ```python
      >>> x = 2
      ```

      ```python
      y = undefined_name  # no prompt: shown, not run
      ```

      ```bash
      >>> not python at all
      ```

      ```{code-block} python
      >>> x + 1
      4
      ```
      """), encoding="utf-8")
  test = page_doctest(page)
  assert [e.source for e in test.examples] == ["x = 2\n", "x + 1\n"]
  failures, report = _run([test])
  assert failures == 1 and "line 16" in report and "Expected:\n    4\nGot:\n    3" in report, report


# ---------------------------------------------------------------- the checks fail a build

def _tiny_project(root: pathlib.Path, *, broken: bool) -> pathlib.Path:
  """A package ``root/fakepkg`` and a two-page site ``root/site`` that uses docs/_ext/."""
  (root / "fakepkg").mkdir(parents=True)
  (root / "fakepkg" / "__init__.py").write_text(textwrap.dedent('''\
      """A package for the test."""
      from fakepkg.core import documented, undocumented, unlisted
      __all__ = ["documented", "undocumented", "unlisted"]
      '''))
  see = "fakepkg.dead_target" if broken else "fakepkg.core.unlisted"  # the second: where it is defined
  (root / "fakepkg" / "core.py").write_text(textwrap.dedent(f'''\
      def documented():
        """One; see :func:`{see}` and :func:`unlisted`."""
        return 1

      def undocumented():
        {'' if broken else '"""Two."""'}
        return 2

      def unlisted():
        """Three."""
        return 3
      '''))
  (root / "fakepkg" / "hidden.py").write_text('__all__ = ["thing"]\n\ndef thing():\n  """A thing."""\n')
  site = root / "site"
  site.mkdir()
  modules = ["fakepkg"] if broken else ["fakepkg", "fakepkg.hidden"]
  (site / "conf.py").write_text(textwrap.dedent(f"""\
      import sys
      sys.path[:0] = [{str(root)!r}, {str(DOCS / "_ext")!r}]
      extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser", "public_api", "api_mentions",
                    "repo_files"]
      nitpicky = True
      api_mentions_pages = ["guide"]
      public_api_packages = ["fakepkg"]
      public_api_modules = {modules!r}
      repo_files_root = {str(root)!r}
      """))
  pages = ["fakepkg.documented", "fakepkg.undocumented"] + ([] if broken else ["fakepkg.unlisted", "fakepkg.hidden.thing"])
  (site / "index.rst").write_text("Fake\n====\n\n.. toctree::\n\n   links\n   guide\n\n"
                                  + "".join(f".. autofunction:: {p}\n\n" for p in pages))
  linked = "gone.py" if broken else "core.py"
  (site / "links.md").write_text(f"# Links\n\nThe [core module](../fakepkg/{linked}) and [the index](index.rst).\n")
  # A guide naming the package's functions in inline code: linked once per page (the fix), or not.
  first = "`fakepkg.documented()`" if broken else "[`fakepkg.documented()`](#fakepkg.documented)"
  (site / "guide.md").write_text(textwrap.dedent(f"""\
      # Guide

      Call {first} first, then
      `fakepkg.core.documented` (the same function), {'`fakepkg.unlisted`' if broken else '{func}`fakepkg.unlisted`'}
      and {'`fakepkg.gone`' if broken else '`python -m fakepkg.core`'}; `fakepkg.core._helper` is private.

      ```python
      fakepkg.undocumented()  # a code block: exempt
      ```
      """))
  return site


def test_the_checks_fail_a_build_and_name_each_problem(tmp_path):
  broken = _sphinx(_tiny_project(tmp_path / "broken", broken=True), tmp_path / "out_broken")  # no -W
  output = _output(broken)
  assert broken.returncode != 0, output
  for expected in ("function fakepkg.undocumented has no docstring",
                   "fakepkg.unlisted is public but on no API page",
                   "fakepkg.hidden defines __all__ but is not in public_api_modules",
                   "py:func reference target not found: fakepkg.dead_target",
                   "cross-reference target not found: '../fakepkg/gone.py'",
                   "guide.md:3: WARNING: `fakepkg.documented` is mentioned but linked nowhere on this page",
                   "guide.md:4: WARNING: `fakepkg.core.documented` is mentioned but linked nowhere on this page",
                   "guide.md:4: WARNING: `fakepkg.unlisted` is on no API page",
                   "guide.md:5: WARNING: `fakepkg.gone` names nothing"):
    assert expected in output, f"{expected!r} not in:\n{output}"


def test_the_fixed_tiny_project_builds_and_shows_repository_files_as_paths(tmp_path):
  site = _tiny_project(tmp_path / "fixed", broken=False)
  fixed = _sphinx(site, tmp_path / "out", "-W", builder="html")
  assert fixed.returncode == 0, _output(fixed)
  page = (tmp_path / "out" / "html" / "links.html").read_text(encoding="utf-8")
  assert re.search(r"core module \(<code[^>]*repo-file[^>]*><span[^>]*>fakepkg/core\.py</span></code>\)", page), page
