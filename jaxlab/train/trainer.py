"""The trainer: one readable loop around the one train step.

Sections: set-up (workdir, mesh, task and optimizer, runs, sharding), state (init, restore or
fine-tune), loop (step programs, input, log, eval, checkpoint, preemption), summary. The config
is validated once, at the edge (:func:`train`, :func:`run_experiments`), and trusted after. Every method trains through here:
host data (``Task.host_batch``) or data made on the device (``Task.collect``), one run or many
vmapped runs, one step per call or ``steps_per_call`` steps in a ``lax.scan``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
import warnings
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import tqdm

from jaxlab import sharding as sharding_lib
from jaxlab.errors import DivergedError, InputError, is_int
from jaxlab.optim.config import optimizer_from_config
from jaxlab.startup_interrupt import raise_if_pending
from jaxlab.train import input_pipeline
from jaxlab.train.checkpoint import RESUME_SAFE_KEYS, Checkpointer, abstract_like
from jaxlab.train.context import TaskContext
from jaxlab.train.finetune import FineTuneStart, check_pretrained, fine_tune_start
from jaxlab.train.mesh import make_mesh
from jaxlab.train.metrics_writer import MetricsWriter
from jaxlab.train.preemption import PreemptionWatcher
from jaxlab.train.runs import Runs, make_runs_init
from jaxlab.train.state import TrainState, make_init_fn
from jaxlab.train.step import TrainStep, make_train_step
from jaxlab.train.task import TASKS, Task, make_task
from jaxlab.train.validate import validate_trainer_config
from jaxlab.train.workdir import Workdir
from jaxlab.train.workdir_files import write_workdir_files

_EVAL_STREAM = 0x65766C  # folded into a run's key: evaluation draws never reuse a step's


@dataclasses.dataclass
class TrainResult:
  """The final state and the summary; ``stopped_by`` names the signal ("SIGTERM", "SIGINT") that
  stopped the run early with a checkpoint, or is None."""
  state: TrainState
  summary: dict[str, Any]
  stopped_by: str | None = None


def ensure_writable(workdir: str) -> None:
  """Fails before any compute if ``workdir`` cannot hold checkpoints and metrics."""
  try:
    os.makedirs(workdir, exist_ok=True)
    probe = os.path.join(workdir, f".write_test_{jax.process_index()}")
    with open(probe, "w") as f:
      f.write("ok")
    os.remove(probe)
  except OSError as e:
    raise InputError(f"workdir {workdir!r} is not writable: {e.strerror or e}") from None


def count_params(params: Any, run_axis: bool = False) -> int:
  """Parameters of one run (a leading run axis is not counted)."""
  return int(sum(np.prod(x.shape[1:] if run_axis else x.shape) for x in jax.tree.leaves(params)))


def _crossed(before: int, after: int, every: int) -> bool:
  return after // every > before // every


def _host(x: Any) -> Any:
  x = np.asarray(x)
  return x.item() if x.ndim == 0 else x


class _Timer:
  """Train time between log points, excluding compilation, evaluation and checkpoints."""

  def __init__(self, step: int):
    self.reset(step)

  def reset(self, step: int) -> None:
    self.start, self.step, self.excluded, self.excluded_steps = time.perf_counter(), step, 0.0, 0

  def exclude(self, seconds: float, steps: int = 0) -> None:
    self.excluded += seconds
    self.excluded_steps += steps

  def rate(self, step: int) -> float:
    elapsed = time.perf_counter() - self.start - self.excluded
    steps = step - self.step - self.excluded_steps
    return steps / elapsed if steps > 0 and elapsed > 0 else float("nan")


def build_state_init(config: ml_collections.ConfigDict, task: Task | None = None,
                     ctx: TaskContext | None = None
                     ) -> tuple[Task, Runs | None, Any, Callable[..., TrainState], tuple]:
  """``(task, runs, optimizer, init, init_args)`` of ``config``; nothing is initialised or compiled.

  ``init(*init_args)`` is the run's initial ``TrainState`` (with a leading run axis when
  ``runs`` is not None): ``jax.eval_shape`` it for the abstract state a checkpoint restores onto.
  Shared by the trainer and ``jaxlab.load_run``.

  Args:
    config: an experiment config.
    task: the task of ``config`` if already built (default: ``make_task(config, ctx)``).
    ctx: what the caller resolved (mesh, runs, devices); default: ``TaskContext.from_config(config)``.
  """
  ctx = TaskContext.from_config(config) if ctx is None else ctx
  task = make_task(config, ctx) if task is None else task
  runs = ctx.runs
  optimizer = optimizer_from_config(config.optimizer, config.num_steps,
                                    swept=tuple(runs.hparams) if runs else ())
  init_fn = make_init_fn(task.init_params, optimizer, task.init_extra, task.init_data)
  if runs is not None:
    return task, runs, optimizer, make_runs_init(init_fn, runs), ()
  return task, runs, optimizer, init_fn, (jax.random.key(config.seed),)


@dataclasses.dataclass(frozen=True)
class TrainSetup:
  """What the trainer builds before any state exists or anything compiles.

  ``train_step(k)`` is the jitted step program the trainer runs for calls of ``k`` steps, so code
  that needs that program without training (``jax.export`` for another platform,
  tests/train/test_step_export.py) gets the trainer's own, with its real shardings.

  Attributes:
    config: the experiment config.
    mesh: the device mesh (``config.mesh``).
    task, runs, optimizer, init, init_args: as returned by :func:`build_state_init`.
    abstract_state: ``jax.eval_shape`` of the initial ``TrainState``.
    state_sharding: its ``NamedSharding`` tree (``config.sharding_rules``, FSDP, run axis).
    report: the sharding report of ``abstract_state``.
  """
  config: ml_collections.ConfigDict
  mesh: jax.sharding.Mesh
  task: Task
  runs: Runs | None
  optimizer: Any
  init: Callable[..., TrainState]
  init_args: tuple
  abstract_state: Any
  state_sharding: Any
  report: sharding_lib.ShardingReport

  def batch_sharding(self, k: int) -> jax.sharding.NamedSharding:
    """The sharding of a call's batch: ``[k?, runs?, B, ...]`` with ``B`` (or the runs) over "data"."""
    lead = [None] * (k > 1)
    spec = lead + (["data", None] if self.runs is not None else ["data"])
    return jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec(*spec))

  def train_step(self, k: int) -> TrainStep:
    """The jitted, sharded step program for calls of ``k`` steps (``make_train_step``)."""
    config, task, runs = self.config, self.task, self.runs
    spec = None
    if task.host_batch is not None:
      spec = input_pipeline.batch_spec(task.host_batch, config.batch_size,
                                       leading=(k,) * (k > 1) + ((runs.size,) if runs else ()),
                                       seed=config.seed)
    return make_train_step(
        task.loss_fn, self.optimizer, state_sharding=self.state_sharding,
        batch_sharding=self.batch_sharding(k), batch_spec=spec,
        skip_nonfinite=config.skip_nonfinite, update_extra=task.update_extra, update_data=task.update_data,
        collect=task.collect, grad_accum_steps=config.grad_accum_steps, remat=config.remat,
        compute_dtype=None if config.compute_dtype == "float32" else config.compute_dtype,
        steps_per_call=k, vmap_runs=runs is not None)


