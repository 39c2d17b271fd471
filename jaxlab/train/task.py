"""The task protocol: what a method gives the trainer (init, loss, data, evaluation, inference).

A task is built once, from a config and the trainer's :class:`~jaxlab.train.context.TaskContext`
(mesh, runs, devices), by name (``config.task``) through ``TASKS`` (``jaxlab.tasks.make_task``, in
the config layer). A factory takes ``(config, ctx)`` and registers with the decorator::

  from jaxlab.train import TASKS, Task

  @TASKS.register("my_task")
  def my_task(config, ctx) -> Task:
    ...

The registry here holds no names of its own: the shipped tasks register lazily, as
``"module:function"`` strings, in ``jaxlab.tasks`` (importing the trainer imports no method package
and needs none of the ``rl`` / ``pde`` extras).

Data reaches the loss in one of two ways:

* ``host_batch(step, rows, seed)``: numpy rows of global batch ``step`` built on the host. A pure
  function of its arguments, so that a resumed run sees the same data; ``rows`` are the indices
  (into the global batch) this process needs, taken from the batch sharding, so that each process
  of a multi-host run materialises only the rows its devices hold.
* ``collect(state, rng) -> (state, batch, metrics)``: runs on the device, inside the same jitted
  program, before the loss (e.g. environment steps, replay-buffer writes and a replay sample).
  It reads and writes ``state.data_state`` (created by ``init_data``), which is checkpointed
  with the rest of the train state.

What the loss learned can flow back into the data: ``update_data(new_state, batch, per_sample)
-> data_state`` runs after each update with the batch ``collect`` made and the per-sample values
the loss returned under ``metrics[jaxlab.contract.PER_SAMPLE]`` (``{name: [B]}`` in the batch's
rows); a prioritised replay sets its sampled transitions' priorities from their TD losses there
(the ``dqn_minatar`` task's ``dqn.replay_scheme='prioritized'``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import jax
import numpy as np

from jaxlab.contract import CollectFn, LossFn, UpdateDataFn
from jaxlab.registry import Registry
from jaxlab.train.state import TrainState


@dataclasses.dataclass(frozen=True)
class Inference:
  """A task's model and what a user does with trained params (``jaxlab.load_run`` binds them).

  Attributes:
    model: the flax module the task trains (``model.apply({"params": params}, ...)``).
    fns: ``{name: fn(params, *args, **kwargs)}``, pure and jit-able in the arrays they take
      (e.g. ``predict``, ``rollout``, ``greedy_policy``, ``embed_images``, ``zero_shot``).
    data: fixed things the functions or a user need that are not params (the test split, the
      environment, the vocabulary), by name.
  """
  model: Any
  fns: Mapping[str, Callable[..., Any]]
  data: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Task:
  """A method's plug into the one train step.

  Attributes:
    init_params: ``rng -> params``.
    loss_fn: ``(params, batch, rng, extra) -> (loss, metrics)`` on the global batch.
    host_batch: ``(step, rows, seed) -> numpy pytree`` with ``len(rows)`` rows: rows ``rows`` of
      global batch ``step`` of the run seeded ``seed``. Exactly one of ``host_batch`` and
      ``collect`` is given.
    collect: ``(state, rng) -> (state, batch, metrics)``, on the device, before the loss.
    init_data: ``(params, rng) -> data_state`` for ``collect`` (environment states, buffer).
    evaluate: ``(state, rng) -> {name: scalar}``, a pure jit-able function of one run's state;
      the trainer jits it (vmapped over runs) on its own schedule, ``eval_every``.
    init_extra: extra train state the loss reads (e.g. DQN target params).
    update_extra: its update after each step (``new_state -> extra``).
    update_data: ``(new_state, batch, per_sample) -> data_state`` after each step (and
      ``update_extra``), from the loss's per-sample values (``metrics[PER_SAMPLE]``, see the module
      docstring; the loss must return them); only with ``collect``. Runs on non-finite (skipped)
      steps too, so it must tolerate NaN rows.
    throughput: ``{unit: count per step}``, e.g. ``{"frames": 32}``; the trainer logs
      ``<unit>_per_sec`` beside ``steps_per_sec``.
    description: one line for the summary table.
    resume_safe: config keys (fnmatch patterns) of evaluation-only settings that a resumed run
      may change, beside the trainer's ``jaxlab.train.checkpoint.RESUME_SAFE_KEYS``; any other
      changed key refuses the resume.
    workdir_files: ``{file name: text}`` the trainer writes into the workdir before training,
      for what the task derived from its data and a user needs beside the checkpoints (e.g.
      the tokenizer it trained on the captions); see ``jaxlab.train.workdir_files``.
    inference: the model and pure functions of trained params that ``jaxlab.load_run`` binds to
      a checkpoint (the same model, test data and evaluation code the trainer used), or None.
  """
  init_params: Callable[[jax.Array], Any]
  loss_fn: LossFn
  host_batch: Callable[[int, np.ndarray, int], Any] | None = None
  collect: CollectFn | None = None
  init_data: Callable[[Any, jax.Array], Any] | None = None
  evaluate: Callable[[TrainState, jax.Array], dict[str, jax.Array]] | None = None
  init_extra: Callable[[Any], Any] | None = None
  update_extra: Callable[[TrainState], Any] | None = None
  update_data: UpdateDataFn | None = None
  throughput: dict[str, float] = dataclasses.field(default_factory=dict)
  description: str = ""
  resume_safe: tuple[str, ...] = ()
  workdir_files: dict[str, str] = dataclasses.field(default_factory=dict)
  inference: Inference | None = None

  def __post_init__(self):
    if (self.host_batch is None) == (self.collect is None):
      raise TypeError("a Task needs exactly one of host_batch (host data) and collect (device data)")
    if self.init_data is not None and self.collect is None:
      raise TypeError("Task.init_data is only used with collect")
    if self.update_data is not None and self.collect is None:
      raise TypeError("Task.update_data updates collect's data state: it needs collect")


#: Tasks by name (``config.task``): the registry object, empty here; ``jaxlab.tasks`` registers the shipped
#: ones lazily, and config files or user code register their own with ``@TASKS.register(name)``.
TASKS: Registry = Registry("task")
