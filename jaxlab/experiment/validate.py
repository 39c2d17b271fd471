"""Cheap checks of the trainer's config values and the run's arguments, before any compute: one clear line each.

The edge of a run: ``jaxlab.experiment`` calls these once per experiment (``check_experiments``),
then builds objects that are trusted from there on.
"""

from __future__ import annotations

from typing import Any

from jaxlab.errors import InputError, check, check_bool, check_choice, check_int, is_int
from jaxlab.train.precision import COMPUTE_DTYPES
from jaxlab.train.step import REMAT_POLICIES


def _int(config: Any, key: str, low: int, high: int | None = None, why: str = "") -> None:
  check_int(config.get(key), key, low, why, maximum=high, got=True)


def validate_trainer_config(config: Any) -> None:
  """Raises ``InputError`` naming the first bad trainer key (see ``jaxlab.experiment.trainer_config``)."""
  for key in ("task", "optimizer", "batch_size", "num_steps", "mesh"):
    if key not in config:
      raise InputError(f"the config has no {key!r} key (see jaxlab.experiment.trainer_config)")
  _int(config, "seed", 0, 2**32 - 1, "a uint32 key")  # jax.random.key(2**32) would be key(0)
  check_data_axis(config.mesh)
  for key in ("batch_size", "num_steps", "log_every", "eval_every", "checkpoint_every",
              "steps_per_call", "grad_accum_steps", "checkpoint_keep"):
    if key in config:
      _int(config, key, 1)
  for key in ("prefetch", "checkpoint_keep_period", "eval_offset"):
    if key in config:
      _int(config, key, 0)
  eval_every, steps_per_call = config.get("eval_every", 200), config.get("steps_per_call", 1)
  check(not config.get("eval_offset", 0) or eval_every % steps_per_call == 0,
        f"eval_every={eval_every} is not a multiple of steps_per_call={steps_per_call}; with "
        f"eval_offset={config.get('eval_offset', 0)} the calls end on the evaluation points only if it is")
  check_choice(config.get("remat", "none"), "remat", sorted(REMAT_POLICIES), got=True)
  check_choice(config.get("compute_dtype", "float32"), "compute_dtype", COMPUTE_DTYPES, got=True)
  check_bool(config.get("skip_nonfinite", True), "skip_nonfinite", got=True)
  check_fine_tuning(config)


def check_data_axis(mesh: Any) -> None:
  """A mesh spec ``((name, size), ...)`` names a "data" axis (a spec of another shape is left to
  ``jaxlab.train.make_mesh``, which names what is wrong with it)."""
  if not isinstance(mesh, (tuple, list)) or not all(isinstance(e, (tuple, list)) and len(e) == 2 for e in mesh):
    return
  axes = tuple(name for name, _ in mesh)
  if "data" not in axes:
    raise InputError(f"the mesh needs a 'data' axis (size 1 for no data parallelism); got axes {axes}")


def check_fine_tuning(config: Any) -> None:
  """``init_from.*`` of a fine-tuning run (``init_from.workdir`` set): a single run, a valid seed index."""
  init_from = config.get("init_from", None)
  if init_from is None or not init_from.get("workdir", ""):
    return
  runs = config.get("runs", None)
  seeds = runs.get("seeds", 1) if runs is not None else 1
  if runs is not None and ((is_int(seeds) and seeds > 1) or tuple(runs.get("sweep", ()) or ())):
    raise InputError("init_from (fine-tuning) works with single runs; set runs.seeds=1 and no runs.sweep")
  seed_index(init_from)


def seed_index(init_from: Any) -> int | None:
  """``init_from.seed_index`` (-1: the pre-training run is a single run) as None or a run index.

  Raises:
    InputError: not -1 or an int >= 0.
  """
  index = init_from.get("seed_index", -1)
  if not is_int(index) or index < -1:
    raise InputError(f"init_from.seed_index={index!r}; allowed: -1 (a single pre-training run) or the index of "
                     "one of its vmapped runs (an int >= 0)")
  return None if index == -1 else int(index)


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