def make_train_setup(config: ml_collections.ConfigDict,
                     devices: Sequence[jax.Device] | None = None) -> TrainSetup:
  """The trainer's set-up of ``config``: mesh, task, optimizer, runs and state shardings.

  Checks the config, the mesh and the batch/run divisibility (``InputError`` naming the key);
  initialises and compiles nothing.

  Args:
    config: an experiment config.
    devices: devices for the mesh (default: all).
  """
  validate_trainer_config(config)
  return _setup(config, devices)


def _setup(config: ml_collections.ConfigDict, devices: Sequence[jax.Device] | None) -> TrainSetup:
  """:func:`make_train_setup` of a config already validated (the trainer validates once, at its edge)."""
  mesh = make_mesh(config.mesh, devices)
  if "data" not in mesh.shape:
    raise InputError(f"the mesh needs a 'data' axis (size 1 for no data parallelism); got axes {tuple(mesh.shape)}")
  ctx = TaskContext.from_config(config, mesh=mesh)  # resolved once: the task reads it, not the config
  task, runs, optimizer, init, init_args = build_state_init(config, ctx=ctx)
  if runs is not None:
    if runs.size % mesh.shape["data"]:
      raise InputError(f"{runs.size} runs cannot be sharded over the 'data' mesh axis of size "
                       f"{mesh.shape['data']}; use a multiple of it (or mesh=(('data', 1), ...))")
  else:
    sharding_lib.check_batch_divisible(config.batch_size, mesh)
  # Sharding: rules apply to the whole state, so optimizer moments follow their parameters.
  abstract_state = jax.eval_shape(init, *init_args)
  sharding_lib.check_rules_match(abstract_state, config.sharding_rules)
  state_sharding = sharding_lib.tree_shardings(
      abstract_state, mesh, config.sharding_rules, fsdp_axis=config.fsdp_axis or None,
      fsdp_min_size=config.fsdp_min_size, run_axis="data" if runs is not None else None)
  report = sharding_lib.sharding_report(abstract_state, state_sharding, config.sharding_rules)
  return TrainSetup(config, mesh, task, runs, optimizer, init, init_args, abstract_state, state_sharding,
                    report)


