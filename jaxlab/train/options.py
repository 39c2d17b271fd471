"""What the loop is told besides the task and the optimizer: the run's options, already checked.

The config layer (``jaxlab.experiment``) turns a config's trainer keys into a :class:`RunOptions`
once; the loop (:mod:`jaxlab.train.loop`) reads only these objects, never a config. Building one
by hand trains without a config::

  options = RunOptions(seed=0, batch_size=32, num_steps=100, log_every=10, eval_every=50,
                       checkpoint_every=50)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from jaxlab.train.checkpoint import RESUME_SAFE_KEYS

#: A host-side check of each logged row, ``(metrics, step) -> warning text or None``: the loop warns
#: once per check, the first time it returns a text (the step itself runs on under jit).
LogCheck = Callable[[Mapping[str, Any], int], str | None]


@dataclasses.dataclass(frozen=True)
class StepOptions:
  """How the one step computes (``jaxlab.train.step.train_step_fn``'s options).

  Attributes:
    grad_accum_steps: micro-batches per update.
    remat: the loss's ``jax.checkpoint`` policy (``REMAT_POLICIES``).
    compute_dtype: the loss's compute dtype; None (or "float32"): the params' float32.
    skip_nonfinite: skip and count updates with a non-finite loss or gradient.
  """
  grad_accum_steps: int = 1
  remat: str = "none"
  compute_dtype: str | None = None
  skip_nonfinite: bool = True


@dataclasses.dataclass(frozen=True)
class FineTuneSource:
  """Another run whose params a fresh run starts from (``jaxlab.train.finetune``).

  Attributes:
    workdir: the pre-training run's workdir.
    reinit: regexes over param paths that keep their fresh initialisation.
    seed_index: the run to load from a workdir of several vmapped runs (None: a single run).
    freeze: the optimizer's freeze regexes, counted in the report only.
  """
  workdir: str
  reinit: tuple[str, ...] = ()
  seed_index: int | None = None
  freeze: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """The run's schedule, placement and bookkeeping: every trainer setting the loop reads.

  Attributes:
    seed: the run's seed (params init, step rngs, data order); vmapped runs carry their own seeds.
    batch_size: the global batch size.
    num_steps: optimizer steps in all.
    log_every: log every this many steps (checked at call boundaries).
    eval_every: evaluate every this many steps.
    eval_offset: evaluate after the steps ``s`` with ``(s + eval_offset) % eval_every == 0`` instead
      (e.g. an agent's warm-up counted in); the calls then start where ``step + eval_offset`` is a
      multiple of ``steps_per_call`` (a shorter first call), so that they end there when
      ``steps_per_call`` divides ``eval_every``.
    checkpoint_every: save a checkpoint every this many steps.
    steps_per_call: steps per jitted call (a ``lax.scan``).
    checkpoint_keep: newest checkpoints kept.
    checkpoint_keep_period: also keep every checkpoint at a multiple of this (0: none).
    prefetch: host batches built ahead (0: none).
    step: the step's options.
    sharding_rules: ``((regex over state paths, PartitionSpec axes), ...)``.
    fsdp_axis: the mesh axis unmatched large leaves are sharded over (None: none).
    fsdp_min_size: the smallest leaf (elements) FSDP shards.
    name: the run's label (progress bar).
    optimizer_label: the optimizer's name in the summary.
    record: what the run is, saved beside each checkpoint and compared on resume (the config as a dict).
    resume_safe: fnmatch patterns of ``record`` keys a resumed run may change.
    init_from: the run to fine-tune from, or None.
  """
  seed: int
  batch_size: int
  num_steps: int
  log_every: int = 50
  eval_every: int = 200
  eval_offset: int = 0
  checkpoint_every: int = 200
  steps_per_call: int = 1
  checkpoint_keep: int = 2
  checkpoint_keep_period: int = 0
  prefetch: int = 1
  step: StepOptions = StepOptions()
  sharding_rules: tuple = ()
  fsdp_axis: str | None = None
  fsdp_min_size: int = 1 << 18
  name: str = ""
  optimizer_label: str = ""
  record: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  resume_safe: tuple[str, ...] = RESUME_SAFE_KEYS
  init_from: FineTuneSource | None = None
