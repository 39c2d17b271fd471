"""The install matrix: per Python and extra, a fresh venv, the jax pip resolves, and whether the guide's next command runs.

  python benchmarks/install_matrix.py --python=python3.11 --python=python3.12 \\
      --out=benchmarks/results/install/matrix.json [--only=rl,pde]

Each cell: a new virtual environment in a temporary folder, ``pip install 'jaxlab-<version>.whl[<extras>]'``
(a wheel of this checkout: the package as a user gets it, configs found by name), the versions pip resolved,
then the command the getting-started page or the extra's guide gives next, run from an empty
folder, and the venv deleted. Needs the package index; nothing else of the machine is used (the
PDE data go to a temporary ``JAXLAB_DATA_DIR``). Rows are written to ``--out`` as each cell ends and
a cell already there is skipped, so a stopped run resumes; ``--redo`` runs them again. About 4-6
minutes a cell on a loaded 2-core machine, most of it pip; ``--table`` prints the Markdown table of
BUILD_NOTES.md from ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The component program of the getting-started page (docs/getting_started.md, "The same pieces
#: from Python"): a loss, MoMo-Adam and the one step, on the core install.
CORE_PROGRAM = """
import jax, jax.numpy as jnp
from jaxlab.optim import momo_adam
from jaxlab.train import TrainState, make_train_step
def loss_fn(params, batch, rng, extra):
  err = batch["x"] @ params["w"] - batch["y"]
  return jnp.mean(err ** 2), {}
opt = momo_adam(learning_rate=1e-2)
state = TrainState.create({"w": jnp.zeros(3)}, opt, jax.random.key(0))
step = make_train_step(loss_fn, opt)
batch = {"x": jnp.eye(3), "y": jnp.array([1.0, -2.0, 0.5])}
for _ in range(3):
  state, metrics = step(state, batch)
print("loss", float(metrics["loss"]))
"""

#: A few image-caption pairs in jaxlab's CSV layout (docs/guides/ot_clip.md), written with Pillow.
CLIP_DATA = """
import os, sys, numpy as np
from PIL import Image
folder = sys.argv[1]
rng = np.random.default_rng(0)
colours = ["red", "green", "blue", "black"]
with open(os.path.join(folder, "captions.csv"), "w") as f:
  f.write("image,caption\\n")
  for i in range(48):
    c = i % 4
    pixels = np.zeros((16, 16, 3), np.uint8)
    if c < 3:
      pixels[..., c] = 200
    pixels += rng.integers(0, 40, pixels.shape, dtype=np.uint8)
    Image.fromarray(pixels).save(os.path.join(folder, f"{i}.png"))
    f.write(f"{i}.png,a {colours[c]} square\\n")
"""

#: The quickstart notebook at test size, as Colab would run it after its install cell.
NOTEBOOK = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
for cell in nb.cells:
  if "parameters" in cell.get("metadata", {}).get("tags", []):
    cell.source = cell.source.replace("TINY = False", "TINY = True")
NotebookClient(nb, timeout=900, kernel_name="python3").execute()
print("executed", len(nb.cells), "cells")
"""

MAIN = ["-m", "jaxlab.main"]

