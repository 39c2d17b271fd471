"""A trained run back in hand: ``load_run(workdir)`` gives its config, params, task and model.

A workdir written by ``python -m jaxlab.main`` (or ``jaxlab.experiment.train``) holds
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
axis, and every function vmapped over it); only the runs asked for are read. Nothing in the
workdir is written (it is read through :class:`jaxlab.train.workdir.Workdir`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import jax
import ml_collections
import numpy as np

from jaxlab.errors import CheckpointError, InputError, is_int
from jaxlab.experiment import build_state_init, task_context
from jaxlab.sharding import path_name, tree_shardings
from jaxlab.tasks import TASKS
from jaxlab.train import checkpoint
from jaxlab.train.context import TaskContext
from jaxlab.train.loop import make_evaluate
from jaxlab.train.mesh import make_mesh
from jaxlab.train.state import TrainState
from jaxlab.train.task import Inference, Task
from jaxlab.train.workdir import Workdir

_STATE_KEYS = ("step", "rng", "nonfinite_skipped", "params")  # what a load reads (+ opt_state when asked)


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
  """One checkpoint of a trained run, rebuilt: config, params, task, model and what to do with them.

  The task's inference functions are methods of the run with the params bound, e.g.
  ``run.predict(x)`` for ``run.inference.fns["predict"](run.params, x)``; ``run.fns`` lists
  them. With a run axis (``run_axis``: all runs of a multi-run workdir) each is vmapped over the
  params, so every output gains a leading ``[runs]`` axis. Scalar results (``run.l2re()``'s
  errors, ``run.evaluate()``'s metrics) come back as Python floats (a list of one per run with a
  run axis), as ``run.logged_metrics()`` gives them; arrays stay arrays.

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
        return _plain_numbers(jax.vmap(lambda p: fn(p, *args, **kwargs))(self.params), run_axis=True)
      return _plain_numbers(fn(self.params, *args, **kwargs), run_axis=False)
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
    axis, a program that may round differently. Returns ``{name: value}`` in the form
    ``logged_metrics`` has: a Python float (int for a count) per metric, a list of them (one per
    run) with a run axis; ``{}`` if the task has no evaluation.
    """
    evaluate = make_evaluate(self.task, self.run_axis)
    if evaluate is None:
      return {}
    state = TrainState(params=self.params, opt_state=(), **self._keys)
    return _plain_numbers(evaluate(state), self.run_axis)

  def logged_metrics(self) -> dict[str, Any]:
    """What the trainer logged in ``metrics.jsonl`` at this checkpoint's step (this run's values).

    Rows of the same step (a resumed run may log a step twice) are merged, later ones winning;
    a non-finite value (``null`` in the file) is NaN; ``{}`` if nothing was logged at this step.
    """
    merged = Workdir(self.workdir).logged_at(self.step)
    i = self._index
    return {k: v[i] if i is not None and isinstance(v, list) else v for k, v in merged.items()}


def _plain_numbers(tree: Any, run_axis: bool) -> Any:
  """A result with its scalars as Python numbers: a 0-d array (one per run: 1-d with a run axis)
  becomes a ``float`` (``int``, ``bool``; a list of them), as ``metrics.jsonl`` holds them, so that
  ``run.l2re()`` prints ``{'ns': 0.0123}``, not ``Array(0.0123, dtype=float32)``. Larger arrays
  (predictions, Q-values) stay arrays; traced values (the function called under ``jax.jit``) pass."""
  def plain(x: Any) -> Any:
    if not isinstance(x, (jax.Array, np.ndarray, np.generic)) or isinstance(x, jax.core.Tracer):
      return x
    if np.ndim(x) != (1 if run_axis else 0):
      return x
    return np.asarray(jax.device_get(x)).tolist()
  return jax.tree.map(plain, tree)


def _tuples(tree: Any) -> Any:
  """JSON lists back to the tuples a config file writes (``mesh``, ``data.sets``, ``hidden``)."""
  if isinstance(tree, dict):
    return {k: _tuples(v) for k, v in tree.items()}
  if isinstance(tree, list):
    return tuple(_tuples(v) for v in tree)
  return tree


def _workdir(workdir: Any) -> Workdir:
  """The workdir (absolute paths: messages name them) after checking that it has a checkpoint."""
  if not isinstance(workdir, (str, os.PathLike)) or not str(workdir):
    raise InputError(f"load_run: workdir={workdir!r} must be a path to a trained run's directory")
  workdir = os.fspath(workdir)
  if not os.path.isdir(workdir):
    raise InputError(f"load_run: workdir={workdir!r} does not exist (or is not a directory); "
                     "allowed: a directory that python -m jaxlab.main --workdir=... trained")
  found = Workdir(os.path.abspath(workdir))
  if found.steps():
    return found
  children = [w.path for w in Workdir(workdir).experiments() if w.has_checkpoints]
  hint = (f"; it holds a suite, load one of its experiments: {', '.join(children)}" if children
          else "; allowed: a workdir with checkpoints/<step>/ (train one, or wait for its first checkpoint)")
  raise InputError(f"load_run: workdir={workdir!r} holds no checkpoint (no checkpoints/<step>/ in it){hint}")


def _pick_step(steps: list[int], step: Any, directory: str) -> int:
  allowed = f"allowed: {', '.join(map(str, steps))} (or None for the newest)"
  if not steps:
    raise InputError(f"load_run: no complete checkpoint in {directory}; train on until one is saved")
  if step is None:
    return steps[-1]
  if isinstance(step, str) and step.strip().lstrip("+-").isdigit():
    raise InputError(f"load_run: step={step!r} is a str; allowed: an int step ({', '.join(map(str, steps))}), "
                     f"e.g. step={int(step)}, or None for the newest")
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


def _check_mesh(mesh: Any) -> None:
  if mesh is not None and not isinstance(mesh, jax.sharding.Mesh):
    raise InputError(f"load_run: mesh={mesh!r} is a {type(mesh).__name__}; allowed: a jax.sharding.Mesh "
                     "(e.g. jaxlab.train.make_mesh((('data', 2),))) or None for the default device")


def _check_mesh_fits_runs(mesh: jax.sharding.Mesh | None, runs: Any, workdir: str) -> None:
  """The run axis of all runs goes over the mesh's "data" axis: its size must divide the run count."""
  if mesh is None or runs is None:
    return
  data = dict(mesh.shape).get("data")
  fits = [d for d in range(1, runs.size + 1) if runs.size % d == 0]
  if data is None or runs.size % data:
    where = "has no 'data' axis" if data is None else f"has a 'data' axis of size {data}"
    raise InputError(f"load_run: mesh {dict(mesh.shape)} {where}, which the run axis of the {runs.size} vmapped "
                     f"runs in {workdir!r} is sharded over; allowed: a mesh whose 'data' size divides {runs.size} "
                     f"({', '.join(map(str, fits))}), or seed_index in [0, {runs.size - 1}] to load one run")


