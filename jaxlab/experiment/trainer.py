"""Training from a config: check it once, turn it into objects once, hand them to the loop.

``train(config, workdir)`` and ``run_experiments(config, workdir)`` are what ``python -m jaxlab.main``
runs. Each experiment is checked at this edge, once (:func:`check_experiments`: the trainer keys,
``--stop_after``, the task's module), then turned into the loop's objects (:func:`make_train_setup`:
the context, the task, the optimizer, the run options) and trained by
:func:`jaxlab.train.loop.run_training`, which reads no config.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Sequence

import jax
import ml_collections

from jaxlab.errors import InputError
from jaxlab.experiment import validate
from jaxlab.experiment.agreement import agree_across_processes
from jaxlab.experiment.context import task_context
from jaxlab.experiment.optimizer import LOG_CHECKS, optimizer_of
from jaxlab.experiment.options import run_options
from jaxlab.tasks import TASKS, make_task
from jaxlab.train.context import TaskContext
from jaxlab.train.loop import TrainResult, TrainSetup, ensure_writable, run_training, setup_training, state_init
from jaxlab.train.runs import Runs
from jaxlab.train.state import TrainState
from jaxlab.train.task import Task


def build_state_init(config: ml_collections.ConfigDict, ctx: TaskContext, task: Task | None = None
                     ) -> tuple[Task, Runs | None, Any, Callable[..., TrainState], tuple]:
  """``(task, runs, optimizer, init, init_args)`` of ``config`` in ``ctx``; nothing is initialised or compiled.

  ``init(*init_args)`` is the run's initial ``TrainState`` (with a leading run axis when ``runs``
  is not None): ``jax.eval_shape`` it for the abstract state a checkpoint restores onto. Shared by
  the trainer and ``jaxlab.load_run``.

  Args:
    config: an experiment config.
    ctx: the context the task is built in (:func:`~jaxlab.experiment.task_context`).
    task: the task of ``config`` if already built (default: ``make_task(config, ctx)``).
  """
  task = make_task(config, ctx) if task is None else task
  optimizer = optimizer_of(config, ctx.runs)
  init, init_args = state_init(task, optimizer, ctx.runs, config.seed)
  return task, ctx.runs, optimizer, init, init_args


def make_train_setup(config: ml_collections.ConfigDict,
                     devices: Sequence[jax.Device] | None = None) -> TrainSetup:
  """The trainer's set-up of ``config``: mesh, task, optimizer, runs and state shardings.

  Checks the config (once), the mesh and the batch/run divisibility (``InputError`` naming the
  key); initialises and compiles nothing.

  Args:
    config: an experiment config.
    devices: devices for the mesh (default: all).
  """
  validate.validate_trainer_config(config)
  return _setup(config, devices)


def _setup(config: ml_collections.ConfigDict, devices: Sequence[jax.Device] | None) -> TrainSetup:
  """:func:`make_train_setup` of a checked config: every object built once, from here on trusted."""
  ctx = task_context(config, devices)  # the task and the loop read it, not the config
  task, _, optimizer, _, _ = build_state_init(config, ctx)
  return setup_training(task, optimizer, run_options(config, task), ctx)


@dataclasses.dataclass(frozen=True)
class Experiments:
  """The experiments of a config, checked (:func:`check_experiments`), in the order they run.

  Attributes:
    configs: ``(name, config, sub-directory)`` of each; the sub-directory is "" for a single
      experiment, its name for one of a suite's ``experiments``.
    stop_after: the global step each stops after (None: ``num_steps``).
  """
  configs: tuple[tuple[str, ml_collections.ConfigDict, str], ...]
  stop_after: int | None = None


def check_experiments(config: ml_collections.ConfigDict, stop_after: int | None = None) -> Experiments:
  """The edge of a run: ``config`` (or each of its ``experiments``) and ``stop_after`` checked, once.

  Every experiment's trainer keys and task module are checked before any compute or any workdir,
  so that a suite whose later experiment needs a missing extra is refused before the first trains.
  In a multi-process job the processes then check that they all start this run
  (``jaxlab.experiment.agreement.agree_across_processes``).

  Args:
    config: an experiment config, or a suite (an ``experiments`` block).
    stop_after: ``--stop_after``, or None.

  Raises:
    InputError: the first bad value, one line (``experiments.<name>: ...`` in a suite).
  """
  validate.check_stop_after(stop_after)
  if "experiments" not in config:
    _check_experiment(config)
    agree_across_processes(config, stop_after)
    return Experiments(((config.get("name", config.task), config, ""),), stop_after)
  configs = []
  for name, sub in config.experiments.items():
    try:
      _check_experiment(sub)
    except InputError as e:
      raise InputError(f"experiments.{name}: {e}") from None
    configs.append((name, sub, name))
  agree_across_processes(config, stop_after)
  return Experiments(tuple(configs), stop_after)


def _check_experiment(config: ml_collections.ConfigDict) -> None:
  validate.validate_trainer_config(config)
  TASKS.get(config.task)  # its module imported first: a missing optional extra leaves no workdir


def run_checked(experiments: Experiments, workdir: str, *, devices: Sequence[jax.Device] | None = None,
                progress: bool = True) -> dict[str, TrainResult]:
  """Trains checked experiments in order, each in ``workdir`` (or ``workdir/<name>`` in a suite).

  A run stopped by a signal (SIGTERM, Ctrl-C) stops the suite too; a rerun resumes it.

  Returns:
    ``{name: TrainResult}`` of the experiments that ran.
  """
  results = {}
  for name, config, sub in experiments.configs:
    results[name] = _train(config, os.path.join(workdir, sub) if sub else workdir, devices=devices,
                           stop_after=experiments.stop_after, progress=progress)
    if results[name].stopped_by is not None:
      break
  return results


def _train(config: ml_collections.ConfigDict, workdir: str, *, devices: Sequence[jax.Device] | None,
           stop_after: int | None, progress: bool) -> TrainResult:
  """:func:`train` of a checked config: its objects, then the loop."""
  ensure_writable(workdir)  # before the task is built: an unwritable workdir costs no data loading
  return run_training(_setup(config, devices), workdir, stop_after=stop_after, progress=progress,
                      log_checks=LOG_CHECKS)


def train(config: ml_collections.ConfigDict, workdir: str, *,
          devices: Sequence[jax.Device] | None = None, stop_after: int | None = None,
          progress: bool = True) -> TrainResult:
  """Trains ``config`` in ``workdir``, resuming from its latest checkpoint if there is one.

  Args:
    config: an experiment config (see ``configs/`` and :func:`~jaxlab.experiment.trainer_config`).
    workdir: checkpoints, ``metrics.jsonl`` and TensorBoard files go here.
    devices: devices for the mesh (default: all); tests pass a subset.
    stop_after: stop after this global step without a final checkpoint, as if the job were
      killed there (for testing resumption); an int >= 1 past the workdir's checkpoint (a
      finished run reruns as before).
    progress: show a tqdm bar.

  Returns:
    A :class:`~jaxlab.train.loop.TrainResult`: the final state, the run's summary, and the signal
    that stopped it early, if one did.
  """
  validate.check_stop_after(stop_after)
  _check_experiment(config)  # the edge: from here on the config is trusted
  agree_across_processes(config, stop_after)
  return _train(config, workdir, devices=devices, stop_after=stop_after, progress=progress)


def run_experiments(config: ml_collections.ConfigDict, workdir: str, **kwargs: Any) -> dict[str, dict]:
  """Runs ``config``, or each of ``config.experiments`` (in order) in ``workdir/<name>``.

  A config with an ``experiments`` block is a suite (the quickstart exercises every method this
  way); each entry is a complete experiment config. Every experiment is checked before the first
  trains (:func:`check_experiments`).

  Args:
    config: an experiment config or a suite.
    workdir: the run's directory (a suite's experiments in sub-directories).
    **kwargs: ``devices``, ``stop_after``, ``progress`` as :func:`train` takes them.

  Returns:
    ``{name: summary}``.
  """
  options = {"devices": None, "stop_after": None, "progress": True, **kwargs}
  experiments = check_experiments(config, options.pop("stop_after"))
  return {name: result.summary for name, result in run_checked(experiments, workdir, **options).items()}
