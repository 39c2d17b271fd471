"""A config's trainer keys as the loop's :class:`~jaxlab.train.options.RunOptions`, built once per run."""

from __future__ import annotations

from typing import Any

from jaxlab.experiment.validate import seed_index
from jaxlab.train.checkpoint import RESUME_SAFE_KEYS
from jaxlab.train.options import FineTuneSource, RunOptions, StepOptions
from jaxlab.train.task import Task


def fine_tune_source(config: Any) -> FineTuneSource | None:
  """``config.init_from`` as a :class:`~jaxlab.train.options.FineTuneSource`; None without ``init_from.workdir``."""
  init_from = config.get("init_from", None)
  if init_from is None or not init_from.get("workdir", ""):
    return None
  return FineTuneSource(workdir=init_from.workdir, reinit=tuple(init_from.get("reinit", ()) or ()),
                        seed_index=seed_index(init_from),
                        freeze=tuple(config.optimizer.get("freeze", ()) or ()))


def run_options(config: Any, task: Task) -> RunOptions:
  """The loop's options of a validated ``config`` whose task is ``task``.

  Args:
    config: an experiment config, checked (``validate_trainer_config``).
    task: its task (its ``resume_safe`` keys join the trainer's).

  Returns:
    The :class:`~jaxlab.train.options.RunOptions`; ``record`` is the config as a dict, saved beside
    each checkpoint.
  """
  step = StepOptions(grad_accum_steps=config.grad_accum_steps, remat=config.remat,
                     compute_dtype=config.compute_dtype, skip_nonfinite=config.skip_nonfinite)
  return RunOptions(
      seed=config.seed, batch_size=config.batch_size, num_steps=config.num_steps, log_every=config.log_every,
      eval_every=config.eval_every, eval_offset=config.get("eval_offset", 0), checkpoint_every=config.checkpoint_every,
      steps_per_call=config.steps_per_call,
      checkpoint_keep=config.checkpoint_keep, checkpoint_keep_period=config.checkpoint_keep_period,
      prefetch=config.prefetch, step=step, sharding_rules=tuple(config.sharding_rules),
      fsdp_axis=config.fsdp_axis or None, fsdp_min_size=config.fsdp_min_size, name=config.get("name", config.task),
      optimizer_label=config.optimizer.name, record=config.to_dict(),
      resume_safe=RESUME_SAFE_KEYS + tuple(task.resume_safe), init_from=fine_tune_source(config))
