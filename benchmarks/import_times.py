"""Import time of each jaxlab package over ``import jax``, this checkout against another commit, side by side.

  python benchmarks/import_times.py --before=main --repeats=5 --out=benchmarks/results/install/import_times.json

Each measurement is a fresh interpreter that imports jax, then one package, and prints the CPU
time (``time.process_time``) and wall time of the second import, and which of the large libraries
the package pulls in (ott-jax, equinox, jaxopt, scipy, exponax, ...) ended up in ``sys.modules``.
The two trees alternate within each repeat (``--before``: ``git archive <ref> jaxlab`` in a
temporary folder; the other: this checkout), so machine load hits both alike; the result file
keeps every run, the medians and the ratio after/before. CPU time is the steadier number on a
shared machine. About 3 s a measurement on a loaded 2-core machine: 13 packages x 2 trees x 5 repeats is ~13 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PACKAGES = ("jaxlab", "jaxlab.optim", "jaxlab.moe", "jaxlab.losses", "jaxlab.models", "jaxlab.ot_clip", "jaxlab.pde",
            "jaxlab.pde.data", "jaxlab.rl", "jaxlab.data", "jaxlab.train", "jaxlab.experiment", "jaxlab.tasks")

#: Libraries whose presence after an import says what the import cost is made of.
LARGE = ("ott", "equinox", "jaxopt", "scipy", "exponax", "flax", "haiku", "optax", "orbax", "ml_collections",
         "gymnax", "flashbax", "sklearn", "h5py", "tensorboardX", "absl")

_PROBE = """
import json, sys, time
import jax
c, w = time.process_time(), time.perf_counter()
import {package}
c, w = time.process_time() - c, time.perf_counter() - w
print(json.dumps([c, w, [n for n in {large!r} if n in sys.modules]]))
"""


def measure(tree: str, package: str) -> tuple[float, float, list[str]]:
  """(CPU s, wall s, large libraries imported) of ``import package`` after ``import jax``, from ``tree``."""
  env = dict(os.environ, PYTHONPATH=tree, XLA_FLAGS="")
  p = subprocess.run([sys.executable, "-c", _PROBE.format(package=package, large=LARGE)], env=env, cwd=tree,
                     capture_output=True, text=True, check=True)
  cpu, wall, large = json.loads(p.stdout.splitlines()[-1])
  return cpu, wall, large


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--before", default="main", help="the git ref to compare with (its jaxlab/ only)")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--packages", default=",".join(PACKAGES))
  parser.add_argument("--out", required=True)
  parser.add_argument("--table", action="store_true", help="print --out's rows as a Markdown table and exit")
  args = parser.parse_args(argv)
  if args.table:
    print(table(json.load(open(args.out))))
    return 0
  before_commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", args.before], capture_output=True,
                                 text=True, check=True).stdout.strip()
  after_commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
  dirty = bool(subprocess.run(["git", "-C", REPO, "status", "--porcelain", "jaxlab"], capture_output=True,
                              text=True, check=True).stdout.strip())
  packages = [p for p in args.packages.split(",") if p]
  with tempfile.TemporaryDirectory(prefix="jaxlab-before-") as before:
    archive = subprocess.run(["git", "-C", REPO, "archive", args.before, "jaxlab"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", before], input=archive.stdout, check=True)
    trees = {"before": before, "after": REPO}
    runs = {p: {"before": [], "after": []} for p in packages}
    large = {p: {} for p in packages}
    for r in range(args.repeats):
      for package in packages:
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
          cpu, wall, names = measure(trees[side], package)
          runs[package][side].append([round(cpu, 4), round(wall, 4)])
          large[package][side] = names
      print(f"repeat {r + 1}/{args.repeats} done", flush=True)
  rows = []
  for package in packages:
    med = {side: [statistics.median(x[i] for x in runs[package][side]) for i in (0, 1)] for side in ("before", "after")}
    rows.append({"package": package, "cpu_s_before": round(med["before"][0], 3), "cpu_s_after": round(med["after"][0], 3),
                 "cpu_ratio_after_before": round(med["after"][0] / med["before"][0], 3),
                 "wall_s_before": round(med["before"][1], 3), "wall_s_after": round(med["after"][1], 3),
                 "large_before": large[package]["before"], "large_after": large[package]["after"],
                 "runs_cpu_wall": runs[package]})
  result = {"command": f"python benchmarks/import_times.py --before={args.before} --repeats={args.repeats} "
                       f"--out={os.path.relpath(os.path.abspath(args.out), REPO)}",
            "before": f"{args.before} ({before_commit})", "after": f"HEAD ({after_commit}{', uncommitted' if dirty else ''})",
            "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d"),
            "what": "median over repeats of the CPU and wall seconds of `import <package>` after `import jax`, "
                    "fresh interpreter each", "rows": rows}
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1)
  print(table(result))
  return 0


def table(result: dict) -> str:
  """The rows as the Markdown table of BUILD_NOTES.md ("Import time")."""
  lines = ["| package | CPU s before | CPU s after | after / before | no longer imported |", "|---|---|---|---|---|"]
  for r in result["rows"]:
    gone = sorted(set(r["large_before"]) - set(r["large_after"]))
    ratio = f"{r['cpu_ratio_after_before']:.2f}" if r["cpu_s_before"] >= 0.01 else "- (under 10 ms)"
    lines.append(f"| `{r['package']}` | {r['cpu_s_before']:.2f} | {r['cpu_s_after']:.2f} | {ratio} | "
                 f"{', '.join(gone) or '-'} |")
  return "\n".join(lines)


if __name__ == "__main__":
  sys.exit(main())
