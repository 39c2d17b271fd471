"""``load_run`` onto a mesh or at a step given wrongly: one line naming the value and what is allowed.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Every case loads one
tiny digits workdir of 2 vmapped seeds, trained once per process (a few seconds).
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from typing import Any, Callable

import jax
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jaxlab  # noqa: E402
from configs import digits_mlp  # noqa: E402
from jaxlab.experiment import train  # noqa: E402
from jaxlab.train import make_mesh  # noqa: E402
from tests.bad_input import assert_one_clear_line  # noqa: E402


@functools.cache
def _two_seeds() -> str:
  config = digits_mlp.get_config("tiny")
  config.batch_size, config.num_steps, config.runs.seeds = 64, 2, 2
  workdir = tempfile.mkdtemp(prefix="jaxlab-load-run-")
  train(config, workdir, devices=jax.devices()[:1], progress=False)
  return workdir


def _load(**kwargs: Any) -> Callable[[], Any]:
  return lambda: jaxlab.load_run(_two_seeds(), **{k: v() if callable(v) else v for k, v in kwargs.items()})


CASES: list[tuple[str, str, Callable[[], Any], str]] = [
    ("load_run", "a 'data' axis of 3 for 2 vmapped runs",
     _load(mesh=lambda: make_mesh((("data", 3), ("model", 1)), jax.devices()[:3])),
     "holds 2 vmapped runs, which the mesh's 'data' axis (size 3) does not divide; allowed: a mesh whose 'data' "
     "size divides 2, or one run with seed_index in [0, 1]"),
    ("load_run", "mesh='cpu'", _load(mesh="cpu"), "load_run: mesh='cpu' is not a jax.sharding.Mesh; allowed: a Mesh"),
    ("load_run", "a list of devices as the mesh", _load(mesh=jax.devices),
     "load_run: mesh=a list is not a jax.sharding.Mesh"),
    ("load_run", "step='2' (a str)", _load(step="2"), "load_run: step='2' is not an int (a str); allowed: 2"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)


def test_a_mesh_dividing_the_runs_or_one_seed_loads():
  mesh = make_mesh((("data", 2), ("model", 1)), jax.devices()[:2])
  every = jaxlab.load_run(_two_seeds(), mesh=mesh)
  leaf = jax.tree.leaves(every.params)[0]
  assert every.run_axis and leaf.shape[0] == 2 and leaf.sharding.mesh.shape["data"] == 2
  odd = make_mesh((("data", 3), ("model", 1)), jax.devices()[:3])
  one = jaxlab.load_run(_two_seeds(), seed_index=1, mesh=odd)  # one run: no run axis to divide
  assert not one.run_axis and jax.tree.leaves(one.params)[0].shape == leaf.shape[1:]
