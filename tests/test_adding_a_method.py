"""The files docs/guides/adding_a_method.md lists are the files a new method needs: built and trained here.

A toy method is written into a copy of jaxlab exactly where the guide's table says (its package, its task
module, one line of the import contract, its page); the copy then keeps the contract, draws the toy
on the methods floor, and trains the toy task through ``jaxlab.experiment.train``, with nothing else
touched. Without the contract line the layer drawing puts it on no floor.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "guides" / "adding_a_method.md"

TOY_PACKAGE = '''\
"""A toy method: a linear model fitted to a slope, with plain arguments."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxlab.errors import check_int


def toy_init(width: int) -> dict[str, jax.Array]:
  """Zero weights of ``width`` features."""
  return {"w": jnp.zeros((check_int(width, "width", 1),))}


def toy_loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
  """Mean squared error of ``x @ w`` against ``y``."""
  return jnp.mean((x @ params["w"] - y) ** 2)
'''

TOY_TASK = '''\
"""The toy method's config keys (``toy.width``, ``toy.slope``) and its task."""

from __future__ import annotations

import numpy as np

from jaxlab import errors
from jaxlab.toy import toy_init, toy_loss
from jaxlab.train import TASKS, Task


@TASKS.register("toy")
def toy(config, ctx) -> Task:
  """Fits ``y = slope * sum(x)``."""
  del ctx
  width = errors.check_int(config.toy.width, "toy.width", 1)
  errors.check_finite(config.toy.slope, "toy.slope")
  slope = float(config.toy.slope)

  def host_batch(step, rows, seed):
    x = np.random.default_rng([seed, step]).normal(size=(config.batch_size, width)).astype(np.float32)[rows]
    return {"x": x, "y": slope * x.sum(axis=1)}

  def loss_fn(params, batch, rng, extra):
    return toy_loss(params, batch["x"], batch["y"]), {}
  return Task(init_params=lambda rng: toy_init(width), loss_fn=loss_fn, host_batch=host_batch, description="toy")
'''

TOY_PAGE = "# Toy\n\nA linear model fitted to a slope (the test of the guide to adding a method).\n"

# Run in the copy: the contract, the layer drawing with and without the line, and a short training.
CHECK_THE_COPY = '''\
import contextlib, io, math, sys, tempfile
import ml_collections
from importlinter.cli import lint_imports
sys.path.insert(0, sys.argv[2])
import layer_graph
copy = sys.argv[1]
out = io.StringIO()
with contextlib.redirect_stdout(out):
  status = lint_imports(config_filename=copy + "/setup.cfg", no_cache=True)
print("LINT", status)
for cfg in ("setup.cfg", "setup_without_the_line.cfg"):
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    layer_graph.main(["--config=" + copy + "/" + cfg])
  print("FLOORS", cfg, [line for line in out.getvalue().splitlines() if "toy" in line and "->" not in line])
from jaxlab.experiment import train, trainer_config
c = trainer_config(num_steps=30, batch_size=16, log_every=10, eval_every=30, checkpoint_every=30)
c.task, c.optimizer = "toy", ml_collections.ConfigDict({"name": "sgd", "learning_rate": 0.1})
c.toy = ml_collections.ConfigDict({"width": 2, "slope": 3.0})
summary = train(c, tempfile.mkdtemp(), progress=False).summary
print("TRAINED", summary["task"], summary["steps"], math.isfinite(summary["final_loss"]), summary["final_loss"] < 1.0)
'''


def _listed_files() -> list[str]:
  """The first column of the guide's table, for a method named ``toy``: the files it touches."""
  return [p.replace("<method>", "toy") for p in re.findall(r"^\| `([^`]+)` \|", GUIDE.read_text(), flags=re.M)]


def _write_toy(copy: pathlib.Path) -> None:
  """Writes the toy method into ``copy`` where the guide says (and keeps the contract without its line)."""
  cfg = (copy / "setup.cfg").read_text()
  methods = re.search(r"^ *jaxlab\.rl \|.*$", cfg, flags=re.M).group(0)
  (copy / "setup_without_the_line.cfg").write_text(cfg)
  (copy / "setup.cfg").write_text(cfg.replace(methods, methods + " | jaxlab.toy"))
  (copy / "jaxlab" / "toy").mkdir()
  (copy / "jaxlab" / "toy" / "__init__.py").write_text(TOY_PACKAGE)
  (copy / "jaxlab" / "tasks" / "toy.py").write_text(TOY_TASK)
  (copy / "docs" / "methods").mkdir(parents=True)
  (copy / "docs" / "methods" / "toy.md").write_text(TOY_PAGE)


def test_the_guide_lists_four_files():
  assert _listed_files() == ["jaxlab/toy/__init__.py", "jaxlab/tasks/toy.py", "setup.cfg", "docs/methods/toy.md"]


def test_a_toy_method_needs_only_the_listed_files(tmp_path, cli):
  copy = tmp_path / "repo"
  shutil.copytree(REPO / "jaxlab", copy / "jaxlab", ignore=shutil.ignore_patterns("__pycache__"))
  shutil.copy(REPO / "setup.cfg", copy / "setup.cfg")
  _write_toy(copy)
  touched = sorted(str(p.relative_to(copy)) for p in copy.rglob("*")
                   if p.is_file() and p.name != "setup_without_the_line.cfg"
                   and (not (REPO / p.relative_to(copy)).is_file()
                        or (REPO / p.relative_to(copy)).read_bytes() != p.read_bytes()))
  assert touched == sorted(_listed_files())  # new or changed: exactly the guide's files
  out = cli.run([sys.executable, "-c", CHECK_THE_COPY, str(copy), str(REPO / "scripts")], cwd=copy,
                env={"PYTHONPATH": str(copy)})
  assert out.returncode == 0, out.stderr[-3000:]
  lines = out.stdout.splitlines()
  assert "LINT 0" in lines, out.stdout
  floors = [line for line in lines if line.startswith("FLOORS")]
  assert "jaxlab.toy" in floors[0] and "floor 3" in floors[0], floors  # on the methods floor
  assert "not in the contract: jaxlab.toy" in floors[1], floors  # the line is what puts it there
  assert "TRAINED toy 30 True True" in lines, out.stdout


def test_every_method_page_is_listed_under_methods_in_the_index():
  """The guide's last row: a method's page is in docs/methods/ and in the Methods list of docs/index.md."""
  index = (REPO / "docs" / "index.md").read_text()
  listed = re.search(r":caption: Methods\n\n(.*?)```", index, flags=re.S).group(1).split()
  pages = sorted(f"methods/{p.stem}" for p in (REPO / "docs" / "methods").glob("*.md"))
  assert sorted(listed) == pages
