"""compute_dtype="bfloat16" for every experiment config: the first step's loss matches float32 within
``BF16_LOSS_RTOL``, the matmuls really run in bfloat16 (float32 only where by design), and a few
bfloat16 steps stay finite with float32 params.

Each config is built at its tiny size (DPOT with one block) exactly as the trainer builds it
(``build_state_init`` + ``make_train_step`` with the config's ``compute_dtype``); each compiles
two programs, one per dtype, and the bfloat16 one runs all of that config's steps.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import subjaxprs
from jax.extend.source_info_util import summarize

from jaxlab.config_files import load_config
from jaxlab.errors import InputError
from jaxlab.train.precision import cast_floats, compute_dtype, float_dtype
from jaxlab.train.step import train_step_fn
from jaxlab.experiment import build_state_init, task_context, train
from tests.support.clip_data import write_image_folder
from tests.support.tolerances import BF16_LOSS_RTOL

STEPS = 3  # bfloat16 steps that must stay finite (the first one is compared with float32)

# config -> source files whose matmuls stay float32 by design (the OT-CLIP losses upcast their
# inputs, jaxlab.ot_clip.checks.compute_dtype; FNO's complex spectral mixing is complex64 and is
# not counted as a float32 matmul).
CONFIGS = {
    "digits_mlp:tiny": (),
    "digits_clip:tiny": ("jaxlab/ot_clip/",),
    "examples/robust_regression:tiny": (),
    "dqn_minatar:tiny": (),
    "dpot_pde:tiny": (),
    "dpot_pde:fno_tiny": (),
    "dpot_moe:tiny": (),
    "clip_files:tiny": ("jaxlab/ot_clip/",),
    "dqn_atari:tiny": (),
}


@pytest.fixture(scope="module")
def pde_cache(tmp_path_factory):
  return str(tmp_path_factory.mktemp("pde_data"))  # the three PDE configs share one tiny data set


def _config(name, dtype, cache):
  c = load_config(name)
  c.compute_dtype = dtype
  if c.task == "clip_files":
    c.data.dir = os.path.join(cache, "pairs")
    write_image_folder(c.data.dir, num_images=40)
  if c.task == "pde_operator":
    c.data.cache_dir = cache
    c.data.sets = tuple(dict(s, trajectories=4) for s in c.data.sets)  # 2 to train on, 2 test
    if c.model.name == "dpot":
      c.model.depth = 1
  return c


def _matmuls(jaxpr):
  """(operand dtype, source line) of every dot_general / convolution, sub-programs included."""
  out = [(str(e.invars[0].aval.dtype), summarize(e.source_info)) for e in jaxpr.eqns
         if e.primitive.name in ("dot_general", "conv_general_dilated")]
  for sub in subjaxprs(jaxpr):
    out += _matmuls(sub)
  return out


def _compile(fn, *args):
  """``jax.jit(fn)`` compiled for ``args`` (with the suite's compile-time settings, tests/support/xla.py)."""
  return jax.jit(fn).trace(*args).lower().compile()


def _losses(name, cache):
  """The first step's float32 loss, the losses of ``STEPS`` bfloat16 steps (as the trainer runs them:
  ``train_step_fn`` with the config's options), the bfloat16 step's matmuls and its final state.

  One program runs both steps from the same state, so they see the same batch (a ``collect`` task's
  too); of the float32 step only its loss is used, so XLA drops its backward pass and update.
  """
  c = _config(name, "bfloat16", cache)
  task, _, optimizer, init, init_args = build_state_init(c, task_context(c))
  state = _compile(init, *init_args)(*init_args)
  batch = None if task.host_batch is None else task.host_batch(0, np.arange(c.batch_size), c.seed)
  options = dict(collect=task.collect, update_extra=task.update_extra)
  f32_step = train_step_fn(task.loss_fn, optimizer, **options)
  bf16_step = train_step_fn(task.loss_fn, optimizer, compute_dtype=c.compute_dtype, **options)
  matmuls = _matmuls(jax.make_jaxpr(bf16_step)(state, batch).jaxpr)
  both = _compile(lambda s, b: (f32_step(s, b)[1]["loss"], bf16_step(s, b)), state, batch)
  f32_loss, bf16_losses = None, []
  for _ in range(STEPS):  # host-data configs see batch 0 again: finiteness is the point here
    loss, (state, metrics) = both(state, batch)
    f32_loss = float(loss) if f32_loss is None else f32_loss
    bf16_losses.append(float(metrics["loss"]))
    assert int(metrics["nonfinite_skipped"]) == 0, (name, bf16_losses)
  return f32_loss, np.array(bf16_losses), matmuls, state


@pytest.mark.parametrize("name", list(CONFIGS))
def test_bfloat16_first_step_loss_matches_float32(name, pde_cache):
  f32, bf16, matmuls, state = _losses(name, pde_cache)
  np.testing.assert_allclose(bf16[0], f32, rtol=BF16_LOSS_RTOL, err_msg=name)
  assert bf16[0] != f32, name  # it did compute in bfloat16: 8 bits cannot reproduce float32 exactly
  assert np.all(np.isfinite(bf16)), (name, bf16)
  # params (the master copies) stay float32
  assert {str(x.dtype) for x in jax.tree.leaves(state.params)} == {"float32"}
  dtypes = {dtype for dtype, _ in matmuls}
  assert "bfloat16" in dtypes, (name, dtypes)
  allowed = CONFIGS[name]
  stray = [where for dtype, where in matmuls
           if dtype == "float32" and not any(a in where.replace("\\", "/") for a in allowed)]
  assert not stray, f"{name}: float32 matmuls in the bfloat16 step at {sorted(set(stray))}"


def test_dqn_acts_in_the_compute_dtype_and_evaluates_in_float32():
  c = load_config("dqn_minatar:tiny")
  c.compute_dtype = "bfloat16"
  assert compute_dtype(c) == jnp.bfloat16
  task, _, _, init, init_args = build_state_init(c, task_context(c))
  state = jax.eval_shape(init, *init_args)  # traced only: nothing is compiled
  # collect alone (no loss): its Q-network matmuls run on params cast to bfloat16
  acting = _matmuls(jax.make_jaxpr(task.collect)(state, jax.random.key(1)).jaxpr)
  assert acting and {dtype for dtype, _ in acting} == {"bfloat16"}, acting
  evaluation = _matmuls(jax.make_jaxpr(task.evaluate)(state, jax.random.key(1)).jaxpr)
  assert evaluation and {dtype for dtype, _ in evaluation} == {"float32"}, evaluation


def test_trainer_runs_a_config_in_bfloat16(tmp_path):
  c = load_config("examples/robust_regression:tiny")
  c.compute_dtype = "bfloat16"
  c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = 4, 2, 4, 4
  summary = train(c, str(tmp_path), progress=False).summary
  assert np.isfinite(summary["final_loss"]) and summary["nonfinite_skipped"] == 0


@pytest.mark.parametrize("study", ["rl_expert_scaling:small", "rl_momo_dqn:small"])
def test_study_cells_take_compute_dtype_from_base(study):
  from benchmarks.rl_study_cells import cell_config  # pylint: disable=import-outside-toplevel
  s = load_config(study)
  assert s.base.compute_dtype == "float32"
  s.base.compute_dtype = "bfloat16"  # --config.base.compute_dtype=bfloat16: the key exists in base
  assert all(cell_config(s, name).compute_dtype == "bfloat16" for name in s.order)


def test_precision_helpers():
  tree = {"w": jnp.ones((2,), jnp.float32), "n": jnp.arange(3), "m": jnp.zeros((), jnp.bool_)}
  cast = cast_floats(tree, jnp.bfloat16)
  assert cast["w"].dtype == jnp.bfloat16 and cast["n"].dtype == tree["n"].dtype and cast["m"].dtype == jnp.bool_
  assert float_dtype(cast) == jnp.bfloat16 and float_dtype({"n": jnp.arange(2)}) == jnp.float32
  assert compute_dtype(load_config("digits_mlp:tiny")) == jnp.float32
  with pytest.raises(InputError, match="compute_dtype must be one of .* got 'bf16'"):
    compute_dtype({"compute_dtype": "bf16"})
