"""``jax.export`` for GPU and TPU on this CPU-only machine (tests/test_export.py, the trainer's step in
tests/train/test_step_export.py and tests/train/test_task_contract.py).

``jax.export.export(fn, platforms=...)`` lowers a jitted program to StableHLO for platforms that
are not present: every primitive needs a lowering rule for each platform, and a custom call must
be one that ``jax.export`` guarantees on it. So an op that cannot run on GPU or TPU fails here,
naming the primitive, instead of on the accelerator. One lowering serves both platforms (cheaper
than two); numerics and speed still need the hardware.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax

from jaxlab.train.checkpoint import abstract_like
from jaxlab.experiment import make_train_setup, runs_from_config

ACCELERATORS = ("cuda", "tpu")
BARRIER = "stablehlo.optimization_barrier"  # only the Soft MoE's CPU kernel (jaxlab/moe/_soft_moe_kernel.py) writes one


def abstract(tree: Any) -> Any:
  """Shapes and dtypes of ``tree`` (arrays or ShapeDtypeStructs): what an export needs, nothing computed."""
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)


def export_for(fn: Callable[..., Any], *args: Any, platforms: tuple[str, ...] = ACCELERATORS) -> jax.export.Exported:
  """``fn`` (jitted here unless it already is) exported for ``platforms`` on ``args`` (abstract or concrete)."""
  jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
  exported = jax.export.export(jitted, platforms=platforms)(*args)
  assert exported.platforms == tuple(platforms)
  return exported


def forward_and_grad(apply: Callable[..., Any]) -> Callable[..., Any]:
  """``(params, *inputs) -> (outputs, d sum(outputs) / d params)``: one program with the forward
  and its backward, so one export checks both."""
  def program(params, *inputs):
    out, vjp = jax.vjp(lambda p: apply(p, *inputs), params)
    return out, vjp(jax.tree.map(jax.numpy.ones_like, out))[0]
  return program


def export_train_step(config):
  """``(exported, setup)``: the trainer's step program for ``config`` exported for cuda and tpu.

  Vmapped runs are sharded over "data", so a study's cell (2 or 4 runs) gets as many of the 8
  devices as its runs divide; every other config gets all 8.
  """
  runs = runs_from_config(config)
  devices = jax.devices()[:math.gcd(runs.size, len(jax.devices()))] if runs is not None else None
  setup = make_train_setup(config, devices)
  k = config.steps_per_call
  step = setup.train_step(k)
  args = [abstract_like(setup.abstract_state, setup.state_sharding), None]
  if step.takes_batch:
    args[1] = abstract_like(step.batch_spec, jax.tree.map(lambda _: setup.batch_sharding(k), step.batch_spec))
  with jax.set_mesh(setup.mesh):  # as the trainer calls it
    exported = export_for(step.jitted, *args)
  return exported, setup
