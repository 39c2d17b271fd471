"""The GPU plan's wheels (benchmarks/device_wheels.txt): within the budget, pinned as constraints.txt
pins, covering what setup.cfg asks beyond a GPU node's packages; the offline install adds only what
is missing. No network: the manifest is checked as written; the download is `make device-wheels`."""

from __future__ import annotations

import configparser
import importlib.metadata
import pathlib
import sys
import zipfile

from packaging.requirements import Requirement

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from benchmarks import device_wheels  # noqa: E402

# Beyond device_wheels.NODE_HAS: absl-py, the dependency of optax and chex that setup.cfg also names.
# envpool: the plan's Atari runs on ale-py (env.backend = "ale_py"); envpool's wheel alone is 61 MB.
NOT_SHIPPED = {"absl-py": "optax's and chex's dependency, on the node", "envpool": "replaced by ale-py"}
PLAN_EXTRAS = ("rl", "pde", "atari")  # what the plan's parts import (not clip_data, docs, notebooks, ...)


def _setup_cfg_requirements() -> list[Requirement]:
  cfg = configparser.ConfigParser()
  cfg.read(REPO / "setup.cfg")
  texts = [cfg["options"]["install_requires"], *(cfg["options.extras_require"][e] for e in PLAN_EXTRAS)]
  lines = [line.split("#")[0].strip() for text in texts for line in text.splitlines()]
  return [Requirement(line) for line in lines if line]


def test_the_wheels_fit_the_budget_and_replace_nothing_the_node_has():
  wheels = device_wheels.read_manifest()
  names = [w.name for w in wheels]
  assert len(names) == len(set(names)), "a distribution listed twice"
  assert sum(w.bytes for w in wheels) <= device_wheels.BUDGET_BYTES
  assert not set(names) & {device_wheels.normalise(n) for n in device_wheels.NODE_HAS}
  for w in wheels:  # CPython 3.12 (or pure Python) on manylinux x86-64, a file of the pinned release
    name, version = w.requirement.split("==")
    tags = w.file[:-len(".whl")].split("-")[-3:]
    assert w.file.endswith(".whl") and device_wheels.normalise(w.file.split("-")[0]) == w.name, w
    assert w.file.split("-")[1] == version, w
    assert tags[0] in ("py3", "py2.py3", "cp312") and (tags[2] == "any" or "manylinux" in tags[2]), w
    assert w.sha256 == device_wheels.BUILT or len(w.sha256) == 64, w


def test_the_wheels_are_the_releases_constraints_txt_pins():
  pins = {}
  for line in (REPO / "constraints.txt").read_text().splitlines():
    if "==" in line:
      name, version = line.split("==")
      pins[device_wheels.normalise(name)] = version.strip()
  for w in device_wheels.read_manifest():
    assert pins.get(w.name) == w.requirement.split("==")[1], f"{w.requirement}; constraints.txt: {pins.get(w.name)}"


def test_every_requirement_of_the_plan_is_shipped_or_on_the_node():
  shipped = {w.name for w in device_wheels.read_manifest()}
  node = {device_wheels.normalise(n) for n in device_wheels.NODE_HAS} | set(NOT_SHIPPED)
  for req in _setup_cfg_requirements():
    name = device_wheels.normalise(req.name)
    assert name in shipped | node, f"setup.cfg asks for {req}; neither shipped nor on the node"
    assert name in node or req.specifier.contains(next(
        w.requirement.split("==")[1] for w in device_wheels.read_manifest() if w.name == name)), req


def _wheel(folder: pathlib.Path, name: str, version: str) -> str:
  """A minimal pure-Python wheel of one module ``<name>.py`` (``VALUE = version``)."""
  file = f"{name}-{version}-py3-none-any.whl"
  info = f"{name}-{version}.dist-info"
  with zipfile.ZipFile(folder / file, "w") as z:
    z.writestr(f"{name}.py", f"VALUE = {version!r}\n")
    z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(f"{info}/RECORD", "")
  return file


def test_the_install_adds_only_what_is_missing_offline(tmp_path):
  wheels_dir, target = tmp_path / "wheels", tmp_path / "site"
  wheels_dir.mkdir()
  numpy = importlib.metadata.version("numpy")
  manifest = [device_wheels.Wheel("jaxlab-probe-dist==1.0", _wheel(wheels_dir, "jaxlab_probe_dist", "1.0"), 1, "-", ""),
              # the machine has numpy: its (fake, older) wheel must not go in, nor shadow it
              device_wheels.Wheel("numpy==0.1", _wheel(wheels_dir, "numpy", "0.1"), 1, "-", ""),
              device_wheels.Wheel("jaxlab-absent==2.0", "jaxlab_absent-2.0-py3-none-any.whl", 1, "-", "")]
  sys.path.insert(0, str(target))
  try:
    got = device_wheels.install(wheels_dir, target, manifest)
    assert got["installed"] == ["jaxlab-probe-dist==1.0"] and got["present"] == {"numpy": numpy}
    assert got["missing"] == ["jaxlab_absent-2.0-py3-none-any.whl"] and got["pip_returncode"] == 0, got
    assert (target / "jaxlab_probe_dist.py").exists() and not (target / "numpy.py").exists()
    again = device_wheels.install(wheels_dir, target, manifest[:2])  # a second run finds it there
    assert again["installed"] == [] and again["present"]["jaxlab-probe-dist"] == "1.0"
  finally:
    sys.path.remove(str(target))