def make_evaluate(task: Task, vmap_runs: bool, state_sharding: Any = None
                  ) -> Callable[[TrainState], dict[str, jax.Array]] | None:
  """The trainer's evaluation, jitted: ``state -> {name: value}`` (None if the task has none).

  Each run's key is derived from its ``rng`` and ``step``, so evaluating a restored state again
  draws the numbers the trainer drew at that step. Shared by the trainer and ``jaxlab.load_run``.

  Args:
    task: the run's task.
    vmap_runs: the state has a leading run axis (vmapped over).
    state_sharding: the state's shardings (None: wherever the state lies).
  """
  if task.evaluate is None:
    return None

  def eval_one(s: TrainState) -> dict[str, jax.Array]:
    key = jax.random.fold_in(jax.random.fold_in(jax.random.wrap_key_data(s.rng), _EVAL_STREAM), s.step)
    return task.evaluate(s, key)
  fn = jax.vmap(eval_one) if vmap_runs else eval_one
  return jax.jit(fn) if state_sharding is None else jax.jit(fn, in_shardings=(state_sharding,))


def train(config: ml_collections.ConfigDict, workdir: str, *,
          devices: Sequence[jax.Device] | None = None, stop_after: int | None = None,
          progress: bool = True) -> TrainResult:
  """Trains ``config`` in ``workdir``, resuming from its latest checkpoint if there is one.

  Args:
    config: an experiment config (see ``configs/`` and ``jaxlab.train.config``).
    workdir: checkpoints, ``metrics.jsonl`` and TensorBoard files go here.
    devices: devices for the mesh (default: all); tests pass a subset.
    stop_after: stop after this global step without a final checkpoint, as if the job were
      killed there (for testing resumption); an int >= 1 past the workdir's checkpoint (a
      finished run reruns as before).
    progress: show a tqdm bar.

  Returns:
    A :class:`TrainResult`: the final state, the run's summary, and the signal that stopped it
    early, if one did.
  """
  check_stop_after(stop_after)
  validate_trainer_config(config)  # the edge: from here on the config is trusted
  return _train(config, workdir, devices=devices, stop_after=stop_after, progress=progress)


