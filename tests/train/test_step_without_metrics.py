"""Calls that do not log: the step program without its metrics trains bit-identically and does less work."""

from __future__ import annotations

import json

import jax
import numpy as np

from configs import digits_mlp, dqn_minatar
from jaxlab.optim import optimizer_from_config
from jaxlab.train import step as step_module
from jaxlab.train import make_train_step
from jaxlab.train.state import make_init_fn
from jaxlab.experiment import task_context, train
from jaxlab.tasks import make_task
from jaxlab.train import loop as loop_module


def _assert_equal_trees(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _transcendentals(jitted, *args) -> float:
  """exp, log, ... in the lowered program (jax drops the computations of unused outputs when it traces)."""
  return float(jitted.lower(*args).cost_analysis()["transcendentals"])


def test_soft_moe_agent_without_metrics_trains_the_same_and_skips_the_routing_statistics():
  c = dqn_minatar.get_config("tiny")  # Soft-MoE head: its acting pass's routing statistics are metrics only
  task = make_task(c, task_context(c))
  opt = optimizer_from_config(c.optimizer, c.num_steps)
  state = jax.jit(make_init_fn(task.init_params, opt, task.init_extra, task.init_data))(jax.random.key(0))
  step = make_train_step(task.loss_fn, opt, collect=task.collect, update_extra=task.update_extra,
                         donate=False)
  with_metrics, without = state, state
  for _ in range(2):
    with_metrics, metrics = step(with_metrics)
    without, none = step(without, metrics=False)
  assert "moe/combine_entropy" in metrics and none is None
  _assert_equal_trees(with_metrics, without)
  # the statistics' softmaxes and entropies (exp, log over every token x slot) are gone from the program
  assert _transcendentals(step.jitted_without_metrics, state, None) < _transcendentals(step.jitted, state, None)


def test_trainer_asks_for_metrics_only_on_the_calls_it_logs_when_enough_calls_do_not(tmp_path, monkeypatch):
  asked = []
  call = step_module.TrainStep.__call__

  def record(self, state, batch=None, *, metrics=True):
    asked.append(metrics)
    return call(self, state, batch, metrics=metrics)

  c = digits_mlp.get_config("tiny")  # MoMo: the update needs the loss value even without metrics
  c.log_every = 1
  every = train(c, str(tmp_path / "every"), progress=False, devices=jax.devices()[:1])
  monkeypatch.setattr(step_module.TrainStep, "__call__", record)
  c.log_every = 5
  # 16 unlogged calls: fewer than MIN_UNLOGGED_CALLS, so the short run keeps one program (one compile)
  assert c.num_steps - c.num_steps // 5 < loop_module.MIN_UNLOGGED_CALLS
  train(c, str(tmp_path / "short"), progress=False, devices=jax.devices()[:1])
  assert asked == [True] * c.num_steps
  asked.clear()
  monkeypatch.setattr(loop_module, "MIN_UNLOGGED_CALLS", c.num_steps - c.num_steps // 5)  # as in a long run
  sparse = train(c, str(tmp_path / "sparse"), progress=False, devices=jax.devices()[:1])
  assert asked == [(i + 1) % 5 == 0 for i in range(c.num_steps)]  # steps_per_call 1: one call per step
  _assert_equal_trees(every.state.params, sparse.state.params)
  logged = {name: _losses(tmp_path / name) for name in ("every", "sparse")}
  assert sorted(logged["sparse"]) == [5, 10, 15, 20]
  assert all(logged["sparse"][k] == logged["every"][k] for k in logged["sparse"])


def _losses(workdir) -> dict[int, float]:
  with open(workdir / "metrics.jsonl") as f:
    rows = [json.loads(line) for line in f]
  return {row["step"]: row["loss"] for row in rows if "loss" in row}
