"""Sphinx configuration of jaxlab's documentation site (the Makefile's ``docs`` target; checked by
tests/test_docs.py).

The API reference comes from the docstrings (autodoc + napoleon, Google style); the notebooks in
``colabs/`` are rendered from their stored outputs (myst-nb, never executed here); BUILD_NOTES.md and
CHANGELOG.md are included as pages; the results page is generated from benchmarks/results/. The
method extras' packages are mocked where absent (below), so the site also builds from jaxlab's core
dependencies and the ``docs`` extra alone (``make docs-light``). Nothing is downloaded at build
time, so there is no intersphinx: references to other projects' types are listed in
``nitpick_ignore_regex`` below. ``nitpicky`` with ``-W`` makes a dead cross-reference fail the
build; ``_ext/public_api.py`` fails it on a public name without a docstring or missing from the API
pages, ``_ext/api_mentions.py`` on a guide that names one of our objects without linking it.
"""

import filecmp
import importlib.util
import os
import pathlib
import re
import shutil
import sys

from sphinx.ext.autodoc.mock import MockFinder

DOCS = pathlib.Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))          # this checkout's jaxlab, not another installed one
sys.path.insert(0, str(DOCS / "_ext"))
# autodoc imports every module; keep JAX on the CPU and quiet about missing accelerators.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# ------------------------------------------------------------------ optional packages
# The method extras (setup.cfg's extras_require: gymnax, envpool, exponax, h5py, grain, ...) are
# not needed to build the site (`make docs-light`): each one that is absent is mocked, so the
# modules that import it at top level still import and autodoc reads their docstrings. One that
# is installed is imported for real, so the full build (`make docs`) documents exactly what runs.
# The list is jaxlab's own: the registry's map from top-level module to extra (one source).
from jaxlab.registry import EXTRAS  # noqa: E402 - needs the sys.path entry above


