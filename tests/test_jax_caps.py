"""Only the rl extra holds jax back, and only by gymnax's own declared cap.

Measured on Python 3.12 in fresh virtual environments (the install matrix, BUILD_NOTES.md; no network
here, so nothing is resolved at test time): ``pip install 'jaxlab[rl]'`` resolves jax 0.11.2, the
newest that gymnax 1.0.1 (``jax<0.12``) allows, and every other extra the newest jax, 0.12.0.1.
These tests keep it that way: no other section of setup.cfg names a package known to cap jax, no
installed dependency starts capping it, and the day gymnax lifts its cap the test says so, so the
docs' note on it goes.
"""

import configparser
import importlib.metadata
import pathlib

import pytest
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: The newest jax release jaxlab was tested with (make test-latest).
NEWEST_JAX_TESTED = "0.12.0.1"

#: Distributions whose metadata caps jax below NEWEST_JAX_TESTED (read from their releases), and the
#: one extra allowed to name each: the field's library for it, with no release free of the cap.
JAX_CAPPED = {"gymnax": ("rl", "gymnax 1.0.1 declares jax<0.12,>=0.6")}


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


def test_only_the_rl_extra_names_a_package_that_caps_jax():
  for section, names in _setup_cfg().items():
    capped = {n for n in names & set(JAX_CAPPED) if JAX_CAPPED[n][0] != section}
    assert not capped, (f"setup.cfg {section} names {sorted(capped)}: {[JAX_CAPPED[n][1] for n in capped]}, so "
                        f"pip would resolve a jax older than {NEWEST_JAX_TESTED} for it too")
  for name, (extra, _) in JAX_CAPPED.items():
    assert name in _setup_cfg()[extra], f"{name} left the {extra} extra: update JAX_CAPPED and the install docs"


@pytest.mark.parametrize("dist", sorted(JAX_CAPPED))
def test_the_capping_release_still_caps_jax(dist):
  """When a release lifts the cap, the install docs' note on it (getting started, BUILD_NOTES) is stale."""
  try:
    requires = importlib.metadata.requires(dist) or []
  except importlib.metadata.PackageNotFoundError:
    pytest.skip(f"{dist} is not installed")
  jax = [Requirement(r) for r in requires if Requirement(r).name.lower() == "jax" and _applies(Requirement(r))]
  assert jax and not any(r.specifier.contains(NEWEST_JAX_TESTED, prereleases=True) for r in jax), \
      f"{dist} {importlib.metadata.version(dist)} allows jax {NEWEST_JAX_TESTED} ({[str(r) for r in jax]}): drop it " \
      "from JAX_CAPPED and the install docs' note on its cap"


def test_no_installed_dependency_caps_jax_below_the_newest_tested():
  """Catches a dependency that starts capping jax, in whichever environment runs the suite."""
  capped = []
  for name in set().union(*_setup_cfg().values()) - set(JAX_CAPPED):
    try:
      requires = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
      continue
    for line in requires:
      req = Requirement(line)
      if req.name.lower() == "jax" and _applies(req) and not req.specifier.contains(NEWEST_JAX_TESTED, prereleases=True):
        capped.append(f"{name} {importlib.metadata.version(name)}: {line}")
  assert not capped, f"these cap jax below {NEWEST_JAX_TESTED}: {capped}"


def test_install_lines_install_extras_only():
  """No install path adds a package after an extra (as ``pip install --no-deps gymnax`` once did): one
  command per use, and the extra holds what it needs."""
  for path in ("Makefile", "docs/getting_started.md", "colabs/src/_install.py"):
    assert "--no-deps" not in (ROOT / path).read_text(), f"{path} installs a package --no-deps"