def _check_task_known(config: ml_collections.ConfigDict, workdir: str) -> None:
  """A task registered by a config file (``@TASKS.register`` beside its ``get_config``) is known only
  once that file is loaded: say so, rather than "unknown task"."""
  if config.get("task") in TASKS:
    return
  raise InputError(f"load_run: {workdir!r} was trained on task {config.get('task')!r}, which is not registered in "
                   "this process; a task a config file registers (@TASKS.register) is known once that file is "
                   "loaded: call jaxlab.config_files.load_config('<that config>.py') (or import the module defining "
                   f"the task) before load_run; registered: {', '.join(sorted(TASKS))}")


def _load_context(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh | None) -> TaskContext:
  """The context a run is loaded in (built once, by the config layer): on ``mesh``, or on the
  default device (a mesh of the config's axes, each of size 1)."""
  if mesh is None:
    mesh = make_mesh(tuple((name, 1) for name, _ in config.mesh), [jax.devices()[0]])
  return task_context(config, mesh=mesh)


def _placement(config: ml_collections.ConfigDict, abstract: Any, mesh: jax.sharding.Mesh | None,
               run_axis: bool) -> Any:
  """Shardings for ``abstract``: the default device, or the trainer's for ``mesh`` (its sharding
  rules and FSDP setting; a run axis over "data")."""
  if mesh is None:
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree.map(lambda _: device, abstract)
  return tree_shardings(abstract, mesh, config.sharding_rules, fsdp_axis=config.fsdp_axis or None,
                        fsdp_min_size=config.fsdp_min_size, run_axis="data" if run_axis else None)


def _check_saved_tree(directory: str, step: int, fields: dict[str, Any], config: ml_collections.ConfigDict) -> None:
  """Refuses a checkpoint whose saved tree is not the one ``config`` builds (another task's state
  copied in, or a config edited after training): leaves missing, extra or of another shape."""
  try:
    saved = checkpoint.state_metadata(directory, step)
  except Exception:  # noqa: BLE001 - unreadable metadata: the read names the error
    return
  saved = {k: saved[k] for k in fields if isinstance(saved, dict) and k in saved}
  problems = checkpoint.params_differences(saved, fields)
  if problems:
    raise CheckpointError(f"load_run: {directory}/{step} does not hold the state its saved config builds "
                          f"(task {config.task!r}; the checkpoint is of another run): " + "; ".join(problems)
                          + ". Load the workdir that trained this checkpoint, or restore its config")