def _absent(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is None
  except (ImportError, ValueError):  # a broken install, or an import blocker (tests/test_docs.py)
    return True


autodoc_mock_imports = sorted(m for m in EXTRAS if _absent(m))
# autodoc mocks only while it imports a documented module; our extensions (_ext/public_api.py,
# _ext/api_mentions.py) import modules and resolve names outside that, so the same mocks stay in
# place for the whole build.
if autodoc_mock_imports:
  sys.meta_path.insert(0, MockFinder(autodoc_mock_imports))

project = "jaxlab"
author = "jaxlab authors"
copyright = "2024-2026, jaxlab authors"  # noqa: A001 - Sphinx's name

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_nb",
    "public_api",
    "api_mentions",
    "repo_files",
    "results",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = []

# ------------------------------------------------------------------ strictness
nitpicky = True
# Other projects' types, which resolve only through intersphinx (a download at build time, which
# this build does not do): the standard library and jaxlab's dependencies, by package. A jaxlab
# name never matches, so a dead reference to our own code still fails the build.
_FOREIGN = ("collections", "os", "pathlib", "typing",
            "jax", "jaxlib", "numpy", "optax", "flax", "ml_collections", "orbax", "chex", "haiku",
            "jnp", "ott", "gymnax", "flashbax", "exponax", "grain", "tokenizers", "h5py", "envpool", "ale_py", "PIL",
            "pyarrow")
nitpick_ignore_regex = [(r"py:.*", rf"({'|'.join(_FOREIGN)})\..*")]
# Type variables appear in signatures (``Registry(Generic[T])``) but are no API of their own.
nitpick_ignore = [("py:class", "jaxlab.registry.T"),
                  # jaxlab.rl.replay.ReplayState is flashbax's state class; with flashbax mocked
                  # (make docs-light) a signature shows the alias's bare name
                  ("py:class", "ReplayState")]

# ------------------------------------------------------------------ public API check (_ext/public_api.py)
public_api_packages = ["jaxlab"]
public_api_modules = [
    "jaxlab", "jaxlab.nnx_params", "jaxlab.moe.nnx", "jaxlab.pde.nnx", "jaxlab.rl.nnx", "jaxlab.ot_clip.nnx", "jaxlab.load", "jaxlab.config_files", "jaxlab.distributed", "jaxlab.errors", "jaxlab.registry", "jaxlab.report",
    "jaxlab.contract", "jaxlab.experiment", "jaxlab.train", "jaxlab.train.workdir", "jaxlab.tasks", "jaxlab.models", "jaxlab.losses", "jaxlab.optim", "jaxlab.moe",
    "jaxlab.ot_clip", "jaxlab.ot_clip.similarity", "jaxlab.pde", "jaxlab.pde.data", "jaxlab.pde.data.files", "jaxlab.pde.data.resample", "jaxlab.rl",
    "jaxlab.data", "jaxlab.data.digits", "jaxlab.data.batching",
]

# A guide that names one of our objects in inline code (`jaxlab.load_run`) links it somewhere on
# the page, or the build fails (_ext/api_mentions.py says what counts as a mention).
api_mentions_pages = ["getting_started", "guides/*"]

# A Markdown link to a repository file that is not a page (benchmarks/, configs/, ...) renders as
# the file's path in code font (_ext/repo_files.py); a link to a missing file fails the build.
repo_files_root = str(REPO)

# {result}`FILE.json:key.key;format` reads a figure from benchmarks/results/ at build time, and the
# results page lists every results file (_ext/results.py); a reference that does not resolve fails the build.
results_dir = str(REPO / "benchmarks" / "results")

# ------------------------------------------------------------------ autodoc / napoleon
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True     # `seed=0`, not the evaluated repr of a default object
autodoc_inherit_docstrings = False   # a flax module's setup() etc. would show flax's own docs
# Shown by name, not expanded into the union it stands for (a five-line Callable[[...]] otherwise).
autodoc_type_aliases = {"optax.ScalarOrSchedule": "optax.ScalarOrSchedule"}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False           # "Returns:" text stays with its description
napoleon_use_ivar = True

# ------------------------------------------------------------------ MyST / notebooks
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
nb_execution_mode = "off"            # the notebooks' stored outputs are the record; never re-run here

# ------------------------------------------------------------------ HTML
html_theme = "sphinx_book_theme"
html_title = "jaxlab"
html_theme_options = {"show_toc_level": 2, "use_download_button": True}
html_static_path = []


def _copy_notebooks() -> None:
  """colabs/*.ipynb -> docs/_generated/notebooks/ (gitignored): Sphinx reads sources only under docs/.

  Unchanged files are not rewritten (their modification time drives incremental builds); a notebook
  removed from colabs/ is removed here too.
  """
  target = DOCS / "_generated" / "notebooks"
  target.mkdir(parents=True, exist_ok=True)
  sources = {p.name: p for p in sorted((REPO / "colabs").glob("*.ipynb"))}
  for name, source in sources.items():
    if not (target / name).exists() or not filecmp.cmp(source, target / name, shallow=False):
      shutil.copyfile(source, target / name)
  for stale in target.glob("*.ipynb"):
    if stale.name not in sources:
      stale.unlink()


_copy_notebooks()

# index.md's toctree globs for pages that may not exist yet (they are written separately): one
# that matches no page is dropped from the toctree rather than failing the build. A page that
# exists but is in no toctree still fails it.
OPTIONAL_GLOBS = ("getting_started*", "guides/*")


def _drop_empty_globs(app, docname, source):
  if docname != "index":
    return
  lines = source[0].split("\n")
  keep = [line for line in lines
          if line.strip() not in OPTIONAL_GLOBS or any(DOCS.glob(line.strip() + ".md"))]
  source[0] = "\n".join(keep)


def _readable_signature(app, what, name, obj, options, signature, return_annotation):
  """Signatures that read as Python: without flax's bookkeeping fields, and parseable."""
  if signature is None:
    return None
  # every flax module takes `parent` and `name` (flax's bookkeeping), shown with a sentinel repr
  signature = re.sub(r",\s*parent: [^=]*= <flax\.linen\.module\._Sentinel object>, name: str \| None = None\)$",
                     ")", signature)
  # a dataclass field with a default_factory shows as `<factory>`, which is not Python: Sphinx would
  # then render the whole signature as plain text (no links, raw `~typing.` prefixes)
  signature = signature.replace("= <factory>", "= ...").replace("=<factory>", "=...")
  return signature, return_annotation


def setup(app):
  app.connect("source-read", _drop_empty_globs)
  app.connect("autodoc-process-signature", _readable_signature)