def _train(config: ml_collections.ConfigDict, workdir: str, *, devices: Sequence[jax.Device] | None,
           stop_after: int | None, progress: bool) -> TrainResult:
  """:func:`train` of a validated config: set-up, state, loop, summary."""
  TASKS.get(config.task)  # its module imported first: a missing optional extra leaves no workdir
  ensure_writable(workdir)
  setup = _setup(config, devices)
  ckpt_dir = os.path.join(workdir, "checkpoints")
  init_from = _fine_tuning_source(setup, resuming=Workdir(workdir).latest_step() is not None)
  ckpt = Checkpointer(ckpt_dir, config.checkpoint_every,
                      keep=config.checkpoint_keep, keep_period=config.checkpoint_keep_period or None,
                      config=config.to_dict(), resume_safe=RESUME_SAFE_KEYS + tuple(setup.task.resume_safe))
  try:
    _check_stop_after_resume(stop_after, ckpt.latest_step(), config.num_steps)
    write_workdir_files(workdir, setup.task.workdir_files, resuming=ckpt.latest_step() is not None)
    state, fine_tuned = _initial_state(setup, ckpt, init_from)
    end = config.num_steps if stop_after is None else min(config.num_steps, stop_after)
    loop = _run_loop(setup, ckpt, state, workdir, end, progress)
  finally:
    ckpt.close()
  return TrainResult(state=loop.state, summary=_summary(setup, loop, fine_tuned),
                     stopped_by=loop.stopped_by if loop.stopped_at is not None else None)


def check_stop_after(stop_after: Any) -> None:
  """Refuses a ``stop_after`` (``--stop_after``) that can only train nothing.

  Args:
    stop_after: None (train to ``num_steps``) or the global step to stop after.

  Raises:
    InputError: not an int >= 1; one line naming ``--stop_after`` and what is allowed.
  """
  if stop_after is not None and not (is_int(stop_after) and stop_after >= 1):
    raise InputError(f"--stop_after={stop_after!r} (stop_after) would train nothing; allowed: a step >= 1 "
                     "to stop after, or no --stop_after to train to num_steps")


def _check_stop_after_resume(stop_after: int | None, latest: int | None, num_steps: int) -> None:
  """A resumed run told to stop at or before its checkpoint trains nothing: refused (a finished
  run, ``latest == num_steps``, reruns as without the flag)."""
  if stop_after is not None and latest is not None and stop_after <= latest < num_steps:
    raise InputError(f"--stop_after={stop_after} (stop_after) is at or before the workdir's checkpoint at step "
                     f"{latest}: nothing to train; allowed: a step in [{latest + 1}, {num_steps}], or no --stop_after")


# ---------------------------------------------------------------------------------------- state

def _fine_tuning_source(setup: TrainSetup, resuming: bool) -> Any:
  """``config.init_from`` when this run may start from another run's params, else None; checked
  here, once, before anything is compiled or written (a resume restores itself: not checked)."""
  if not _fine_tunes(setup.config):
    return None
  init_from = setup.config.init_from
  if setup.runs is not None:
    raise InputError("init_from (fine-tuning) works with single runs; set runs.seeds=1 and no runs.sweep")
  if not resuming:
    check_pretrained(setup.abstract_state.params, init_from.workdir, tuple(init_from.get("reinit", ()) or ()),
                     _seed_index(init_from))
  return init_from


def _initial_state(setup: TrainSetup, ckpt: Checkpointer, init_from: Any
                   ) -> tuple[TrainState, FineTuneStart | None]:
  """The latest readable checkpoint of this config (``RESUME_SAFE_KEYS`` may change), or a fresh
  state initialised already sharded, its params from ``init_from`` when fine-tuning."""
  config, fine_tuned = setup.config, None
  if ckpt.latest_step() is not None:
    state, _ = ckpt.restore(abstract_like(setup.abstract_state, setup.state_sharding))
  else:
    state = jax.jit(setup.init, out_shardings=setup.state_sharding)(*setup.init_args)
    if init_from is not None:
      state, fine_tuned = _fine_tune_start(state, setup.task, setup.optimizer, init_from,
                                           freeze=tuple(config.optimizer.get("freeze", ()) or ()))
      if jax.process_index() == 0:
        print(f"jaxlab: {fine_tuned.describe()}", file=sys.stderr, flush=True)
  start = _step_of(state)
  if start > config.num_steps:
    raise InputError(f"the workdir's checkpoint is at step {start}, beyond num_steps={config.num_steps}; "
                     "raise num_steps to continue it, or use another --workdir")
  return state, fine_tuned


def _fine_tunes(config: ml_collections.ConfigDict) -> bool:
  init_from = config.get("init_from", None)
  return init_from is not None and bool(init_from.get("workdir", ""))