def load_run(workdir: str, step: int | None = None, *, seed_index: int | None = None,
             opt_state: bool = False, mesh: jax.sharding.Mesh | None = None) -> Run:
  """The run in ``workdir`` at ``step``: config, params, task, model and inference functions.

  Args:
    workdir: a directory that ``python -m jaxlab.main --workdir=...`` trained (it holds
      ``checkpoints/<step>/``).
    step: the checkpoint to load (None: the newest).
    seed_index: in a workdir of several vmapped runs, the run to load (its params without the
      run axis; only that run is read); None loads all (params with a leading run axis). A single
      run takes 0 or None.
    opt_state: also restore the optimizer state (``run.opt_state``).
    mesh: place the arrays on this mesh as the trainer does for it: the config's
      ``sharding_rules`` and FSDP setting (``jaxlab.sharding.tree_shardings``), and the run
      axis of all runs over the "data" axis (so the run count must divide it). None: the default
      device.

  Returns:
    A :class:`Run`, its arrays on the default device (or on ``mesh``).

  Raises:
    InputError: no such workdir, no checkpoint in it, no checkpoint at ``step`` (an int),
      ``seed_index`` out of range, a ``mesh`` that is not a ``Mesh`` or whose "data" axis does not
      divide the run count, a task not registered in this process (a config file's task: load
      that config first); one line naming the value and what is allowed. Nothing is written.
    CheckpointError: the checkpoint is unreadable, or its saved tree is not the state its config
      builds (a leaf missing, extra or of another shape: the first are named).
  """
  _check_mesh(mesh)
  found = _workdir(workdir)
  directory = found.checkpoints
  workdir = os.fspath(workdir)
  checkpoint.quiet_closed_loop_reports()
  step = _pick_step(found.steps(), step, directory)
  try:
    saved = found.saved_config(step, required=True)
  except CheckpointError as e:
    raise CheckpointError(f"load_run: {e}") from e.__cause__
  config = ml_collections.ConfigDict(_tuples(saved))
  _check_task_known(config, workdir)
  ctx = _load_context(config, mesh)
  task, runs, _, init, init_args = build_state_init(config, ctx)  # the trainer's builder, its Task
  inference = task.inference
  _check_seed_index(seed_index, runs, workdir, int(config.seed))
  if seed_index is None:
    _check_mesh_fits_runs(mesh, runs, workdir)
  index = seed_index if runs is not None and seed_index is not None else None
  abstract = jax.eval_shape(init, *init_args)
  keys = _STATE_KEYS + (("opt_state",) if opt_state else ())
  fields = {k: getattr(abstract, k) for k in keys}
  _check_saved_tree(directory, step, fields, config)  # of all runs: the saved leaves have the run axis
  if index is not None:  # one run out of several: its shapes, without the run axis
    fields = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), fields)
  shardings = _placement(config, fields, mesh, run_axis=runs is not None and index is None)
  item = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), fields, shardings)
  try:
    restored = checkpoint.read_state(directory, step, item, run_index=index)
  except Exception as e:  # noqa: BLE001 - truncated files, another run's tree: name the place
    raise CheckpointError(f"load_run: {directory}/{step} is unreadable for this config: "
                          f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}") from e
  unread = [path_name(p) for p, x in jax.tree_util.tree_flatten_with_path(restored)[0]
            if isinstance(x, jax.ShapeDtypeStruct)]
  if unread:  # orbax's partial restore leaves a placeholder where the checkpoint lacks a leaf
    raise CheckpointError(f"load_run: {directory}/{step} does not hold {unread[0]}"
                          + (f" (and {len(unread) - 1} more leaves)" if len(unread) > 1 else "")
                          + f" of the state its saved config builds (task {config.task!r})")
  seeds = tuple(runs.seeds) if runs is not None else (int(config.seed),)
  labels = tuple(runs.label(i) for i in range(runs.size)) if runs is not None else (f"seed={config.seed}",)
  run_axis = runs is not None and seed_index is None
  if index is not None:
    seeds, labels = (seeds[index],), (labels[index],)
  state_keys = {k: restored[k] for k in ("step", "rng", "nonfinite_skipped")}
  return Run(workdir=workdir, step=step, config=config, task=task,
             model=inference.model if inference is not None else None, params=restored["params"],
             seeds=seeds, labels=labels, run_axis=run_axis, opt_state=restored.get("opt_state"),
             inference=inference, _keys=state_keys, _index=index)
