"""A sweep of bad inputs across the trainer, configs, mesh, sharding, optimizers and the step.

Each case must end in ONE clear line: a ``jaxlab.errors.InputError`` whose message names the bad
value (the expected fragment). Method packages keep their own sweeps beside their tests
(``tests/ot_clip/test_bad_input.py``, ...). Run as a script for the verdict counts of every sweep:

  python tests/test_bad_input_sweep.py
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import tempfile
from typing import Any, Callable, Iterator

if __name__ == "__main__":  # as a script: the 8 virtual devices the tests have
  os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
  os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from configs import digits_mlp  # noqa: E402
from jaxlab.config_files import load_config  # noqa: E402
from jaxlab.data.batching import batch_indices  # noqa: E402
from jaxlab.data.digits import load_digits_split  # noqa: E402
from jaxlab.errors import InputError  # noqa: E402
from jaxlab.models import make_model  # noqa: E402
from jaxlab.optim import momo, momo_adam, optimizer_from_config  # noqa: E402
from jaxlab.registry import Registry  # noqa: E402
from jaxlab.train import TASKS, TrainState, make_mesh, make_train_step, tree_shardings  # noqa: E402
from jaxlab.train.checkpoint import restore_params  # noqa: E402
from jaxlab.train.mesh import resolve_mesh_shape  # noqa: E402
from jaxlab.experiment import train  # noqa: E402
from jaxlab.train.loop import ensure_writable  # noqa: E402
from jaxlab.experiment.validate import validate_trainer_config  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]  # (area, what, call, fragment the message must hold)


def _cfg(**overrides: Any) -> ml_collections.ConfigDict:
  # Not type-safe: a config file may set any value; the trainer's own checks must catch it.
  c = ml_collections.ConfigDict(digits_mlp.get_config("tiny").to_dict(), type_safe=False)
  c.batch_size = 64
  with c.unlocked():
    for k, v in overrides.items():
      node, *rest = k.split(".")
      if rest:
        c[node][rest[0]] = v
      else:
        c[k] = v
  return c


def _train(devices: int | None = 1, **overrides: Any) -> Callable[[], Any]:
  def run():
    return train(_cfg(**overrides), tempfile.mkdtemp(), progress=False, devices=jax.devices()[:devices])
  return run


def _train_all(**overrides: Any) -> Callable[[], Any]:
  return _train(devices=None, **overrides)


def _validate(**overrides: Any) -> Callable[[], Any]:
  return lambda: validate_trainer_config(_cfg(**overrides))


def _opt(**kw: Any) -> Callable[[], Any]:
  return lambda: optimizer_from_config(ml_collections.ConfigDict(kw), 10)


def _loss(params, batch, rng, extra):
  return jnp.mean((batch["x"] @ params["w"]) ** 2), {}


def _step_call(batch: dict, **kw: Any) -> Callable[[], Any]:
  def run():
    opt = optax.sgd(0.1)
    step = make_train_step(_loss, opt, **kw)
    state = TrainState.create({"w": jnp.ones((3,))}, opt, jax.random.key(0))
    step(state, {"x": np.ones((8, 3), np.float32)})
    return step(TrainState.create({"w": jnp.ones((3,))}, opt, jax.random.key(0)), batch)
  return run


def _donated_twice():
  opt = optax.sgd(0.1)
  step = make_train_step(_loss, opt)
  state = TrainState.create({"w": jnp.ones((3,))}, opt, jax.random.key(0))
  step(state, {"x": np.ones((8, 3), np.float32)})
  step(state, {"x": np.ones((8, 3), np.float32)})


def _rules(rules, **kw) -> Callable[[], Any]:
  return lambda: tree_shardings({"params": {"w": jnp.zeros((8, 6)), "b": jnp.zeros(6)}},
                                make_mesh((("data", 4), ("model", 2))), rules, **kw)


def _momo_update(**kw) -> Callable[[], Any]:
  def run():
    opt = momo()
    p = {"w": jnp.ones(3)}
    return opt.update(p, opt.init(p), **kw)
  return run


@contextlib.contextmanager
def _not_installed(missing: str) -> Iterator[str]:
  """A module (its name yielded) that imports ``missing``, which looks not installed meanwhile
  (``None`` in ``sys.modules`` makes its import fail); nothing is uninstalled, ``sys`` is restored."""
  folder = tempfile.mkdtemp(prefix="jaxlab-sweep-")
  module = f"_jaxlab_sweep_needs_{missing}"
  with open(os.path.join(folder, f"{module}.py"), "w") as f:
    f.write(f"import {missing}\n\n\ndef task():\n  return {missing}\n")
  saved = sys.modules.get(missing, _ABSENT)
  sys.path.insert(0, folder)
  sys.modules[missing] = None  # type: ignore[assignment]
  try:
    yield module
  finally:
    sys.path.remove(folder)
    sys.modules.pop(module, None)
    if saved is _ABSENT:
      sys.modules.pop(missing, None)
    else:
      sys.modules[missing] = saved


_ABSENT = object()


def _lazy_entry_needing(missing: str) -> Callable[[], Any]:
  """``get`` of a lazy registry entry whose module imports ``missing``, not installed."""
  def run():
    with _not_installed(missing) as module:
      r = Registry("task")
      r.register_lazy("needs_extra", f"{module}:task")
      return r.get("needs_extra")
  return run


def _report_rows(text: str) -> Callable[[], Any]:
  """``jaxlab.report`` of a workdir whose ``metrics.jsonl`` is ``text``."""
  def run():
    from jaxlab import report
    folder = tempfile.mkdtemp(prefix="jaxlab-sweep-")
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
      f.write(text)
    return report.load_workdir(folder)
  return run


@functools.cache
def _two_seed_workdir() -> str:
  """A digits MLP of 2 vmapped seeds trained 2 steps, checkpointed at 2 (trained once per process)."""
  config = load_config("digits_mlp:tiny")
  config.num_steps = config.log_every = config.eval_every = config.checkpoint_every = 2
  config.runs.seeds = 2
  workdir = tempfile.mkdtemp(prefix="jaxlab-sweep-")
  train(config, workdir, devices=jax.devices()[:1], progress=False)
  return workdir


def _load_run(task: str | None = None, **kwargs: Any) -> Callable[[], Any]:
  """``jaxlab.load_run`` of that workdir (a copy whose saved config names ``task``, if given)."""
  def run():
    import json
    import shutil
    from jaxlab.load import load_run
    workdir = _two_seed_workdir()
    if task is not None:
      copy = os.path.join(tempfile.mkdtemp(prefix="jaxlab-sweep-"), "run")
      shutil.copytree(workdir, copy)
      path = os.path.join(copy, "checkpoints", "2", "config", "metadata")
      with open(path) as f:
        saved = json.load(f)
      with open(path, "w") as f:
        json.dump({**saved, "task": task}, f)
      workdir = copy
    return load_run(workdir, **kwargs)
  return run


def _iqm(function: str, scores: Any, **kwargs: Any) -> Callable[[], Any]:
  """``jaxlab.rl.atari_scores.iqm_with_ci({"der": scores})`` or ``jaxlab.report.iqm_ci(scores)``."""
  def run():
    if function == "iqm_ci":
      from jaxlab.report import iqm_ci
      return iqm_ci(scores, **kwargs)
    from jaxlab.rl.atari_scores import iqm_with_ci
    return iqm_with_ci({"der": scores}, **kwargs)
  return run


def _register_twice():
  r = Registry("thing")
  r.register("a")(lambda: 1)
  r.register("a")(lambda: 2)


CASES: list[Case] = [
    # --- trainer config values ------------------------------------------------------------------
    *[("trainer config", f"{k}={v!r}", _validate(**{k: v}), f"{k} must be an integer >= {low}, got {v!r}")
      for k, v, low in [("batch_size", 0, 1), ("batch_size", -8, 1), ("batch_size", 2.5, 1), ("batch_size", "64", 1),
                        ("num_steps", 0, 1), ("num_steps", -5, 1), ("num_steps", True, 1), ("log_every", 0, 1),
                        ("eval_every", 0, 1), ("checkpoint_every", 0, 1), ("checkpoint_every", -1, 1),
                        ("steps_per_call", 0, 1), ("grad_accum_steps", 0, 1), ("checkpoint_keep", 0, 1),
                        ("prefetch", -1, 0), ("checkpoint_keep_period", -3, 0)]],
    *[("trainer config", f"seed={v!r}", _validate(seed=v), f"seed must be an integer in [0, 4294967295] (a uint32 key), got {v!r}")
      for v in (-1, 1.5, 2**32)],
    ("trainer config", "remat='all'", _validate(remat="all"), "remat must be one of"),
    ("trainer config", "compute_dtype='bf16'", _validate(compute_dtype="bf16"), "compute_dtype must be one of"),
    ("trainer config", "skip_nonfinite='yes'", _validate(skip_nonfinite="yes"), "skip_nonfinite must be True or False"),
    ("trainer config", "no task key", lambda: validate_trainer_config(ml_collections.ConfigDict({"x": 1})), "no 'task' key"),
    ("trainer config", "unknown task", _train(task="digits_classifcation"), "unknown task 'digits_classifcation'"),
    ("trainer config", "batch larger than the data", _train(batch_size=4096), "batch_size 4096 exceeds the 1438 training"),
    ("trainer config", "batch not divisible by data axis", _train_all(batch_size=60),
     "global batch size 60 is not divisible by the 'data' mesh axis size 8"),
    ("trainer config", "workdir is a file", lambda: ensure_writable(__file__ + "/x"), "is not writable"),
    # --- mesh -------------------------------------------------------------------------------------
    ("mesh", "flat pair", lambda: resolve_mesh_shape(("data", -1), 8), "(entry 'data' is not a pair)"),
    ("mesh", "fractional size", lambda: resolve_mesh_shape((("data", 8.9),), 8), "needs an integer size (or -1), got 8.9"),
    ("mesh", "string size", lambda: resolve_mesh_shape((("data", "8"),), 8), "needs an integer size (or -1), got '8'"),
    ("mesh", "zero size", lambda: resolve_mesh_shape((("data", 0),), 8), "sizes must be positive"),
    ("mesh", "-2 size", lambda: resolve_mesh_shape((("data", -2),), 8), "sizes must be positive"),
    ("mesh", "two -1", lambda: resolve_mesh_shape((("data", -1), ("model", -1)), 8), "at most one -1"),
    ("mesh", "not dividing", lambda: resolve_mesh_shape((("data", 3),), 8), "needs a multiple of 3 devices"),
    ("mesh", "too small", lambda: resolve_mesh_shape((("data", 2), ("model", 2)), 8), "uses 4 devices, but there are 8"),
    ("mesh", "duplicate names", lambda: resolve_mesh_shape((("data", 2), ("data", 4)), 8), "must be unique"),
    ("mesh", "empty name", lambda: resolve_mesh_shape((("", -1),), 8), "non-empty strings"),
    ("mesh", "a string", lambda: resolve_mesh_shape("data", 8), "non-empty tuple of (axis name, size) pairs"),
    ("mesh", "empty", lambda: resolve_mesh_shape((), 8), "non-empty tuple"),
    ("mesh", "no 'data' axis", _train(mesh=(("Data", -1),)), "the mesh needs a 'data' axis"),
    # --- sharding rules ---------------------------------------------------------------------------
    ("sharding", "bad regex", _rules(((r"w(", (None, "model")),)), "rule 0 has an invalid regex 'w('"),
    ("sharding", "spec is a string", _rules(((r"w", "model"),)), "needs a tuple of mesh axes"),
    ("sharding", "rule not a pair", _rules((("w",),)), "rule 0 must be (regex, (mesh axes...))"),
    ("sharding", "rule is a string", _rules(("w",)), "rule 0 must be (regex, (mesh axes...))"),
    ("sharding", "unknown mesh axis", _rules(((r"w", (None, "tensor")),)), "names mesh axis 'tensor'"),
    ("sharding", "does not divide", _rules(((r"w", ("model", "data")),)), "dimension 6 is not divisible by mesh size 4"),
    ("sharding", "too many axes", _rules(((r"b", (None, "model")),)), "with more axes than the array has"),
    ("sharding", "axis used twice", _rules(((r"w", ("model", "model")),)), "uses a mesh axis twice"),
    ("sharding", "unknown fsdp axis", _rules((), fsdp_axis="fsdp"), "fsdp_axis 'fsdp' is not a mesh axis"),
    ("sharding", "unknown run axis", _rules((), run_axis="runs"), "run axis 'runs' is not a mesh axis"),
    ("sharding", "rule matching nothing", _train(sharding_rules=((r"dense_0/kernel", (None, "model")),)),
     "rule 'dense_0/kernel' matches no leaf"),
    # --- runs -------------------------------------------------------------------------------------
    ("runs", "seeds=0", _train(**{"runs.seeds": 0}), "runs.seeds must be an integer >= 1 (the number of vmapped seeds), got 0"),
    ("runs", "malformed sweep", _train(**{"runs.sweep": (("learning_rate", 1e-3),)}), "runs.sweep[0] must be"),
    ("runs", "runs not dividing data", _train_all(**{"runs.seeds": 3}), "3 runs cannot be sharded over the 'data' mesh axis of size 8"),
    ("runs", "swept key not in the optimizer", _train(**{"runs.sweep": (("b1", (0.8, 0.9)),)}), "swept optimizer hyper-parameter(s) ['b1']"),
    # --- optimizer config -------------------------------------------------------------------------
    ("optimizer", "unknown name", _opt(name="adamm", learning_rate=1e-3), "unknown optimizer 'adamm'; valid names"),
    ("optimizer", "no name", _opt(learning_rate=1e-3), "needs a 'name'"),
    ("optimizer", "lr nan", _opt(name="adam", learning_rate=float("nan")), "learning_rate must be a finite number >= 0, got nan"),
    ("optimizer", "lr inf", _opt(name="adam", learning_rate=float("inf")), "got inf"),
    ("optimizer", "lr negative", _opt(name="adam", learning_rate=-1.0), "got -1.0"),
    ("optimizer", "lr string", _opt(name="adam", learning_rate="fast"), "got 'fast'"),
    ("optimizer", "unknown kwarg", _opt(name="adam", learning_rate=1e-3, beta1=0.9), "has no argument(s) ['beta1']"),
    ("optimizer", "schedule on polyak", _opt(name="polyak_sgd", learning_rate=1.0, schedule="cosine"), "takes no schedule"),
    ("optimizer", "unknown schedule", _opt(name="adam", learning_rate=1e-3, schedule="cosin"), "unknown schedule 'cosin'"),
    ("optimizer", "bad schedule kwarg", _opt(name="adam", learning_rate=1e-3, schedule="warmup_cosine",
                                             schedule_kwargs={"warmup": 3}), "has no argument(s) ['warmup']"),
    ("optimizer", "schedule without lr", _opt(name="polyak_sgd", schedule="cosine"), "needs optimizer.learning_rate"),
    ("optimizer", "unknown mask", _opt(name="adamw", learning_rate=1e-3, weight_decay_mask="biases"), "weight_decay_mask must be one of"),
    ("optimizer", "mask without decay", _opt(name="adam", learning_rate=1e-3, weight_decay_mask="no_bias_norm"), "takes no weight-decay mask"),
    ("optimizer", "malformed chain", _opt(name="sgd", learning_rate=1.0, chain=("clip",)), "optimizer.chain[0] must be"),
    ("optimizer", "unknown chain member", _opt(name="sgd", learning_rate=1.0, chain=(("clipp", {}),)), "unknown gradient transform 'clipp'"),
    ("optimizer", "bad chain kwarg", _opt(name="sgd", learning_rate=1.0, chain=(("clip_by_global_norm", {"norm": 1}),)),
     "has no argument(s) ['norm']"),
    # --- MoMo -------------------------------------------------------------------------------------
    *[("momo", f"momo({k}={v!r})", (lambda k=k, v=v: momo(**{k: v})), frag)
      for k, v, frag in [("beta", 1.0, "beta must be in [0.0, 1.0), got 1.0"), ("beta", -0.1, "got -0.1"),
                         ("beta", float("nan"), "got nan"), ("learning_rate", -1.0, "learning_rate must be a finite"),
                         ("weight_decay", -1e-4, "weight_decay must be a finite number >= 0.0"),
                         ("lower_bound", float("nan"), "lower_bound must be finite, got nan"),
                         ("lower_bound", float("inf"), "lower_bound must be finite, got inf"),
                         ("adapt_lower_bound", "no", "adapt_lower_bound must be True or False, got 'no'"),
                         ("bias_correction", "yes", "bias_correction must be True or False"),
                         ("learning_rate", "1e-3", "learning_rate must be a number, got '1e-3'")]],
    *[("momo", f"momo_adam({k}={v!r})", (lambda k=k, v=v: momo_adam(**{k: v})), frag)
      for k, v, frag in [("b1", 1.5, "b1 must be in [0.0, 1.0), got 1.5"), ("b2", -1.0, "b2 must be in [0.0, 1.0)"),
                         ("eps", -1e-8, "eps must be a finite number > 0"),
                         ("eps", 0.0, "eps must be a finite number > 0 (added to sqrt(v): 0 gives 0/0 = NaN where a gradient "
                                      "is 0), got 0.0"),
                         ("weight_decay_mode", "l2", "weight_decay_mode must be"),
                         ("adapt_lower_bound", 1, "adapt_lower_bound must be True or False, got 1")]],
    ("momo", "schedule turning negative", lambda: momo(learning_rate=optax.linear_schedule(1.0, -0.1, 1000)),
     "momo: learning_rate (a schedule) gives -0.1 at step 1000; must be finite and >= 0 at every step"),
    ("momo", "momo_adam negative schedule", lambda: momo_adam(learning_rate=lambda count: -1e-3 + 0 * count),
     "momo_adam: learning_rate (a schedule) gives -0.001 at step 0"),
    ("momo", "int32 params", lambda: momo().init({"w": jnp.ones(3, jnp.int32)}), "params must be floating point"),
    ("momo", "update without value", _momo_update(params={"w": jnp.ones(3)}), "value=loss"),
    ("momo", "update without params", _momo_update(value=jnp.ones(())), "needs the current params"),
    ("momo", "non-scalar value", _momo_update(params={"w": jnp.ones(3)}, value=jnp.ones(2)), "value must be a scalar loss"),
    ("momo", "mask of another structure", lambda: momo(weight_decay=0.1, mask={"v": True}).update(
        {"w": jnp.ones(3)}, momo().init({"w": jnp.ones(3)}), {"w": jnp.ones(3)}, value=jnp.ones(())), "mask must have the structure of params"),
    # --- train step ------------------------------------------------------------------------------
    ("step", "grad_accum not dividing", _step_call({"x": np.ones((8, 3), np.float32)}, grad_accum_steps=3),
     "grad_accum_steps=3 does not divide the batch dimension 8"),
    ("step", "batch of another shape", _step_call({"x": np.ones((8, 4), np.float32)}), "batch['x']: expected float32[8, 3], got float32[8, 4]"),
    ("step", "batch of another dtype", _step_call({"x": np.ones((8, 3), np.int32)}), "expected float32[8, 3], got int32[8, 3]"),
    ("step", "batch of another structure", _step_call({"y": np.ones((8, 3), np.float32)}), "batch structure"),
    ("step", "donated state reused", _donated_twice, "donated to an earlier step call"),
    ("step", "remat unknown", lambda: make_train_step(_loss, optax.sgd(0.1), remat="yes"), "remat must be one of"),
    ("step", "compute dtype unknown", lambda: make_train_step(_loss, optax.sgd(0.1), compute_dtype="half"), "compute_dtype must be one of"),
    ("step", "steps_per_call 0", lambda: make_train_step(_loss, optax.sgd(0.1), steps_per_call=0), "steps_per_call must be an integer >= 1"),
    ("step", "grad_accum -1", lambda: make_train_step(_loss, optax.sgd(0.1), grad_accum_steps=-1), "grad_accum_steps must be an integer >= 1"),
    ("step", "guard unknown", lambda: make_train_step(_loss, optax.sgd(0.1), guard="where"), "guard must be one of ('cond', 'select'), got 'where'"),
    # --- data, models, tasks ----------------------------------------------------------------------
    ("data", "batch larger than data", lambda: batch_indices(10, 16, 0, 0), "batch_size 16 exceeds the 10 training examples"),
    ("data", "test_fraction 0", lambda: load_digits_split(test_fraction=0.0), "test_fraction must be in (0, 1), got 0.0"),
    ("data", "test_fraction 1.5", lambda: load_digits_split(test_fraction=1.5), "got 1.5"),
    ("model", "num_outputs mismatch", _train(**{"model.num_outputs": 5}), "model.num_outputs=5 but the digits have 10 classes"),
    ("model", "hidden 0", lambda: make_model("mlp", hidden=(0,)), "model.hidden must be positive integers, got (0,)"),
    ("model", "hidden negative", lambda: make_model("mlp", hidden=(32, -1)), "got (32, -1)"),
    ("model", "num_outputs 0", lambda: make_model("mlp", num_outputs=0), "model.num_outputs must be positive integers, got 0"),
    ("model", "unknown field", lambda: make_model("mlp", hiden=(3,)), "has no field(s) ['hiden']"),
    ("model", "unknown name", lambda: make_model("mlpp"), "unknown model 'mlpp'"),
    ("model", "unknown loss", _train(**{"loss.name": "cross_entropy"}), "unknown classification loss 'cross_entropy'"),
    # --- checkpoints ------------------------------------------------------------------------------
    ("checkpoint", "params from an empty dir", lambda: restore_params("/tmp/jaxlab_sweep_empty_ckpt", {}), "no checkpoint in"),
    # --- registries and config files --------------------------------------------------------------
    ("registry", "a different object under a taken name", _register_twice, "'a' is already registered"),
    ("registry", "malformed lazy target", lambda: TASKS.register_lazy("x", "no_colon"), "must be 'module:attribute'"),
    ("registry", "lazy entry needing a missing extra (rl)", _lazy_entry_needing("gymnax"),
     "task 'needs_extra' needs the optional package 'gymnax', which is not installed: pip install 'jaxlab[rl]'"),
    ("registry", "lazy entry needing a missing extra (pde)", _lazy_entry_needing("exponax"), "pip install 'jaxlab[pde]'"),
    # --- no-ops: settings that would train nothing ----------------------------------------------
    ("optimizer", "freeze every parameter", lambda: optimizer_from_config(ml_collections.ConfigDict(
        {"name": "sgd", "learning_rate": 0.1, "freeze": (".*",)}), 10).init({"w": jnp.ones(3)}),
     "optimizer.freeze=('.*',) freezes every parameter (1 of them): training would change nothing"),
    *[("trainer config", f"stop_after={v!r}", (lambda v=v: train(_cfg(), tempfile.mkdtemp(), stop_after=v, progress=False)),
       f"--stop_after={v!r} (stop_after) would train nothing; allowed: a step >= 1") for v in (-1, 0, 2.5)],
    # --- metrics files --------------------------------------------------------------------------
    ("report", "a row without step", _report_rows('{"step": 1, "loss": 1.0}\n{"loss": 2.0}\n'),
     "metrics.jsonl is not the trainer's JSON lines: line 2 is not a logged step"),
    ("report", "a bad line before the last", _report_rows('{"step": 1}\n{"step": 2\n{"step": 3}\n'), "line 2 is not JSON"),
    # --- scores and load_run ----------------------------------------------------------------------
    ("scores", "[games, runs] without games=", _iqm("iqm_with_ci", np.zeros((26, 5))),
     "shape (26, 5): 26 rows read as Atari 100k's 26 games of 5 runs or as 26 runs of 5 games; must be [runs, games]"),
    ("scores", "[games, runs] with games=", _iqm("iqm_with_ci", np.zeros((26, 5)), games=26),
     "shape (26, 5): its rows are the 26 games (games=26); must be [runs, games]: pass scores['der'].T"),
    ("scores", "columns other than games=", _iqm("iqm_with_ci", np.zeros((5, 3)), games=4),
     "scores['der'] has shape (5, 3); must be [runs, 4] (games=4)"),
    ("scores", "games=0", _iqm("iqm_with_ci", np.zeros((5, 3)), games=0), "iqm_with_ci: games=0; must be"),
    *[("scores", f"{f}(reps={r!r})", _iqm(f, np.zeros((4, 2)), reps=r), f"{f}: reps={r!r}; must be an int >= 1")
      for f in ("iqm_with_ci", "iqm_ci") for r in (0, -3, 2.5)],
    ("scores", "iqm_ci of a 1-D array", _iqm("iqm_ci", np.zeros(4)), "iqm_ci: scores has shape (4,); must be [runs, tasks]"),
    ("load_run", "step='2'", _load_run(step="2"), "load_run: step='2' is a str; allowed: an int step (2), e.g. step=2"),
    ("load_run", "mesh='data=8'", _load_run(mesh="data=8"), "load_run: mesh='data=8' is a str; allowed: a jax.sharding.Mesh"),
    ("load_run", "mesh=jax.devices()", _load_run(mesh=jax.devices()), "load_run: mesh=[CpuDevice(id=0)"),
    ("load_run", "a data axis of 8 for 2 runs", _load_run(mesh=make_mesh((("data", 8),))),
     "has a 'data' axis of size 8, which the run axis of the 2 vmapped runs in"),
    ("load_run", "a data axis of 4 for 2 runs", _load_run(mesh=make_mesh((("data", 4), ("model", 2)))),
     "allowed: a mesh whose 'data' size divides 2 (1, 2), or seed_index in [0, 1] to load one run"),
    ("load_run", "a task a config file registers", _load_run(task="my_line_fit"),
     "was trained on task 'my_line_fit', which is not registered in this process; a task a config file registers"),
    ("config file", "missing", lambda: load_config("configs/nope.py"), "config 'configs/nope.py' not found"),
    ("config file", "unknown name", lambda: load_config("digits_mpl"), "one of: clip_files, digits_clip"),
    ("config file", "not Python", lambda: load_config(os.path.join(os.path.dirname(__file__), "..", "README.md")), "is not a Python file"),
    ("config file", "no get_config", lambda: load_config(os.path.join(os.path.dirname(__file__), "..", "configs", "__init__.py")),
     "defines no get_config"),
    ("config file", "bad argument", lambda: load_config("digits_mlp:huge"), "takes no argument or 'tiny', got 'huge'"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)


def test_extras_named_are_those_setup_cfg_installs():
  import configparser
  import re
  from jaxlab.registry import EXTRAS
  cfg = configparser.ConfigParser()
  cfg.read(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "setup.cfg"))
  module_of = {"scikit-learn": "sklearn", "pillow": "PIL", "ale-py": "ale_py"}  # distribution -> import name, where they differ
  extras = cfg["options.extras_require"]
  for module, extra in EXTRAS.items():
    requirements = [line.split("#")[0].strip() for line in extras[extra].splitlines()]
    names = {module_of.get(d, d) for d in (re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] for r in requirements if r)}
    assert module in names, (module, extra, names)


def test_a_missing_extra_is_one_line_and_leaves_no_workdir(tmp_path, monkeypatch):
  workdir = tmp_path / "run"
  with _not_installed("gymnax") as module:
    monkeypatch.setitem(TASKS._entries, "_sweep_needs_rl", f"{module}:task")  # removed again after the test
    with pytest.raises(InputError, match=r"task '_sweep_needs_rl' needs the optional package 'gymnax', which is "
                                         r"not installed: pip install 'jaxlab\[rl\]'$"):
      train(_cfg(task="_sweep_needs_rl"), str(workdir), progress=False, devices=jax.devices()[:1])
  assert not workdir.exists()  # refused before the workdir was made
  with pytest.raises(ModuleNotFoundError):  # a module that is no extra's: a bug, its traceback kept
    _lazy_entry_needing("no_such_jaxlab_dependency")()


def verdict(call: Callable[[], Any], fragment: str, regex: bool = False) -> str:
  """clear / confusing (wrong type or message) / crash (a Python error from deep inside) / silent."""
  import re
  try:
    call()
  except InputError as e:
    named = re.search(fragment, str(e)) if regex else fragment in str(e)
    return "clear" if named and "\n" not in str(e) else "confusing"
  except (ZeroDivisionError, IndexError, TypeError, AttributeError, FloatingPointError, OverflowError):
    return "crash"
  except Exception:  # noqa: BLE001
    return "confusing"
  return "silent"


def _collect_sweeps() -> list[tuple[str, str, Callable[[], Any], str, bool]]:
  """This module's cases plus every ``tests/**/test_bad_input*.py`` that defines ``CASES``
  (``(area, what, call, fragment)``, or ``(what, call, regex)`` with the area from the folder)."""
  import glob
  import importlib.util
  cases = [(*c, False) for c in CASES]
  here = os.path.dirname(os.path.abspath(__file__))
  for path in sorted(glob.glob(os.path.join(here, "**", "test_bad_input*.py"), recursive=True)):
    if os.path.abspath(path) == os.path.abspath(__file__):
      continue
    spec = importlib.util.spec_from_file_location(f"_sweep_{os.path.basename(os.path.dirname(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    area = os.path.basename(os.path.dirname(path))
    for case in getattr(module, "CASES", []):
      case = (*case, False) if len(case) == 4 else (area, *case, True)
      if len(inspect.signature(case[2]).parameters) == 1:  # ``(what, make(tmp_path), fragment)``: files
        case = (case[0], case[1], _with_tmp_path(case[2]), case[3], False)  # written first; a plain fragment
      cases.append(case)
  return cases


def _with_tmp_path(make: Callable[[Any], Callable[[], Any]]) -> Callable[[], Any]:
  """A case that needs files, as pytest's ``tmp_path`` gives them: built in a fresh folder when run."""
  import pathlib
  import tempfile
  return lambda: make(pathlib.Path(tempfile.mkdtemp(prefix="jaxlab-sweep-")))()


def main() -> None:
  cases = _collect_sweeps()
  counts: dict[str, int] = {}
  by_area: dict[str, dict[str, int]] = {}
  for area, what, call, fragment, regex in cases:
    v = verdict(call, fragment, regex)
    counts[v] = counts.get(v, 0) + 1
    by_area.setdefault(area, {}).setdefault(v, 0)
    by_area[area][v] += 1
    if v != "clear":
      print(f"  {v:9s} {area} / {what}")
  print(f"{len(cases)} bad inputs: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in ("clear", "confusing", "silent", "crash")))
  for area, c in by_area.items():
    print(f"  {area:16s} " + ", ".join(f"{n} {k}" for k, n in sorted(c.items())))


if __name__ == "__main__":
  main()