def _step_of(state: TrainState) -> int:
  return int(np.asarray(jax.device_get(state.step)).reshape(-1)[0])


# ----------------------------------------------------------------------------------------- loop

@dataclasses.dataclass
class _LoopResult:
  """What the loop ends with: the state, the last logged rows and why it stopped early (if so)."""
  state: TrainState
  last_train: dict[str, Any]
  last_eval: dict[str, Any]
  steps_per_sec: float
  wall_time_s: float
  stopped_at: int | None = None  # the step a signal stopped the run at (checkpoint saved)
  stopped_by: str | None = None


class _Programs:
  """The jitted step program per number of steps per call (the last call may run fewer), and
  which (k, with metrics) of them have not run yet (their first call compiles: not training time)."""

  def __init__(self, setup: TrainSetup):
    self._setup, self._programs, self.uncompiled = setup, {}, set()

  def __call__(self, k: int) -> TrainStep:
    if k not in self._programs:
      self._programs[k] = self._setup.train_step(k)
      self.uncompiled.update({(k, True), (k, False)})
    return self._programs[k]


def _batch_maker(setup: TrainSetup, programs: _Programs, end: int) -> Callable[[int], Any]:
  """``call_start -> batch`` of a call (host data, assembled from the batch sharding); None for a
  task that collects its data on the device."""
  config, task, runs, K = setup.config, setup.task, setup.runs, setup.config.steps_per_call
  seeds = list(runs.seeds) if runs is not None else [config.seed]

  def make_batch(call_start: int) -> Any:
    if task.host_batch is None:
      return None
    k = min(K, end - call_start)
    return input_pipeline.assemble(task.host_batch, range(call_start, call_start + k), seeds,
                                   config.batch_size, setup.batch_sharding(k), programs(k).batch_spec,
                                   step_axis=k > 1, run_axis=runs is not None)
  return make_batch


def _run_loop(setup: TrainSetup, ckpt: Checkpointer, state: TrainState, workdir: str, end: int,
              progress: bool) -> _LoopResult:
  """Calls of ``steps_per_call`` steps from the state's step to ``end``: log, evaluate and
  checkpoint on their schedules; a SIGTERM or a first Ctrl-C saves the step and stops."""
  raise_if_pending()  # a Ctrl-C during start-up stops here, before the loop's prefetch thread and bar exist
  config, task, K = setup.config, setup.task, setup.config.steps_per_call
  start = _step_of(state)
  call_starts = list(range(start, end, K))
  programs = _Programs(setup)
  prefetch = input_pipeline.Prefetcher(_batch_maker(setup, programs, end),
                                       depth=config.prefetch if task.host_batch else 0)
  evaluate = make_evaluate(task, setup.runs is not None, setup.state_sharding)
  writer = MetricsWriter(workdir, resume_step=start)
  bar = tqdm.tqdm(total=config.num_steps, initial=start, disable=not progress or jax.process_index() != 0,
                  desc=config.get("name", config.task), dynamic_ncols=True)
  timer, t0 = _Timer(start), time.perf_counter()
  result = _LoopResult(state, last_train=writer.last_row(require="loss") or {}, last_eval={},
                       steps_per_sec=float("nan"), wall_time_s=0.0)
  if evaluate is not None:
    eval_keys = sorted(jax.eval_shape(evaluate, state))
    result.last_eval = {k: v for k, v in (writer.last_row(require=eval_keys[0]) or {}).items() if k in eval_keys}
  skipped_at_log, log_step, warned_frozen = _skipped(state), start, False
  with jax.set_mesh(setup.mesh), PreemptionWatcher(ckpt) as watcher:
    for i, call_start in enumerate(call_starts):
      k = min(K, end - call_start)
      step_fn = programs(k)
      batch = prefetch.get(call_start, call_starts[i + 1] if i + 1 < len(call_starts) else None)
      done = call_start + k
      log = _crossed(call_start, done, config.log_every) or done == config.num_steps
      t_call = time.perf_counter()
      state, metrics = step_fn(state, batch, metrics=log)  # a call that does not log computes no metrics
      if (k, log) in programs.uncompiled:  # compilation is not training time
        jax.block_until_ready((state, metrics))
        programs.uncompiled.discard((k, log))
        timer.exclude(time.perf_counter() - t_call, k)
      row: dict[str, Any] = {}
      if log:
        metrics = jax.tree.map(_host, jax.device_get(metrics))
        result.steps_per_sec = timer.rate(done)
        row.update(metrics, steps_per_sec=result.steps_per_sec,
                   **{f"{u}_per_sec": result.steps_per_sec * n for u, n in task.throughput.items()})
        _check_not_all_skipped(metrics, skipped_at_log, log_step, done)
        warned_frozen = warned_frozen or _warn_if_frozen(metrics, done)
        skipped_at_log, log_step = metrics["nonfinite_skipped"], done
        result.last_train = row.copy()
        bar.set_postfix(loss=f"{np.mean(metrics['loss']):.4f}", steps_per_s=f"{result.steps_per_sec:.1f}")
        timer.reset(done)
      if evaluate is not None and (_crossed(call_start, done, config.eval_every) or done == config.num_steps):
        t = time.perf_counter()
        result.last_eval = jax.tree.map(_host, jax.device_get(evaluate(state)))
        row.update(result.last_eval)
        timer.exclude(time.perf_counter() - t)
      if row:
        writer.write(done, row)
      bar.update(k)
      t = time.perf_counter()
      if _crossed(call_start, done, config.checkpoint_every) or done == config.num_steps:
        ckpt.maybe_save(done, state, final=True)
      if watcher.should_stop(done):  # SIGTERM or a first Ctrl-C: save this step, then stop
        ckpt.maybe_save(done, state, final=True)
        result.stopped_at, result.stopped_by = done, watcher.reason or "preemption"
        break
      timer.exclude(time.perf_counter() - t)
  bar.close()
  prefetch.close()
  writer.close()
  result.state, result.wall_time_s = state, time.perf_counter() - t0
  return result


