"""The trainer: one readable loop around the one train step.

Sections: workdir, mesh, task (input, model, loss), optimizer, sharding, state (init or
restore), step, loop (log, eval, checkpoint), summary.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Sequence

import jax
import ml_collections
import numpy as np
import tqdm

from jaxlab import tasks as tasks_lib
from jaxlab.optim.schedules import optimizer_from_config
from jaxlab.train import sharding as sharding_lib
from jaxlab.train.checkpoint import Checkpointer, abstract_like
from jaxlab.train.mesh import make_mesh
from jaxlab.train.metrics_writer import MetricsWriter
from jaxlab.train.state import TrainState, make_init_fn
from jaxlab.train.step import make_train_step


@dataclasses.dataclass
class TrainResult:
  state: TrainState
  summary: dict[str, Any]


def ensure_writable(workdir: str) -> None:
  """Fails before any compute if ``workdir`` cannot hold checkpoints and metrics."""
  try:
    os.makedirs(workdir, exist_ok=True)
    probe = os.path.join(workdir, f".write_test_{jax.process_index()}")
    with open(probe, "w") as f:
      f.write("ok")
    os.remove(probe)
  except OSError as e:
    raise PermissionError(f"workdir {workdir!r} is not writable: {e.strerror or e}") from None


def _count(tree: Any) -> int:
  return int(sum(np.prod(x.shape) for x in jax.tree.leaves(tree)))


def train(config: ml_collections.ConfigDict, workdir: str, *,
          devices: Sequence[jax.Device] | None = None, stop_after: int | None = None,
          progress: bool = True) -> TrainResult:
  """Trains ``config`` in ``workdir``, resuming from its latest checkpoint if there is one.

  Args:
    config: an experiment config (see ``configs/``).
    workdir: checkpoints, ``metrics.jsonl`` and TensorBoard files go here.
    devices: devices for the mesh (default: all); tests pass a subset.
    stop_after: stop after this global step without a final checkpoint, as if the job were
      killed there (for time-sliced jobs and for testing resumption).
    progress: show a tqdm bar.
  """
  # Workdir.
  ensure_writable(workdir)

  # Mesh.
  mesh = make_mesh(config.mesh, devices)
  sharding_lib.check_batch_divisible(config.batch_size, mesh)

  # Task: input, model, loss.
  task = tasks_lib.make_task(config)
  optimizer = optimizer_from_config(config.optimizer, config.num_steps)
  init_fn = make_init_fn(task.init_params, optimizer, task.init_extra)

  # Sharding: rules apply to the whole state, so optimizer moments follow their parameters.
  rng = jax.random.key(config.seed)
  abstract_state = jax.eval_shape(init_fn, rng)
  state_sharding = sharding_lib.tree_shardings(abstract_state, mesh, config.sharding_rules)
  batch_sharding = sharding_lib.batch_sharding(mesh)

  # State: restore the latest checkpoint, or initialise already sharded.
  ckpt = Checkpointer(os.path.join(workdir, "checkpoints"), config.checkpoint_every)
  start = ckpt.latest_step()
  if start is not None:
    state = ckpt.restore(abstract_like(abstract_state, state_sharding))
  else:
    state = jax.jit(init_fn, out_shardings=state_sharding)(rng)
  start = int(state.step)

  # Step.
  local_spec = jax.tree.map(lambda x: jax.ShapeDtypeStruct(
      (config.batch_size,) + x.shape[1:], x.dtype), task.host_batch(0))
  train_step = make_train_step(task.loss_fn, optimizer, state_sharding=state_sharding,
                               batch_sharding=batch_sharding, batch_spec=local_spec,
                               skip_nonfinite=config.skip_nonfinite, update_extra=task.update_extra)

  # Loop.
  writer = MetricsWriter(workdir, resume_step=start)
  end = config.num_steps if stop_after is None else min(config.num_steps, stop_after)
  bar = tqdm.tqdm(total=config.num_steps, initial=start, disable=not progress or jax.process_index() != 0,
                  desc=config.get("name", config.task), dynamic_ncols=True)
  t0, last_log_time, last_log_step = time.perf_counter(), time.perf_counter(), start
  evals: dict[str, float] = {}
  metrics: dict[str, Any] = {}
  steps_per_sec = float("nan")
  with jax.set_mesh(mesh):
    for step in range(start, end):
      batch = sharding_lib.host_to_global(task.host_batch(step), batch_sharding)
      state, metrics = train_step(state, batch)
      done = step + 1
      if done % config.log_every == 0 or done == config.num_steps:
        metrics = jax.device_get(metrics)
        now = time.perf_counter()
        steps_per_sec = (done - last_log_step) / max(now - last_log_time, 1e-9)
        last_log_time, last_log_step = now, done
        row = {**metrics, "steps_per_sec": steps_per_sec}
        if task.evaluate is not None and (done % config.eval_every == 0 or done == config.num_steps):
          evals = task.evaluate(state.params)
          row.update(evals)
        writer.write(done, row)
        bar.set_postfix(loss=f"{float(metrics['loss']):.4f}", steps_per_s=f"{steps_per_sec:.1f}")
      bar.update(1)
      ckpt.maybe_save(done, state, final=done == config.num_steps)
  bar.close()
  ckpt.close()
  writer.close()

  summary = {
      "task": task.description,
      "optimizer": config.optimizer.name,
      "devices": f"{mesh.devices.size} x {jax.devices()[0].platform}",
      "mesh": dict(mesh.shape),
      "parameters": _count(state.params),
      "steps": int(state.step),
      "final_loss": float(metrics["loss"]) if metrics else float("nan"),
      "nonfinite_skipped": int(state.nonfinite_skipped),
      "steps_per_sec": steps_per_sec,
      "wall_time_s": time.perf_counter() - t0,
      **{k: float(v) for k, v in (metrics or {}).items() if k.startswith("opt/")},
      **evals,
  }
  return TrainResult(state=state, summary=summary)


def run_experiments(config: ml_collections.ConfigDict, workdir: str, **kwargs: Any) -> dict[str, dict]:
  """Runs ``config``, or each of ``config.experiments`` (in order) in ``workdir/<name>``.

  A config with an ``experiments`` block is a suite (the quickstart exercises every method this
  way); each entry is a complete experiment config. Returns ``{name: summary}``.
  """
  if "experiments" not in config:
    return {config.get("name", config.task): train(config, workdir, **kwargs).summary}
  return {name: train(sub, os.path.join(workdir, name), **kwargs).summary
          for name, sub in config.experiments.items()}
