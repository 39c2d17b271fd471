"""The trainer's config keys and their defaults; experiment configs add task, model, loss, optimizer."""

from __future__ import annotations

from typing import Any

import ml_collections


def trainer_config(**overrides: Any) -> ml_collections.ConfigDict:
  """A ConfigDict with every key :func:`jaxlab.experiment.train` reads, set to its default.

  The keys:

  * ``seed``: the run's seed (params init, step rngs, data order).
  * ``batch_size``: global batch size (all processes).
  * ``num_steps``: optimizer steps in all.
  * ``steps_per_call``: steps per jitted call (a ``lax.scan``), for dispatch-bound small models.
  * ``mesh``: ``((axis, size), ...)``; one size may be -1; a ``"data"`` axis is required.
  * ``sharding_rules``: ``((regex over state paths, PartitionSpec axes), ...)``; a rule matching
    nothing is an error.
  * ``fsdp_axis`` / ``fsdp_min_size``: shard unmatched leaves of at least that many elements over
    this mesh axis ("" for none).
  * ``runs.seeds`` / ``runs.sweep``: vmapped runs (see ``jaxlab.experiment.runs_from_config``), sharded over "data".
  * ``grad_accum_steps``, ``remat``, ``compute_dtype``, ``skip_nonfinite``: step options
    (``train_step_fn``).
  * ``log_every``, ``eval_every``, ``checkpoint_every``: schedules in steps (checked at call
    boundaries). ``eval_offset`` (default 0) shifts the evaluations to the steps ``s`` with
    ``(s + eval_offset) % eval_every == 0`` (e.g. work done before the first step, such as an
    agent's warm-up, counted into the schedule); the calls are then aligned so that they end there
    (``eval_every`` must be a multiple of ``steps_per_call``).
  * ``checkpoint_keep`` / ``checkpoint_keep_period``: keep policy (newest N, plus every multiple).
  * ``prefetch``: host batches built ahead in a background thread (0 for none).
  * ``init_from.workdir`` / ``init_from.reinit``: fine-tune from another run's newest params,
    keeping a fresh initialisation where a reinit regex matches (``jaxlab.train.finetune``);
    freeze params with the optimizer's ``freeze`` patterns (``optimizer.freeze``, which
    ``add_fine_tune_keys`` adds to every config loaded by name or from the command line).

  Args:
    **overrides: keys to set instead of their defaults (``num_steps=100``).

  Returns:
    The trainer's part of an experiment config; an experiment config adds ``task``, ``model``,
    ``loss`` and ``optimizer``.
  """
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.batch_size = 128
  c.num_steps = 1000
  c.steps_per_call = 1
  c.mesh = (("data", -1), ("model", 1))
  c.sharding_rules = ()
  c.fsdp_axis = ""
  c.fsdp_min_size = 1 << 18
  c.runs = ml_collections.ConfigDict({"seeds": 1, "sweep": ()})
  c.grad_accum_steps = 1
  c.remat = "none"
  c.compute_dtype = "float32"
  c.skip_nonfinite = True
  c.log_every = 50
  c.eval_every = 200
  c.eval_offset = 0
  c.checkpoint_every = 200
  c.checkpoint_keep = 2
  c.checkpoint_keep_period = 0
  c.prefetch = 1
  c.init_from = ml_collections.ConfigDict({"workdir": "", "reinit": (), "seed_index": -1})
  c.update(overrides)
  return c


def add_fine_tune_keys(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Gives ``config`` the fine-tuning keys it lacks, at their defaults, so that every config takes
  ``--config.init_from.workdir``, ``--config.init_from.reinit`` and ``--config.optimizer.freeze``.

  ``init_from`` is a trainer key (:func:`trainer_config`); ``freeze`` lives in the ``optimizer``
  block, which each config writes itself. A suite (an ``experiments`` block) gets them in each
  experiment. ``jaxlab.config_files.load_config`` calls this.

  Args:
    config: an experiment config or a suite; changed in place (unlocked for the change).

  Returns:
    ``config``.
  """
  with config.unlocked():
    if isinstance(config.get("experiments"), ml_collections.ConfigDict):
      for sub in config.experiments.values():
        if isinstance(sub, ml_collections.ConfigDict):
          add_fine_tune_keys(sub)
      return config
    if "task" not in config:
      return config
    if "init_from" not in config:
      config.init_from = ml_collections.ConfigDict({"workdir": "", "reinit": (), "seed_index": -1})
    elif isinstance(config.init_from, ml_collections.ConfigDict):
      for key, default in (("workdir", ""), ("reinit", ()), ("seed_index", -1)):
        if key not in config.init_from:
          config.init_from[key] = default
    if isinstance(config.get("optimizer"), ml_collections.ConfigDict) and "freeze" not in config.optimizer:
      config.optimizer.freeze = ()
  return config


def make_tiny(c: ml_collections.ConfigDict, num_steps: int = 20) -> ml_collections.ConfigDict:
  """Shrinks a config's schedule to a few seconds (the ``:tiny`` variants used by tests)."""
  c.num_steps = num_steps
  c.log_every = max(1, num_steps // 4)
  c.eval_every = max(1, num_steps // 2)
  c.checkpoint_every = max(1, num_steps // 2)
  return c
