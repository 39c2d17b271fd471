"""A trained run back in hand: ``load_run(workdir)`` gives its config, params, task and model.

A workdir written by ``python -m jaxlab.main`` (or ``jaxlab.train.trainer.train``) holds
``checkpoints/<step>/`` (the train state and the config it was trained with) and
``metrics.jsonl``. ``load_run`` rebuilds the task and model from the saved config (the trainer's
own builder, ``build_state_init``, on one device), restores the params (the optimizer state only
when asked) and binds the task's inference functions (``Task.inference``) to them::

  run = jaxlab.load_run("runs/dpot")            # newest checkpoint
  run.predict(x)                                # DPOT / FNO: next frames; also run.rollout(x0, steps)
  run.evaluate()                                # the trainer's evaluation: equals the logged values
  run.logged_metrics()                          # what metrics.jsonl holds for this step

A workdir of several vmapped runs (``runs.seeds`` / ``runs.sweep``) loads one of them
(``seed_index=i``: params without a run axis) or all (the default: params with a leading run
axis, and every function vmapped over it). Nothing in the workdir is written: checkpoints are
opened read-only.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Callable

import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp

from jaxlab.errors import CheckpointError, InputError, is_int
from jaxlab.train.checkpoint import quiet_closed_loop_reports
from jaxlab.train.context import TaskContext
from jaxlab.train.mesh import make_mesh
from jaxlab.train.state import TrainState
from jaxlab.train.task import Inference, Task
from jaxlab.train.trainer import build_state_init, make_evaluate

_STATE_KEYS = ("step", "rng", "nonfinite_skipped", "params")  # what a load reads (+ opt_state when asked)


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
  """One checkpoint of a trained run, rebuilt: config, params, task, model and what to do with them.

  The task's inference functions are methods of the run with the params bound, e.g.
  ``run.predict(x)`` for ``run.inference.fns["predict"](run.params, x)``; ``run.fns`` lists
  them. With a run axis (``run_axis``: all runs of a multi-run workdir) each is vmapped over the
  params, so every output gains a leading ``[runs]`` axis.

  Attributes:
    workdir: the run's directory.
    step: the checkpoint's step.
    config: the config the run was trained with (``ml_collections.ConfigDict``).
    task: the ``jaxlab.train.Task`` built from it.
    model: the flax module (None for a task without inference functions).
    params: the restored params (with a leading run axis when ``run_axis``).
    seeds: the seed of each loaded run.
    labels: each loaded run's seed and swept hyper-parameters, e.g. ``"seed=1,learning_rate=0.01"``.
    run_axis: params and outputs have a leading ``[runs]`` axis.
    opt_state: the optimizer state, if ``load_run(..., opt_state=True)``; else None.
    inference: the task's ``Inference`` (model, pure functions of params, fixed data), or None.
  """
  workdir: str
  step: int
  config: ml_collections.ConfigDict
  task: Task
  model: Any
  params: Any
  seeds: tuple[int, ...]
  labels: tuple[str, ...]
  run_axis: bool
  opt_state: Any = None
  inference: Inference | None = None
  _keys: Any = dataclasses.field(default=None, repr=False)  # step, rng, nonfinite_skipped: evaluate's key
  _index: int | None = dataclasses.field(default=None, repr=False)  # the run picked out of several

  def __repr__(self) -> str:
    count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(self.params))
    return (f"Run(workdir={self.workdir!r}, step={self.step}, task={self.config.task!r}, "
            f"model={type(self.model).__name__ if self.model is not None else None}, runs={list(self.labels)}, "
            f"run_axis={self.run_axis}, parameters={count}, fns={sorted(self.fns)})")

  @property
  def fns(self) -> dict[str, Callable[..., Any]]:
    """The task's inference functions with this run's params bound (vmapped over a run axis)."""
    return {name: self._bind(fn) for name, fn in (self.inference.fns.items() if self.inference else ())}

  @property
  def data(self) -> dict[str, Any]:
    """Fixed things of the task that are not params (test data, the environment, the vocabulary)."""
    return dict(self.inference.data) if self.inference else {}

  def _bind(self, fn: Callable[..., Any]) -> Callable[..., Any]:
    def bound(*args: Any, **kwargs: Any) -> Any:
      if self.run_axis:  # the arguments are shared by every run; only the params are mapped
        return jax.vmap(lambda p: fn(p, *args, **kwargs))(self.params)
      return fn(self.params, *args, **kwargs)
    bound.__name__ = bound.__qualname__ = getattr(fn, "__name__", "fn")
    bound.__doc__ = getattr(fn, "__doc__", None)
    return bound

  def __getattr__(self, name: str) -> Any:
    if name.startswith("_") or name == "inference":
      raise AttributeError(name)
    fns = self.inference.fns if self.inference is not None else {}
    if name in fns:
      return self._bind(fns[name])
    raise AttributeError(f"a {self.config.task!r} run has no {name!r}; its inference functions: "
                         f"{', '.join(sorted(fns)) or 'none'} (and evaluate, logged_metrics)")

  def evaluate(self) -> dict[str, Any]:
    """The trainer's evaluation of these params, with the key it used at this step.

    The same function on the same test data, so the values equal those ``metrics.jsonl`` logged
    at this step (``logged_metrics``): bit for bit for a single run or all runs loaded together
    on the trainer's kind of device; one run picked out of several is evaluated without the run
    axis, a program that may round differently. Returns ``{name: value}`` (numpy; one value per
    run with a run axis); ``{}`` if the task has no evaluation.
    """
    evaluate = make_evaluate(self.task, self.run_axis)
    if evaluate is None:
      return {}
    state = TrainState(params=self.params, opt_state=(), **self._keys)
    return {k: np.asarray(v) for k, v in jax.device_get(evaluate(state)).items()}

  def logged_metrics(self) -> dict[str, Any]:
    """What the trainer logged in ``metrics.jsonl`` at this checkpoint's step (this run's values).

    Rows of the same step (a resumed run may log a step twice) are merged, later ones winning;
    ``{}`` if nothing was logged at this step.
    """
    path = os.path.join(self.workdir, "metrics.jsonl")
    merged: dict[str, Any] = {}
    if os.path.isfile(path):
      with open(path) as f:
        for line in f:
          try:
            row = json.loads(line)
          except json.JSONDecodeError:
            continue  # a line cut short by a killed run
          if isinstance(row, dict) and row.get("step") == self.step:
            merged.update(row)
    i = self._index
    return {k: v[i] if i is not None and isinstance(v, list) else v for k, v in merged.items()}


def _tuples(tree: Any) -> Any:
  """JSON lists back to the tuples a config file writes (``mesh``, ``data.sets``, ``hidden``)."""
  if isinstance(tree, dict):
    return {k: _tuples(v) for k, v in tree.items()}
  if isinstance(tree, list):
    return tuple(_tuples(v) for v in tree)
  return tree


def _checkpoint_dir(workdir: Any) -> str:
  """``workdir/checkpoints`` after checking that there is one with a step in it (one-line errors)."""
  if not isinstance(workdir, (str, os.PathLike)) or not str(workdir):
    raise InputError(f"load_run: workdir={workdir!r} must be a path to a trained run's directory")
  workdir = os.fspath(workdir)
  if not os.path.isdir(workdir):
    raise InputError(f"load_run: workdir={workdir!r} does not exist (or is not a directory); "
                     "allowed: a directory that python -m jaxlab.main --workdir=... trained")
  directory = os.path.join(workdir, "checkpoints")
  if os.path.isdir(directory) and any(n.isdigit() for n in os.listdir(directory)):
    return directory
  # A suite (configs/quickstart.py) keeps each experiment in its own subdirectory.
  children = sorted(n for n in os.listdir(workdir) if os.path.isdir(os.path.join(workdir, n, "checkpoints")))
  hint = (f"; it holds a suite, load one of its experiments: {', '.join(os.path.join(workdir, n) for n in children)}"
          if children else "; allowed: a workdir with checkpoints/<step>/ (train one, or wait for its first checkpoint)")
  raise InputError(f"load_run: workdir={workdir!r} holds no checkpoint (no checkpoints/<step>/ in it){hint}")


def _read_only_manager(directory: str) -> ocp.CheckpointManager:
  absl = logging.getLogger("absl")
  level = absl.level
  absl.setLevel(logging.ERROR)  # orbax warns that a read-only manager is read-only
  try:
    return ocp.CheckpointManager(
        directory, options=ocp.CheckpointManagerOptions(read_only=True, create=False),
        item_handlers={"state": ocp.PyTreeCheckpointHandler(), "config": ocp.JsonCheckpointHandler()})
  finally:
    absl.setLevel(level)


def _pick_step(manager: ocp.CheckpointManager, step: Any, directory: str) -> int:
  steps = sorted(manager.all_steps())
  allowed = f"allowed: {', '.join(map(str, steps))} (or None for the newest)"
  if not steps:
    raise InputError(f"load_run: no complete checkpoint in {directory}; train on until one is saved")
  if step is None:
    return steps[-1]
  if not is_int(step) or int(step) not in steps:
    raise InputError(f"load_run: step={step!r} has no checkpoint in {directory}; {allowed}")
  return int(step)


def _check_seed_index(seed_index: Any, runs: Any, workdir: str, seed: int) -> None:
  if seed_index is None:
    return
  size = runs.size if runs is not None else 1
  what = (f"{size} vmapped runs ({', '.join(runs.label(i) for i in range(size))})" if runs is not None
          else f"a single run (seed={seed})")
  if not is_int(seed_index) or not 0 <= seed_index < size:
    raise InputError(f"load_run: seed_index={seed_index!r} is out of range; {workdir!r} holds {what}; "
                     f"allowed: an int in [0, {size - 1}], or None for all")


def _load_context(config: ml_collections.ConfigDict, device: jax.Device) -> TaskContext:
  """The context a run is loaded in: one device (a mesh of the config's axes, each of size 1)."""
  mesh = make_mesh(tuple((name, 1) for name, _ in config.mesh), [device])
  return TaskContext.from_config(config, mesh=mesh)


def load_run(workdir: str, step: int | None = None, *, seed_index: int | None = None,
             opt_state: bool = False) -> Run:
  """The run in ``workdir`` at ``step``: config, params, task, model and inference functions.

  Args:
    workdir: a directory that ``python -m jaxlab.main --workdir=...`` trained (it holds
      ``checkpoints/<step>/``).
    step: the checkpoint to load (None: the newest).
    seed_index: in a workdir of several vmapped runs, the run to load (its params without the
      run axis); None loads all (params with a leading run axis). A single run takes 0 or None.
    opt_state: also restore the optimizer state (``run.opt_state``).

  Returns:
    A :class:`Run`, its arrays on the default device.

  Raises:
    InputError: no such workdir, no checkpoint in it, no checkpoint at ``step``, ``seed_index``
      out of range; one line naming the value and what is allowed. Nothing is written.
  """
  directory = os.path.abspath(_checkpoint_dir(workdir))  # orbax takes absolute paths only
  workdir = os.fspath(workdir)
  quiet_closed_loop_reports()
  manager = _read_only_manager(directory)
  try:
    step = _pick_step(manager, step, directory)
    try:
      saved = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore())).config
    except Exception as e:  # noqa: BLE001 - any read error: name the place
      raise CheckpointError(f"load_run: the config of {directory}/{step} is unreadable: {type(e).__name__}: {e}") from e
    config = ml_collections.ConfigDict(_tuples(saved))
    ctx = _load_context(config, jax.devices()[0])
    task, runs, _, init, init_args = build_state_init(config, ctx=ctx)  # the trainer's builder, its Task
    inference = task.inference
    _check_seed_index(seed_index, runs, workdir, int(config.seed))
    abstract = jax.eval_shape(init, *init_args)
    device = jax.sharding.SingleDeviceSharding(ctx.devices[0])
    keys = _STATE_KEYS + (("opt_state",) if opt_state else ())
    item = {k: jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), getattr(abstract, k))
            for k in keys}
    try:
      restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
          item=item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_restore=True))).state
    except Exception as e:  # noqa: BLE001 - truncated files, another run's tree: name the place
      raise CheckpointError(f"load_run: {directory}/{step} is unreadable for this config: "
                            f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}") from e
  finally:
    manager.close()
  seeds = tuple(runs.seeds) if runs is not None else (int(config.seed),)
  labels = tuple(runs.label(i) for i in range(runs.size)) if runs is not None else (f"seed={config.seed}",)
  run_axis = runs is not None and seed_index is None
  index = seed_index if runs is not None and seed_index is not None else None
  if index is not None:  # one run out of several: drop the run axis
    restored = jax.tree.map(lambda x: x[index], restored)
    seeds, labels = (seeds[index],), (labels[index],)
  state_keys = {k: restored[k] for k in ("step", "rng", "nonfinite_skipped")}
  return Run(workdir=workdir, step=step, config=config, task=task,
             model=inference.model if inference is not None else None, params=restored["params"],
             seeds=seeds, labels=labels, run_axis=run_axis, opt_state=restored.get("opt_state"),
             inference=inference, _keys=state_keys, _index=index)
