r"""The wheels of the GPU plan: downloaded here (``make device-wheels``), installed offline there.

``benchmarks/device_wheels.txt`` lists, one per line, a requirement pinned as constraints.txt pins
it, its wheel file for CPython 3.12 on manylinux x86-64, its bytes, its sha256 and why the plan
needs it: everything ``benchmarks/accelerator.py`` imports that a cluster GPU node lacks when it has
jax with CUDA, flax, optax, chex, orbax-checkpoint, h5py and numpy (``NODE_HAS``), within
``BUDGET_BYTES`` (the working tree that travels to a device machine is limited to 64 MiB, the
source tree ~10 MiB of it).

  python benchmarks/device_wheels.py download --dest .whl     # here, with PyPI: what make device-wheels runs
  python benchmarks/device_wheels.py install --wheels .whl    # there, offline: prints what it did (JSON)

``install`` puts each wheel whose distribution this interpreter does not have (any version) into
``--target`` (default ``<tmp>/jaxlab-device-site-<interpreter>``) with ``pip install --no-index
--no-deps``: nothing the machine has is reinstalled, upgraded or shadowed, so its jax, flax and
optax stay as they are, and no resolver runs (gymnax's ``jax<0.12`` is not enforced: gymnax 1.0.1
steps the MinAtar games the same on jax 0.12, BUILD_NOTES.md).
The caller puts the target on ``sys.path`` / ``PYTHONPATH`` (``accelerator.py`` does).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any, NamedTuple

REPO = pathlib.Path(__file__).resolve().parent.parent
MANIFEST = REPO / "benchmarks" / "device_wheels.txt"
WHEELS = REPO / ".whl"
BUDGET_BYTES = 50 * 2**20
#: What the plan assumes a GPU node has (and what the wheels must never replace).
NODE_HAS = ("jax", "jaxlib", "flax", "optax", "chex", "orbax-checkpoint", "h5py", "numpy")
#: pip download's platform tags for manylinux x86-64 (pip matches each tag exactly).
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64")
PYTHON = "3.12"
BUILT = "built"  # the sha256 column of a wheel built from an sdist (not byte-reproducible)


class Wheel(NamedTuple):
  """One line of the manifest."""

  requirement: str  # "name==version"
  file: str         # the wheel's file name
  bytes: int        # its size (a built wheel's: as measured when the manifest was written)
  sha256: str       # its sha256, or BUILT
  why: str          # what needs it

  @property
  def name(self) -> str:
    """The distribution's name, normalised ("ml-collections")."""
    return normalise(self.requirement.split("==")[0])


def normalise(name: str) -> str:
  """PEP 503's normal form of a distribution name."""
  return "-".join(part for part in name.replace("_", "-").replace(".", "-").lower().split("-") if part)


def read_manifest(path: pathlib.Path = MANIFEST) -> list[Wheel]:
  """The manifest's wheels (comment lines start with ``#``)."""
  wheels = []
  for number, line in enumerate(path.read_text().splitlines(), 1):
    if not line.strip() or line.startswith("#"):
      continue
    parts = line.split(maxsplit=4)
    if len(parts) < 5 or "==" not in parts[0] or not parts[2].isdigit():
      raise ValueError(f"{path.name}:{number}: {line!r}; expected 'name==version file bytes sha256 why'")
    wheels.append(Wheel(parts[0], parts[1], int(parts[2]), parts[3], parts[4]))
  return wheels


def _sha256(path: pathlib.Path) -> str:
  return hashlib.sha256(path.read_bytes()).hexdigest()


