"""The loop: one readable loop around the one train step, on objects.

It takes a :class:`~jaxlab.train.task.Task`, an optax transform, the run's
:class:`~jaxlab.train.options.RunOptions` and context (mesh, runs) and a workdir; it reads no
config and names no task or optimizer (``jaxlab.experiment`` turns a config into these objects,
checked once). Sections: set-up (mesh checks, runs, sharding), state (init, restore or fine-tune),
loop (step programs, input, log, eval, checkpoint, preemption), summary. Every method trains
through here: host data (``Task.host_batch``) or data made on the device (``Task.collect``), one
run or many vmapped runs, one step per call or ``steps_per_call`` steps in a ``lax.scan``.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import sys
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np
import optax
import tqdm

from jaxlab import sharding as sharding_lib
from jaxlab.errors import DivergedError, InputError, JaxlabRuntimeWarning, warn
from jaxlab.startup_interrupt import raise_if_pending
from jaxlab.train import input_pipeline
from jaxlab.train.checkpoint import Checkpointer, abstract_like
from jaxlab.train.context import TaskContext
from jaxlab.train.finetune import FineTuneStart, check_pretrained, fine_tune_start
from jaxlab.train.metrics_writer import MetricsWriter
from jaxlab.train.options import FineTuneSource, LogCheck, RunOptions
from jaxlab.train.preemption import PreemptionWatcher
from jaxlab.train.runs import Runs, make_runs_init
from jaxlab.train.state import TrainState, make_init_fn
from jaxlab.train.step import TrainStep, make_train_step
from jaxlab.train.task import Task
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


def _calls(start: int, end: int, k: int, offset: int) -> list[tuple[int, int]]:
  """``(first step, steps)`` of each call from ``start`` to ``end``: ``k`` steps each (the last may be
  shorter), and with an ``eval_offset`` starting on the steps where ``step + offset`` is a multiple of
  ``k`` (a shorter first call), so that calls end on the evaluation points when ``k`` divides
  ``eval_every``."""
  starts = list(range(start, end, k))
  if offset:
    aligned = start + (-(start + offset)) % k
    starts = ([start] if aligned > start else []) + list(range(aligned, end, k))
  return [(s, e - s) for s, e in zip(starts, starts[1:] + [end])]


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


def state_init(task: Task, optimizer: optax.GradientTransformation, runs: Runs | None, seed: int
               ) -> tuple[Callable[..., TrainState], tuple]:
  """``(init, init_args)``: ``init(*init_args)`` is the run's initial ``TrainState`` (with a leading
  run axis when ``runs`` is not None); nothing is initialised or compiled.

  ``jax.eval_shape`` it for the abstract state a checkpoint restores onto. Shared by the loop and
  ``jaxlab.load_run`` (through ``jaxlab.experiment.build_state_init``).

  Args:
    task: the run's task.
    optimizer: the optax transform.
    runs: the vmapped runs, or None for a single run.
    seed: the single run's seed (vmapped runs carry their own).
  """
  init_fn = make_init_fn(task.init_params, optimizer, task.init_extra, task.init_data)
  if runs is not None:
    return make_runs_init(init_fn, runs), ()
  return init_fn, (jax.random.key(seed),)


@dataclasses.dataclass(frozen=True)
class TrainSetup:
  """What the trainer builds before any state exists or anything compiles.

  ``train_step(k)`` is the jitted step program the trainer runs for calls of ``k`` steps, so code
  that needs that program without training (``jax.export`` for another platform,
  tests/train/test_step_export.py) gets the trainer's own, with its real shardings.

  Attributes:
    options: the run's options.
    mesh: the device mesh.
    task: the run's task.
    runs: the vmapped runs (None: one run).
    optimizer: the optax transform.
    init: ``init(*init_args)`` is the initial ``TrainState`` (:func:`state_init`).
    init_args: its arguments.
    abstract_state: ``jax.eval_shape`` of the initial ``TrainState``.
    state_sharding: its ``NamedSharding`` tree (``options.sharding_rules``, FSDP, run axis).
    report: the sharding report of ``abstract_state``.
  """
  options: RunOptions
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
    options, task, runs = self.options, self.task, self.runs
    spec = None
    if task.host_batch is not None:
      spec = input_pipeline.batch_spec(task.host_batch, options.batch_size,
                                       leading=(k,) * (k > 1) + ((runs.size,) if runs else ()),
                                       seed=options.seed)
    step = options.step
    return make_train_step(
        task.loss_fn, self.optimizer, state_sharding=self.state_sharding,
        batch_sharding=self.batch_sharding(k), batch_spec=spec,
        skip_nonfinite=step.skip_nonfinite, update_extra=task.update_extra, update_data=task.update_data,
        collect=task.collect, grad_accum_steps=step.grad_accum_steps, remat=step.remat,
        compute_dtype=None if step.compute_dtype == "float32" else step.compute_dtype,
        steps_per_call=k, vmap_runs=runs is not None)


def setup_training(task: Task, optimizer: optax.GradientTransformation, options: RunOptions,
                   ctx: TaskContext) -> TrainSetup:
  """The loop's set-up: runs, state shardings and the sharding report; initialises and compiles nothing.

  Refuses (``InputError``, one line) runs or a batch that the "data" axis does not divide, and
  sharding rules that match no state leaf.

  Args:
    task: the run's task (built on ``ctx``).
    optimizer: the optax transform.
    options: the run's options.
    ctx: the mesh and the runs the task was built on; the mesh has a "data" axis (the batch and
      the runs are sharded over it; ``jaxlab.experiment`` checks a config's mesh for one).
  """
  mesh, runs = ctx.mesh, ctx.runs
  init, init_args = state_init(task, optimizer, runs, options.seed)
  if runs is not None:
    if runs.size % mesh.shape["data"]:
      raise InputError(f"{runs.size} runs cannot be sharded over the 'data' mesh axis of size "
                       f"{mesh.shape['data']}; use a multiple of it (or mesh=(('data', 1), ...))")
  else:
    sharding_lib.check_batch_divisible(options.batch_size, mesh)
  # Sharding: rules apply to the whole state, so optimizer moments follow their parameters.
  abstract_state = jax.eval_shape(init, *init_args)
  sharding_lib.check_rules_match(abstract_state, options.sharding_rules)
  state_sharding = sharding_lib.tree_shardings(
      abstract_state, mesh, options.sharding_rules, fsdp_axis=options.fsdp_axis or None,
      fsdp_min_size=options.fsdp_min_size, run_axis="data" if runs is not None else None)
  report = sharding_lib.sharding_report(abstract_state, state_sharding, options.sharding_rules)
  return TrainSetup(options, mesh, task, runs, optimizer, init, init_args, abstract_state, state_sharding, report)


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


def run_training(setup: TrainSetup, workdir: str, *, stop_after: int | None = None, progress: bool = True,
                 log_checks: Sequence[LogCheck] = ()) -> TrainResult:
  """Trains ``setup`` in ``workdir``, resuming from its latest checkpoint if there is one.

  Args:
    setup: the run's set-up (:func:`setup_training`).
    workdir: checkpoints, ``metrics.jsonl`` and TensorBoard files go here (made if missing).
    stop_after: stop after this global step without a final checkpoint, as if the job were
      killed there; None trains to ``num_steps``.
    progress: show a tqdm bar.
    log_checks: host-side checks of each logged row (e.g. the optimizer's); each warns once.

  Returns:
    A :class:`TrainResult`: the final state, the run's summary, and the signal that stopped it
    early, if one did. A run already at ``num_steps`` trains nothing: it says so (on stderr and
    in the summary's ``"status"``: "already complete at step N ...") and returns its summary.
  """
  options = setup.options
  ensure_writable(workdir)
  latest = Workdir(workdir).latest_step()  # None: a fresh run
  _check_fine_tuning_source(setup, resuming=latest is not None)
  ckpt = Checkpointer(os.path.join(workdir, "checkpoints"), options.checkpoint_every,
                      keep=options.checkpoint_keep, keep_period=options.checkpoint_keep_period or None,
                      config=dict(options.record), resume_safe=options.resume_safe)
  try:
    _check_stop_after_resume(stop_after, latest, options.num_steps)
    write_workdir_files(workdir, setup.task.workdir_files, resuming=latest is not None)
    state, fine_tuned = _initial_state(setup, ckpt, resumed=latest is not None)
    end = options.num_steps if stop_after is None else min(options.num_steps, stop_after)
    complete = _step_of(state) == options.num_steps
    if complete and jax.process_index() == 0:
      print(f"jaxlab: {options.name}: {_already_complete(options.num_steps)}; its summary follows",
            file=sys.stderr, flush=True)
    loop = _run_loop(setup, ckpt, state, workdir, end, progress and not complete, tuple(log_checks))
  finally:
    ckpt.close()
  summary = _summary(setup, loop, fine_tuned)
  if complete:
    summary["status"] = _already_complete(options.num_steps)
  return TrainResult(state=loop.state, summary=summary,
                     stopped_by=loop.stopped_by if loop.stopped_at is not None else None)


def _already_complete(num_steps: int) -> str:
  """What a rerun of a finished run says: it trained nothing."""
  return f"already complete at step {num_steps} (nothing trained; raise num_steps to train on)"


def _check_stop_after_resume(stop_after: int | None, latest: int | None, num_steps: int) -> None:
  """A resumed run told to stop at or before its checkpoint trains nothing: refused (a finished
  run, ``latest == num_steps``, reruns as without the flag)."""
  if stop_after is not None and latest is not None and stop_after <= latest < num_steps:
    raise InputError(f"--stop_after={stop_after} (stop_after) is at or before the workdir's checkpoint at step "
                     f"{latest}: nothing to train; allowed: a step in [{latest + 1}, {num_steps}], or no --stop_after")


# ---------------------------------------------------------------------------------------- state

def _check_fine_tuning_source(setup: TrainSetup, resuming: bool) -> None:
  """A fresh run's ``init_from`` params must fit this model: checked here, once, before anything is
  compiled or written (a resume restores itself: not checked)."""
  source = setup.options.init_from
  if source is not None and not resuming:
    check_pretrained(setup.abstract_state.params, source.workdir, source.reinit, source.seed_index)


def _initial_state(setup: TrainSetup, ckpt: Checkpointer, resumed: bool
                   ) -> tuple[TrainState, FineTuneStart | None]:
  """The latest readable checkpoint of this run (``options.resume_safe`` keys may change), or a
  fresh state initialised already sharded, its params from ``options.init_from`` when fine-tuning."""
  options, fine_tuned = setup.options, None
  if resumed:
    state, _ = ckpt.restore(abstract_like(setup.abstract_state, setup.state_sharding))
  else:
    state = jax.jit(setup.init, out_shardings=setup.state_sharding)(*setup.init_args)
    if options.init_from is not None:
      state, fine_tuned = _fine_tune_start(state, setup.task, setup.optimizer, options.init_from)
      if jax.process_index() == 0:
        print(f"jaxlab: {fine_tuned.describe()}", file=sys.stderr, flush=True)
  start = _step_of(state)
  if start > options.num_steps:
    raise InputError(f"the workdir's checkpoint is at step {start}, beyond num_steps={options.num_steps}; "
                     "raise num_steps to continue it, or use another --workdir")
  return state, fine_tuned


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


# A call that logs nothing may run the step's program without its metric outputs
# (``step(state, batch, metrics=False)``), which XLA compiles without the work that only feeds
# metrics (a Soft MoE's routing statistics, ...). That second program compiles on its first call
# (seconds) and saves a fraction of each call, so it is used for the calls of k steps only when the
# run has at least this many unlogged calls of k steps: enough to repay a compile on a long run
# (dqn_minatar logs one call in ten, thousands of calls), while short runs (tests, smoke runs)
# keep one compile per k.
MIN_UNLOGGED_CALLS = 100


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


def _batch_maker(setup: TrainSetup, programs: _Programs, calls: list[tuple[int, int]]) -> Callable[[int], Any]:
  """``call_start -> batch`` of a call (host data, assembled from the batch sharding); None for a
  task that collects its data on the device."""
  options, task, runs = setup.options, setup.task, setup.runs
  seeds = list(runs.seeds) if runs is not None else [options.seed]
  sizes = dict(calls)

  def make_batch(call_start: int) -> Any:
    if task.host_batch is None:
      return None
    k = sizes[call_start]
    return input_pipeline.assemble(task.host_batch, range(call_start, call_start + k), seeds,
                                   options.batch_size, setup.batch_sharding(k), programs(k).batch_spec,
                                   step_axis=k > 1, run_axis=runs is not None)
  return make_batch


def _run_loop(setup: TrainSetup, ckpt: Checkpointer, state: TrainState, workdir: str, end: int,
              progress: bool, log_checks: tuple[LogCheck, ...]) -> _LoopResult:
  """Calls of ``steps_per_call`` steps from the state's step to ``end``: log (and check the logged
  row with ``log_checks``), evaluate and checkpoint on their schedules; a SIGTERM or a first Ctrl-C
  saves the step and stops."""
  raise_if_pending()  # a Ctrl-C during start-up stops here, before the loop's prefetch thread and bar exist
  options, task = setup.options, setup.task
  start = _step_of(state)
  calls = _calls(start, end, options.steps_per_call, options.eval_offset)
  call_starts = [call_start for call_start, _ in calls]
  logs = [_crossed(s, s + k, options.log_every) or s + k == options.num_steps for s, k in calls]
  unlogged = collections.Counter(k for (_, k), log in zip(calls, logs) if not log)
  lean = {k for k, n in unlogged.items() if n >= MIN_UNLOGGED_CALLS}  # see MIN_UNLOGGED_CALLS
  programs = _Programs(setup)
  prefetch = input_pipeline.Prefetcher(_batch_maker(setup, programs, calls),
                                       depth=options.prefetch if task.host_batch else 0)
  evaluate = make_evaluate(task, setup.runs is not None, setup.state_sharding)
  writer = MetricsWriter(workdir, resume_step=start)
  bar = tqdm.tqdm(total=options.num_steps, initial=start, disable=not progress or jax.process_index() != 0,
                  desc=options.name, dynamic_ncols=True)
  timer, t0 = _Timer(start), time.perf_counter()
  result = _LoopResult(state, last_train=writer.last_row(require="loss") or {}, last_eval={},
                       steps_per_sec=float("nan"), wall_time_s=0.0)
  if evaluate is not None:
    eval_keys = sorted(jax.eval_shape(evaluate, state))
    result.last_eval = {k: v for k, v in (writer.last_row(require=eval_keys[0]) or {}).items() if k in eval_keys}
  skipped_at_log, log_step, unwarned = _skipped(state), start, list(log_checks)
  with jax.set_mesh(setup.mesh), PreemptionWatcher(ckpt) as watcher:
    for i, (call_start, k) in enumerate(calls):
      step_fn = programs(k)
      batch = prefetch.get(call_start, call_starts[i + 1] if i + 1 < len(call_starts) else None)
      t_call = time.perf_counter()
      with_metrics = logs[i] or k not in lean
      state, metrics = step_fn(state, batch, metrics=with_metrics)
      done = call_start + k
      if (k, with_metrics) in programs.uncompiled:  # compilation is not training time
        jax.block_until_ready((state, metrics))
        programs.uncompiled.discard((k, with_metrics))
        timer.exclude(time.perf_counter() - t_call, k)
      row: dict[str, Any] = {}
      if logs[i]:  # log
        metrics = jax.tree.map(_host, jax.device_get(metrics))
        result.steps_per_sec = timer.rate(done)
        row.update(metrics, steps_per_sec=result.steps_per_sec,
                   **{f"{u}_per_sec": result.steps_per_sec * n for u, n in task.throughput.items()})
        _check_not_all_skipped(metrics, skipped_at_log, log_step, done)
        unwarned = _warn_once(unwarned, metrics, done)
        skipped_at_log, log_step = metrics["nonfinite_skipped"], done
        result.last_train = row.copy()
        bar.set_postfix(loss=f"{np.mean(metrics['loss']):.4f}", steps_per_s=f"{result.steps_per_sec:.1f}")
        timer.reset(done)
      if evaluate is not None and (_crossed(call_start + options.eval_offset, done + options.eval_offset,
                                            options.eval_every) or done == options.num_steps):
        t = time.perf_counter()
        result.last_eval = jax.tree.map(_host, jax.device_get(evaluate(state)))
        row.update(result.last_eval)
        timer.exclude(time.perf_counter() - t)
      if row:
        writer.write(done, row)
      bar.update(k)
      t = time.perf_counter()
      if _crossed(call_start, done, options.checkpoint_every) or done == options.num_steps:
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
  options, mesh, runs, state, last_train = setup.options, setup.mesh, setup.runs, loop.state, loop.last_train
  steps = _step_of(state)
  summary = {
      "task": setup.task.description,
      "optimizer": options.optimizer_label,
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
  elif steps < options.num_steps:
    summary["stopped"] = f"early at step {steps} of {options.num_steps} (--stop_after; rerun to resume)"
  return summary


def _fine_tune_start(state: TrainState, task: Task, optimizer: Any, source: FineTuneSource
                     ) -> tuple[TrainState, FineTuneStart]:
  """A fresh state whose params come from ``source.workdir`` (``reinit`` leaves stay fresh), and
  what was loaded from where (``freeze`` patterns are counted in it); a single run's state."""
  start = fine_tune_start(state.params, source.workdir, source.reinit, source.freeze, source.seed_index)
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


def _warn_once(checks: list[LogCheck], metrics: dict[str, Any], step: int) -> list[LogCheck]:
  """Runs each check on a logged row; one that finds something warns (once) and is dropped."""
  left = []
  for check in checks:
    message = check(metrics, step)
    if message is None:
      left.append(check)
    else:
      warn(message, JaxlabRuntimeWarning)
  return left
