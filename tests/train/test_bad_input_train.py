"""Resume and fine-tune never load the wrong model; the step, schedule and seeds refuse what cannot train.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. The fine-tuning and
resume cases share one tiny pre-trained digits run per process (a few seconds); each case fails
before its own run compiles anything.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from types import SimpleNamespace
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from configs import digits_mlp  # noqa: E402
from jaxlab.errors import CheckpointError, InputError  # noqa: E402
from jaxlab.optim import optimizer_from_config  # noqa: E402
from jaxlab.train import TrainState, make_train_step  # noqa: E402
from jaxlab.train import checkpoint as checkpoint_lib  # noqa: E402
from jaxlab.train.checkpoint import Checkpointer  # noqa: E402
from jaxlab.experiment import runs_from_config  # noqa: E402
from jaxlab.experiment import train  # noqa: E402
from jaxlab.experiment.validate import validate_trainer_config  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]


def _config(**overrides: Any) -> ml_collections.ConfigDict:
  # Not type-safe: a config file may set any value; the trainer's own checks must catch it.
  c = ml_collections.ConfigDict(digits_mlp.get_config("tiny").to_dict(), type_safe=False)
  c.batch_size, c.num_steps, c.checkpoint_every = 64, 4, 2
  for key, value in overrides.items():
    node = c
    *parents, leaf = key.split(".")
    for p in parents:
      node = node[p]
    node[leaf] = value
  return c


_RUNS: dict[tuple, str] = {}


def _run(**overrides: Any) -> str:
  """The workdir of a finished tiny run with these overrides (trained once per process)."""
  key = tuple(sorted((k, repr(v)) for k, v in overrides.items()))
  if key not in _RUNS:
    workdir = tempfile.mkdtemp(prefix="jaxlab_pre_")
    train(_config(**overrides), workdir, progress=False, devices=jax.devices()[:1])
    _RUNS[key] = workdir
  return _RUNS[key]


def _fine_tune(pre: dict, **overrides: Any) -> Callable[[], Any]:
  def run():
    config = _config(**overrides)
    config.init_from.workdir = _run(**pre)
    return train(config, tempfile.mkdtemp(), progress=False, devices=jax.devices()[:1])
  return run


def _resume(**overrides: Any) -> Callable[[], Any]:
  def run():
    workdir = tempfile.mkdtemp()
    train(_config(num_steps=2), workdir, progress=False, devices=jax.devices()[:1])
    return train(_config(**overrides), workdir, progress=False, devices=jax.devices()[:1])
  return run


def _checkpointer_resume(saved: dict, here: dict) -> Callable[[], Any]:
  """The issue's DPOT case without training one: equal shapes, a changed model key."""
  def run():
    directory = tempfile.mkdtemp()
    state = {"w": jnp.ones(3)}
    first = Checkpointer(directory, 1, config=saved)
    first.maybe_save(1, state, final=True)
    first.close()
    again = Checkpointer(directory, 1, config=here)
    try:
      return again.restore(jax.eval_shape(lambda: state))
    finally:
      again.close()
  return run


def _integer_loss():
  step = make_train_step(lambda p, b, r, e: (jnp.sum(b["x"] @ p["w"] > 0).astype(jnp.int32), {}), optax.sgd(0.1))
  state = TrainState.create({"w": jnp.ones((3,))}, optax.sgd(0.1), jax.random.key(0))
  return step(state, {"x": np.ones((8, 3), np.float32)})


def _opt(**kw: Any) -> Callable[[], Any]:
  return lambda: optimizer_from_config(ml_collections.ConfigDict(kw), 100)