def download(dest: pathlib.Path, wheels: list[Wheel]) -> list[str]:
  """Downloads (or builds) every wheel into ``dest`` and checks it; returns the problems (none: all good)."""
  dest.mkdir(parents=True, exist_ok=True)
  pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
  binary = [w.requirement for w in wheels if w.sha256 != BUILT]
  platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
  subprocess.run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", PYTHON,
                  "--implementation", "cp", *platforms, "-d", str(dest), *binary], check=True)
  built = [w.requirement for w in wheels if w.sha256 == BUILT]
  if built:
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(dest), *built], check=True)
  problems = []
  for w in wheels:
    path = dest / w.file
    if not path.exists():
      problems.append(f"{w.requirement}: {w.file} is not in {dest}")
    elif w.sha256 != BUILT and (path.stat().st_size != w.bytes or _sha256(path) != w.sha256):
      problems.append(f"{w.requirement}: {w.file} has {path.stat().st_size} bytes / another sha256 than the manifest's")
  total = sum(w.bytes for w in wheels)
  if total > BUDGET_BYTES:
    problems.append(f"{total / 2**20:.1f} MiB of wheels; the budget is {BUDGET_BYTES / 2**20:.0f} MiB")
  return problems


def installed_version(name: str) -> str | None:
  """The version of distribution ``name`` this interpreter (its ``sys.path``) has, or None."""
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


def default_target() -> pathlib.Path:
  """Where ``install`` puts the wheels unless told: ``<tmp>/jaxlab-device-site-<interpreter>``
  (``cpython-312``: another interpreter's binary wheels would shadow this one's packages)."""
  return pathlib.Path(tempfile.gettempdir()) / f"jaxlab-device-site-{sys.implementation.cache_tag}"


def install(wheel_dir: pathlib.Path, target: pathlib.Path, wheels: list[Wheel]) -> dict[str, Any]:
  """Installs the wheels whose distributions are missing into ``target`` (offline, no dependencies).

  ``target`` should already be on ``sys.path`` so that an earlier install there counts as present.

  Returns:
    ``installed`` (requirements), ``present`` (name -> the version the machine has), ``missing``
    (wheels absent from ``wheel_dir``), ``pip_returncode``, ``seconds`` and the ``target``.
  """
  start = time.monotonic()
  present = {w.name: v for w in wheels if (v := installed_version(w.name)) is not None}
  todo = [w for w in wheels if w.name not in present]
  missing = [w.file for w in todo if not (wheel_dir / w.file).exists()]
  files = [str(wheel_dir / w.file) for w in todo if (wheel_dir / w.file).exists()]
  returncode, tail = 0, ""
  if files:
    target.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
                          "--no-deps", "--no-compile", "--target", str(target), *files],
                         capture_output=True, text=True)
    returncode, tail = run.returncode, (run.stdout + run.stderr).strip()[-600:]
  out = {"installed": [w.requirement for w in todo if w.file not in missing], "present": present, "missing": missing,
         "pip_returncode": returncode, "seconds": round(time.monotonic() - start, 1), "target": str(target)}
  if returncode:
    out["pip_output"] = tail
  return out


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  sub = parser.add_subparsers(dest="command", required=True)
  d = sub.add_parser("download", help="download the manifest's wheels and check them (needs PyPI)")
  d.add_argument("--dest", default=str(WHEELS))
  i = sub.add_parser("install", help="install the missing ones offline into --target")
  i.add_argument("--wheels", default=str(WHEELS))
  i.add_argument("--target", default="")
  args = parser.parse_args(argv)
  wheels = read_manifest()
  if args.command == "download":
    problems = download(pathlib.Path(args.dest), wheels)
    for w in sorted(wheels, key=lambda w: -w.bytes):
      print(f"{w.bytes / 2**20:7.2f} MiB  {w.requirement:26s} {w.why}")
    print(f"{sum(w.bytes for w in wheels) / 2**20:7.2f} MiB  {len(wheels)} wheels in {args.dest} "
          f"(budget {BUDGET_BYTES / 2**20:.0f} MiB)")
    for p in problems:
      print(f"benchmarks/device_wheels.py: {p}", file=sys.stderr)
    return 1 if problems else 0
  target = pathlib.Path(args.target) if args.target else default_target()
  sys.path.insert(0, str(target))
  result = install(pathlib.Path(args.wheels), target, wheels)
  print(json.dumps(result, indent=1))
  return 1 if result["pip_returncode"] or result["missing"] else 0


if __name__ == "__main__":
  sys.exit(main())