# -------------------------------------------------------------------------------------- summary

def _summary(setup: TrainSetup, loop: _LoopResult, fine_tuned: FineTuneStart | None) -> dict[str, Any]:
  """The run's summary: what trained where, how fast, and the last logged values."""
  config, mesh, runs, state, last_train = setup.config, setup.mesh, setup.runs, loop.state, loop.last_train
  steps = _step_of(state)
  summary = {
      "task": setup.task.description,
      "optimizer": config.optimizer.name,
      "devices": f"{mesh.devices.size} x {jax.devices()[0].platform}",
      "mesh": dict(mesh.shape),
      "runs": runs.size if runs is not None else 1,
      "parameters": count_params(state.params, run_axis=runs is not None),
      "state_MiB_per_device": round(setup.report.per_device_bytes / 2**20, 3),
      "replicated_MiB": round(setup.report.replicated_bytes / 2**20, 3),
      "steps": steps,
      "final_loss": last_train.get("loss", float("nan")),
      "nonfinite_skipped": _host(jax.device_get(state.nonfinite_skipped)),
      "steps_per_sec": last_train.get("steps_per_sec", loop.steps_per_sec),
      **{k: v for k, v in last_train.items() if k.endswith("_per_sec") and k != "steps_per_sec"},
      "wall_time_s": loop.wall_time_s,
      **{k: v for k, v in last_train.items() if k.startswith("opt/")},
      **loop.last_eval,
  }
  if fine_tuned is not None:
    summary["init_from"] = f"{fine_tuned.workdir} (step {fine_tuned.step})"
  if loop.stopped_at is not None and loop.stopped_by == "SIGINT":
    summary["stopped"] = (f"interrupted (Ctrl-C) at step {loop.stopped_at} (checkpoint saved; rerun with the same "
                          "workdir to resume)")
  elif loop.stopped_at is not None:
    summary["stopped"] = f"preempted at step {loop.stopped_at} (checkpoint saved; rerun to resume)"
  elif steps < config.num_steps:
    summary["stopped"] = f"early at step {steps} of {config.num_steps} (--stop_after; rerun to resume)"
  return summary