# extra -> (the extras installed, the commands run next: (argv after python, or a shell-free argv
# starting with a console script), the exit code each must give, and what it checks)
CELLS = {
    "bare": ("", [(["-c", CORE_PROGRAM], 0, "the component program (getting started)"),
                  (MAIN + ["--config=digits_mlp:tiny", "--workdir={w}/mlp"], 2,
                   "digits_mlp without the data extra: one line naming it")]),
    "data": ("data", [(MAIN + ["--config=digits_mlp:tiny", "--workdir={w}/mlp"], 0, "digits_mlp:tiny")]),
    "rl": ("rl", [(MAIN + ["--config=dqn_minatar:tiny", "--workdir={w}/dqn"], 0, "dqn_minatar:tiny")]),
    "pde": ("pde", [(MAIN + ["--config=dpot_pde:tiny", "--workdir={w}/dpot"], 0, "dpot_pde:tiny")]),
    "atari": ("atari", [(MAIN + ["--config=dqn_atari:tiny", "--workdir={w}/atari"], 0, "dqn_atari:tiny")]),
    "clip_data": ("clip_data", [(["-c", CLIP_DATA, "{w}"], 0, "a 48-pair captions file"),
                                (MAIN + ["--config=clip_files:tiny", "--config.data.dir={w}", "--workdir={w}/clip"], 0,
                                 "clip_files:tiny on it")]),
    "notebooks": ("data,notebooks", [(["-c", NOTEBOOK, os.path.join(REPO, "colabs", "quickstart.ipynb")], 0,
                                      "colabs/quickstart.ipynb at TINY size (its EXTRAS: data,notebooks)")]),
    "tensorboard": ("data,tensorboard", [(MAIN + ["--config=digits_mlp:tiny", "--workdir={w}/mlp"], 0, "digits_mlp:tiny"),
                                         (["tensorboard", "--inspect", "--logdir={w}/mlp/tensorboard"], 0,
                                          "tensorboard --inspect of its event files", "test_accuracy")]),
    # the accelerator recipe (docs/getting_started.md) with the CPU jax in place of jax[cuda12]: jax
    # first, then jaxlab beside it
    "jax_first": ("data", [(MAIN + ["--config=digits_mlp:tiny", "--workdir={w}/mlp"], 0, "digits_mlp:tiny")]),
    # the accelerator recipe's rl line (jax and the rl extra in one command), the CPU jax in place of jax[cuda12]
    "rl_with_jax": ("rl", [(MAIN + ["--config=dqn_minatar:tiny", "--workdir={w}/dqn"], 0, "dqn_minatar:tiny")]),
    # the rl extra, then the newest jax past gymnax's declared cap (docs/getting_started.md)
    "rl+newest_jax": ("rl", [(["pip", "install", "-q", "-U", "jax", "jaxlib"], 0, "pip install -U jax jaxlib"),
                             (MAIN + ["--config=dqn_minatar:tiny", "--workdir={w}/dqn"], 0, "dqn_minatar:tiny")]),
}

#: How the table shows a cell that is more than one ``pip install``.
RECIPES = {"jax_first": "`jax`, then `jaxlab[data]`", "rl_with_jax": "`-U jax jaxlib jaxlab[rl]`",
           "rl+newest_jax": "`jaxlab[rl]`, then `-U jax jaxlib`"}

#: Cells whose jaxlab install names ``-U jax jaxlib`` in the same command.
JAX_TOGETHER = ("rl_with_jax",)

#: Cells whose venv gets ``pip install -U jax jaxlib`` before jaxlab (the accelerator recipe's order).
JAX_FIRST = ("jax_first",)
#: Cells whose steps install packages: their versions are read again after them.
AFTER_STEPS = ("rl+newest_jax",)

VERSIONS = ("jax", "jaxlib", "flax", "optax", "numpy", "gymnax", "flashbax", "exponax", "envpool", "grain")


def _run(argv: list[str], env: dict, cwd: str, timeout: int = 1800) -> tuple[int, float, str]:
  start = time.time()
  try:
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return 124, time.time() - start, "timed out"
  return p.returncode, time.time() - start, (p.stderr + p.stdout).strip()


def cell(python: str, name: str, wheel: str) -> dict:
  extras, steps = CELLS[name]
  root = tempfile.mkdtemp(prefix="jaxlab-install-")
  venv, work = os.path.join(root, "venv"), os.path.join(root, "work")
  os.makedirs(work)
  bin_dir = os.path.join(venv, "bin")
  env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], JAXLAB_DATA_DIR=os.path.join(root, "data"),
             XLA_FLAGS="", VIRTUAL_ENV=venv)
  for key in ("PYTHONPATH", "PYTHONHOME"):
    env.pop(key, None)
  py = os.path.join(bin_dir, "python")
  row = {"python": "", "extra": name, "installed": f"jaxlab[{extras}]" if extras else "jaxlab"}
  try:
    subprocess.run([python, "-m", "venv", venv], check=True)
    row["python"] = subprocess.run([py, "-c", "import platform; print(platform.python_version())"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"], env=env, check=True, capture_output=True)
    spec = f"{wheel}[{extras}]" if extras else wheel
    if name in JAX_FIRST:  # jax before jaxlab: jaxlab's install must keep it
      subprocess.run([py, "-m", "pip", "install", "-q", "-U", "jax", "jaxlib"], env=env, check=True, capture_output=True)
      row["jax_before"] = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('jax'))"],
                                         capture_output=True, text=True, env=env).stdout.strip()
    together = ["-U", "jax", "jaxlib"] if name in JAX_TOGETHER else []
    code, seconds, out = _run([py, "-m", "pip", "install", "-q", *together, spec], env, work)
    row["install"] = {"rc": code, "seconds": round(seconds), "tail": out.splitlines()[-3:] if code else []}
    listed = subprocess.run([py, "-m", "pip", "list", "--format=json"], env=env, capture_output=True, text=True).stdout
    versions = {p["name"].lower(): p["version"] for p in json.loads(listed or "[]")}
    row["versions"] = {k: versions[k] for k in VERSIONS if k in versions}
    row["steps"] = []
    for argv, expected, what, *must_print in steps:
      argv = [a.replace("{w}", work) for a in argv]
      argv = [py, *argv] if argv[0] in ("-c", "-m") else [os.path.join(bin_dir, argv[0]), *argv[1:]]
      code, seconds, out = _run(argv, env, work)
      lines = out.replace(root, "<tmp>").splitlines()  # no machine paths in the result file
      ok = (code == expected and (expected == 0 or len(lines) == 1)  # a refusal: one line
            and all(text in out for text in must_print))
      row["steps"].append({"what": what, "rc": code, "expected_rc": expected, "ok": ok, "seconds": round(seconds),
                           "last_line": lines[-1][:300] if lines else "", "output_lines": len(lines)})
      if not ok:
        break
    if name in AFTER_STEPS:  # the steps changed what is installed
      listed = subprocess.run([py, "-m", "pip", "list", "--format=json"], env=env, capture_output=True, text=True).stdout
      versions = {p["name"].lower(): p["version"] for p in json.loads(listed or "[]")}
      row["versions_after_steps"] = {k: versions[k] for k in VERSIONS if k in versions}
    row["ok"] = row["install"]["rc"] == 0 and all(s["ok"] for s in row["steps"]) and len(row["steps"]) == len(steps)
  finally:
    shutil.rmtree(root, ignore_errors=True)
  return row