CASES: list[Case] = [
    ("fine-tune", "from a smaller model (leaves missing)", _fine_tune({}, **{"model.hidden": (32, 16)}),
     "missing from the checkpoint (Dense_2/bias | Dense_2/kernel)"),
    ("fine-tune", "from a bigger model (leaves unexpected)", _fine_tune({"model.hidden": (32, 16)}),
     "in the checkpoint but not in this model (Dense_2/bias | Dense_2/kernel)"),
    ("fine-tune", "from a model of other widths", _fine_tune({}, **{"model.hidden": (48,)}),
     "of another shape (Dense_0/bias: (32,) there, (48,) here"),
    ("fine-tune", "names where the run came from", _fine_tune({}, **{"model.hidden": (48,)}), "init_from.workdir='"),
    ("fine-tune", "with vmapped seeds", _fine_tune({}, **{"runs.seeds": 2}),
     "init_from (fine-tuning) works with single runs"),
    ("fine-tune", "from a run of vmapped seeds without choosing one", _fine_tune({"runs.seeds": 2}),
     "holds 2 vmapped runs (params with a leading run axis); choose one with --config.init_from.seed_index=<0..1>"),
    ("fine-tune", "a seed index beyond the runs", _fine_tune({"runs.seeds": 2}, **{"init_from.seed_index": 2}),
     "init_from.seed_index=2; allowed: an int in [0, 1]"),
    ("fine-tune", "a seed index for a single run", _fine_tune({}, **{"init_from.seed_index": 0}),
     "init_from.seed_index=0, but"),
    ("fine-tune", "a seed index that is no index", _fine_tune({"runs.seeds": 2}, **{"init_from.seed_index": 0.5}),
     "init_from.seed_index=0.5; allowed: -1 (a single pre-training run)"),
    ("resume", "a changed optimizer setting", _resume(**{"optimizer.learning_rate": 0.5}),
     "was trained with another config: optimizer.learning_rate: 1.0 there, 0.5 here"),
    ("resume", "a changed data setting", _resume(**{"data.split_seed": 3}),
     "data.split_seed: 0 there, 3 here. Resuming may change only name, num_steps"),
    ("resume", "a changed model setting of equal shapes (DPOT modes 4 -> 2)",
     _checkpointer_resume({"model": {"name": "dpot", "modes": 4}}, {"model": {"name": "dpot", "modes": 2}}),
     "model.modes: 4 there, 2 here"),
    ("resume", "a changed task", _checkpointer_resume({"task": "a"}, {"task": "b"}), "task: 'a' there, 'b' here"),
    ("step", "an integer loss", _integer_loss, "returned a int32 value of shape (); it must be a floating-point scalar"),
    ("optimizer", "a schedule that goes negative", _opt(name="sgd", learning_rate=0.1, schedule="cosine",
                                                         schedule_kwargs={"alpha": -0.5}),
     "gives the learning rate"),
    ("optimizer", "a warm-up that ends below 0", _opt(name="adam", learning_rate=0.1, schedule="warmup_cosine",
                                                       schedule_kwargs={"warmup_steps": 10, "end_value": -1e-3}),
     "must be finite and >= 0 at every step"),
    ("trainer config", "a seed beyond uint32", lambda: validate_trainer_config(_config(seed=2**32)),
     "seed must be an integer in [0, 4294967295] (a uint32 key), got 4294967296"),
    ("trainer config", "seeds that run past uint32", lambda: runs_from_config(_config(seed=2**32 - 1, **{"runs.seeds": 2})),
     "seeds must be <= 2**32 - 1"),
    ("trainer config", "a fractional number of seeds", lambda: runs_from_config(_config(**{"runs.seeds": 2.5})),
     "runs.seeds must be an integer >= 1 (the number of vmapped seeds), got 2.5"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)


def test_resume_may_change_the_cadence_and_says_so(tmp_path):
  train(_config(num_steps=2), str(tmp_path), progress=False, devices=jax.devices()[:1])
  with pytest.warns(UserWarning, match=r"resuming .* with changed log_every: 5 there, 1 here; num_steps: 2 there, 4 "
                                       r"here \(a learning-rate schedule follows the new num_steps\)"):
    result = train(_config(num_steps=4, log_every=1), str(tmp_path), progress=False, devices=jax.devices()[:1])
  assert result.summary["steps"] == 4


def test_resume_with_keys_of_another_version_warns_and_goes_on(tmp_path):
  state = {"w": jnp.ones(3)}
  first = Checkpointer(str(tmp_path), 1, config={"model": {"width": 4}})
  first.maybe_save(1, state, final=True)
  first.close()
  again = Checkpointer(str(tmp_path), 1, config={"model": {"width": 4, "new_option": True}, "optimizer": {"freeze": ()}})
  with pytest.warns(UserWarning, match=r"not compared \(written by another version\): model.new_option \(only here\)$"):
    restored, step = again.restore(jax.eval_shape(lambda: state))  # an empty new key (freeze=()) is no change
  again.close()
  assert step == 1
  np.testing.assert_array_equal(restored["w"], np.ones(3))  # a restore: bit-equal


def _truncate(step_dir: str) -> None:
  for root, _, files in os.walk(step_dir):
    for f in files:
      if f not in ("_CHECKPOINT_METADATA", "commit_success.txt") and "/state" in root + "/":
        path = os.path.join(root, f)
        with open(path, "r+b") as fh:
          fh.truncate(os.path.getsize(path) // 2)


def test_fine_tune_from_a_truncated_checkpoint_falls_back_then_refuses(tmp_path):
  pre = str(tmp_path / "pre")
  train(_config(), pre, progress=False, devices=jax.devices()[:1])  # checkpoints at steps 2 and 4
  _truncate(os.path.join(pre, "checkpoints", "4"))
  config = _config()
  config.init_from.workdir = pre
  with pytest.warns(RuntimeWarning, match=r"checkpoints/4 is unreadable .*; trying the previous one"):
    result = train(config, str(tmp_path / "tuned"), progress=False, devices=jax.devices()[:1])
  assert result.summary["steps"] == 4
  _truncate(os.path.join(pre, "checkpoints", "2"))
  with pytest.raises(CheckpointError) as info, warnings.catch_warnings():
    warnings.simplefilter("ignore")
    train(config, str(tmp_path / "tuned_again"), progress=False, devices=jax.devices()[:1])
  assert "init_from.workdir=" in str(info.value) and "no readable checkpoint" in str(info.value)
  assert "\n" not in str(info.value)


def test_closed_loop_reports_are_dropped_and_others_pass(monkeypatch):
  seen = []
  monkeypatch.setattr(sys, "unraisablehook", lambda report: seen.append(str(report.exc_value)))
  checkpoint_lib.quiet_closed_loop_reports()
  checkpoint_lib.quiet_closed_loop_reports()  # once per process: not stacked
  sys.unraisablehook(SimpleNamespace(exc_value=RuntimeError("Event loop is closed")))
  sys.unraisablehook(SimpleNamespace(exc_value=RuntimeError("something else")))
  assert seen == ["something else"]


def test_momo_lower_bound_above_the_loss_is_reported(tmp_path):
  config = _config(num_steps=2, log_every=1, **{"optimizer.lower_bound": 100.0})
  with pytest.warns(RuntimeWarning, match=r"opt/step_size=0 with opt/lb=100.0 above the loss .* not moving; lower "
                                          r"optimizer.lower_bound"):
    train(config, str(tmp_path), progress=False, devices=jax.devices()[:1])


def test_fine_tune_takes_the_chosen_seed_of_a_vmapped_run(tmp_path):
  pre = _run(**{"runs.seeds": 2})
  config = _config(num_steps=1, **{"init_from.seed_index": 1, "optimizer.learning_rate": 0.0})
  config.init_from.workdir = pre
  tuned = train(config, str(tmp_path), progress=False, devices=jax.devices()[:1])
  from jaxlab.load import load_run
  seed_1 = load_run(pre, seed_index=1).params
  # a copy of run 1 that took one step at learning rate 0: bit-equal
  jax.tree.map(np.testing.assert_array_equal, jax.device_get(tuned.state.params), jax.device_get(seed_1))