def _seed_index(init_from: Any) -> int | None:
  """``init_from.seed_index`` (-1: the pre-training run is a single run) as None or a run index."""
  index = init_from.get("seed_index", -1)
  if not is_int(index) or index < -1:
    raise InputError(f"init_from.seed_index={index!r}; allowed: -1 (a single pre-training run) or the index of "
                     "one of its vmapped runs (an int >= 0)")
  return None if index == -1 else int(index)


def _fine_tune_start(state: TrainState, task: Task, optimizer: Any, init_from: Any,
                     freeze: tuple[str, ...] = ()) -> tuple[TrainState, FineTuneStart]:
  """A fresh state whose params come from ``init_from.workdir`` (``reinit`` leaves stay fresh),
  and what was loaded from where (``freeze`` patterns are counted in it); a single run's state
  (``_fine_tuning_source`` checked)."""
  start = fine_tune_start(state.params, init_from.workdir, tuple(init_from.get("reinit", ()) or ()), freeze,
                          _seed_index(init_from))
  params = start.params
  shardings = jax.tree.map(lambda x: x.sharding, state.opt_state)
  opt_state = jax.jit(optimizer.init, out_shardings=shardings)(params)
  extra = task.init_extra(params) if task.init_extra is not None else state.extra
  return state.replace(params=params, opt_state=opt_state, extra=extra), start


def _skipped(state: TrainState) -> Any:
  return _host(jax.device_get(state.nonfinite_skipped))


def _check_not_all_skipped(metrics: dict[str, Any], skipped_before: Any, step_before: int, step: int) -> None:
  """Every step since the last log non-finite (in every run): stop and say so, don't run on."""
  steps = step - step_before
  newly = np.asarray(metrics["nonfinite_skipped"]) - np.asarray(skipped_before)
  if steps >= 2 and np.all(newly >= steps):
    raise DivergedError(
        f"every step from {step_before} to {step} had a non-finite loss or gradient and was skipped "
        f"(loss={metrics.get('loss')}): a learning rate too high, non-finite data, or a non-finite setting the loss "
        f"reads (NaN in a config value or a batch); checkpoints before step "
        f"{step_before + 1} are intact.")


def _warn_if_frozen(metrics: dict[str, Any], step: int) -> bool:
  """MoMo-type step size 0 with its lower bound above the loss: the params stop moving; say so once.

  Checked on the host at each log (the step itself runs on under jit, where nothing can be raised).
  """
  for key in metrics:
    if key.startswith("opt/") and key.endswith("step_size"):
      lb = np.asarray(metrics.get(key[: -len("step_size")] + "lb", np.nan))
      if np.any((np.asarray(metrics[key]) == 0) & (lb > np.asarray(metrics["loss"]))):
        warnings.warn(f"step {step}: {key}=0 with {key[: -len('step_size')]}lb={lb} above the loss "
                      f"{metrics['loss']}: the parameters are not moving; lower optimizer.lower_bound "
                      "(or set optimizer.adapt_lower_bound=True)", RuntimeWarning, stacklevel=2)
        return True
  return False


def run_experiments(config: ml_collections.ConfigDict, workdir: str, **kwargs: Any) -> dict[str, dict]:
  """Runs ``config``, or each of ``config.experiments`` (in order) in ``workdir/<name>``.

  A config with an ``experiments`` block is a suite (the quickstart exercises every method this
  way); each entry is a complete experiment config. Returns ``{name: summary}``.
  """
  options = {"devices": None, "stop_after": None, "progress": True, **kwargs}
  check_stop_after(options["stop_after"])
  if "experiments" not in config:
    return {config.get("name", config.task): train(config, workdir, **options).summary}
  for name, sub in config.experiments.items():  # every experiment's bad input, before any compute
    try:
      validate_trainer_config(sub)
      TASKS.get(sub.task)  # an optional extra missing for a later experiment: refused before the first
    except InputError as e:
      raise InputError(f"experiments.{name}: {e}") from None
  summaries = {}
  for name, sub in config.experiments.items():
    result = _train(sub, os.path.join(workdir, name), **options)
    summaries[name] = result.summary
    if result.stopped_by is not None:  # SIGTERM / Ctrl-C: the suite stops too; a rerun resumes it
      break
  return summaries