def table(result: dict) -> str:
  """The rows as the Markdown table of BUILD_NOTES.md's install matrix."""
  lines = ["| Python | installed | jax | next command | outcome |", "|---|---|---|---|---|"]
  for r in sorted(result["rows"], key=lambda r: (r["python"], list(CELLS).index(r["extra"]))):
    steps = "; ".join(f"{s['what']}: {'ok' if s['ok'] else 'FAILED'} ({s['seconds']} s)" for s in r.get("steps", []))
    jax = r.get("versions", {}).get("jax", "-")
    if r.get("jax_before"):
      jax = f"{r['jax_before']} before, {jax} after"
    if r.get("versions_after_steps"):
      jax = f"{jax}, then {r['versions_after_steps'].get('jax')}"
    install = "pip install failed: " + " ".join(r["install"]["tail"]) if r["install"]["rc"] else steps
    installed = RECIPES.get(r["extra"], f"`{r['installed']}`")
    lines.append(f"| {r['python']} | {installed} | {jax} | {install} | {'ok' if r.get('ok') else 'FAILED'} |")
  return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--python", action="append", default=[], help="an interpreter (repeat for several)")
  parser.add_argument("--out", required=True)
  parser.add_argument("--only", default="", help="comma-separated cells (default: all): " + ", ".join(CELLS))
  parser.add_argument("--redo", action="store_true", help="run cells that --out already has again")
  parser.add_argument("--table", action="store_true", help="print --out's rows as a Markdown table and exit")
  args = parser.parse_args(argv)
  if args.table:
    print(table(json.load(open(args.out))))
    return 0
  if not args.python:
    parser.error("give --python (one or more), or --table")
  names = [n for n in args.only.split(",") if n] or list(CELLS)
  unknown = sorted(set(names) - set(CELLS))
  if unknown:
    parser.error(f"unknown cells {unknown}; choose from {list(CELLS)}")
  result = json.load(open(args.out)) if os.path.exists(args.out) else {"command": "", "rows": []}
  # the command that makes every row (a run with --only or --redo remakes some; each row has its date)
  result["command"] = ("python benchmarks/install_matrix.py --python=python3.11 --python=python3.12 "
                       f"--out={os.path.relpath(os.path.abspath(args.out), REPO)}")
  wheels = tempfile.mkdtemp(prefix="jaxlab-wheel-")
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, REPO], check=True)
  wheel = os.path.join(wheels, os.listdir(wheels)[0])
  for python in args.python:
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    for name in names:
      done = [r for r in result["rows"] if r["python"] == version and r["extra"] == name]
      if done and not args.redo:
        continue
      row = cell(python, name, wheel)
      row["date"] = time.strftime("%Y-%m-%d")
      result["rows"] = [r for r in result["rows"] if r not in done] + [row]
      os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
      with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
      print(f"{version} {name}: jax {row.get('versions', {}).get('jax')}, {'ok' if row.get('ok') else 'FAILED'}", flush=True)
  shutil.rmtree(wheels, ignore_errors=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
