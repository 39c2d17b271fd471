"""No extra holds jax back: setup.cfg names no package known to cap jax below the newest release tested.

Measured on Python 3.12 in fresh virtual environments (no network here, so nothing is resolved at
test time): with gymnax in the rl extra, ``pip install '.[rl]'`` resolved jax 0.11.2 (gymnax 1.0.1
declares ``jax<0.12``) while jax 0.12.0.1 was out; with the extra as it is now, jax 0.12.0.1, and
gymnax 1.0.1 follows with ``pip install --no-deps`` (``jaxlab.registry.NO_DEPS``). These tests keep
it that way: the capping package stays out of every extra, the extra carries the dependencies that
``--no-deps`` skips, every install path runs the same ``--no-deps`` line, and no installed
dependency declares a cap below the newest jax tested.
"""

import configparser
import importlib.metadata
import pathlib

import pytest
from packaging.requirements import Requirement

from jaxlab.registry import NO_DEPS

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: The newest jax release jaxlab was tested with (make test-latest).
NEWEST_JAX_TESTED = "0.12.0.1"

#: Distributions whose metadata caps jax below NEWEST_JAX_TESTED (read from their releases).
JAX_CAPPED = {"gymnax": "gymnax 1.0.1 declares jax<0.12,>=0.6"}


def _names(text: str) -> set[str]:
  return {Requirement(line).name.lower() for line in (raw.split("#")[0].strip() for raw in text.splitlines()) if line}


def _setup_cfg() -> dict[str, set[str]]:
  """Distribution names per section: install_requires and each extra."""
  cfg = configparser.ConfigParser()
  cfg.read(ROOT / "setup.cfg")
  out = {"install_requires": _names(cfg["options"]["install_requires"])}
  out.update({extra: _names(text) for extra, text in cfg["options.extras_require"].items()})
  return out


def _applies(req: Requirement) -> bool:
  """Whether a Requires-Dist line applies to a plain install here (no extra, this Python)."""
  return req.marker is None or req.marker.evaluate({"extra": ""})


def test_no_extra_names_a_package_that_caps_jax():
  for section, names in _setup_cfg().items():
    capped = names & set(JAX_CAPPED)
    assert not capped, (f"setup.cfg {section} names {sorted(capped)}: {[JAX_CAPPED[n] for n in capped]}, so "
                        f"pip would resolve a jax older than {NEWEST_JAX_TESTED}; install it with --no-deps "
                        "(jaxlab.registry.NO_DEPS)")
  assert set(NO_DEPS) == set(JAX_CAPPED)


@pytest.mark.parametrize("dist", sorted(NO_DEPS))
def test_the_extra_carries_what_no_deps_skips(dist):
  """Every dependency of the installed release, except jax itself, is named by setup.cfg."""
  try:
    requires = importlib.metadata.requires(dist) or []
  except importlib.metadata.PackageNotFoundError:
    pytest.skip(f"{dist} is not installed")
  named = set().union(*_setup_cfg().values())
  needed = {Requirement(r).name.lower() for r in requires if _applies(Requirement(r))} - {"jax"}
  assert needed <= named, f"{dist}'s dependencies {sorted(needed - named)} are in no section of setup.cfg"


def test_every_install_path_runs_the_same_no_deps_line():
  requirement = NO_DEPS["gymnax"]
  makefile = (ROOT / "Makefile").read_text()
  assert makefile.count(f'--no-deps "{requirement}"') == 2, "make install and make test-latest"
  assert f'no_deps = ["{requirement}"]' in (ROOT / "colabs" / "src" / "_install.py").read_text()
  assert f'pip install -c constraints.txt --no-deps "{requirement}"' in (ROOT / "docs" / "getting_started.md").read_text()


def test_no_installed_dependency_caps_jax_below_the_newest_tested():
  """Catches a dependency that starts capping jax, in whichever environment runs the suite."""
  capped = []
  for name in set().union(*_setup_cfg().values()) - set(NO_DEPS):
    try:
      requires = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
      continue
    for line in requires:
      req = Requirement(line)
      if req.name.lower() == "jax" and _applies(req) and not req.specifier.contains(NEWEST_JAX_TESTED, prereleases=True):
        capped.append(f"{name} {importlib.metadata.version(name)}: {line}")
  assert not capped, f"these cap jax below {NEWEST_JAX_TESTED}: {capped}"
