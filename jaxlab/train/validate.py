"""Cheap checks of the trainer's config values, before any compute: one clear line each."""

from __future__ import annotations

from typing import Any

from jaxlab.errors import InputError, check_int
from jaxlab.train.step import COMPUTE_DTYPES, REMAT_POLICIES


def _int(config: Any, key: str, low: int, high: int | None = None, why: str = "") -> None:
  check_int(config.get(key), key, low, why, maximum=high, got=True)


def validate_trainer_config(config: Any) -> None:
  """Raises ``InputError`` naming the first bad trainer key (see ``jaxlab.train.config``)."""
  for key in ("task", "optimizer", "batch_size", "num_steps", "mesh"):
    if key not in config:
      raise InputError(f"the config has no {key!r} key (see jaxlab.train.config.trainer_config)")
  _int(config, "seed", 0, 2**32 - 1, "a uint32 key")  # jax.random.key(2**32) would be key(0)
  for key in ("batch_size", "num_steps", "log_every", "eval_every", "checkpoint_every",
              "steps_per_call", "grad_accum_steps", "checkpoint_keep"):
    if key in config:
      _int(config, key, 1)
  for key in ("prefetch", "checkpoint_keep_period", "eval_offset"):
    if key in config:
      _int(config, key, 0)
  if config.get("eval_offset", 0) and config.get("eval_every", 200) % config.get("steps_per_call", 1):
    raise InputError(f"eval_every={config.get('eval_every', 200)} is not a multiple of steps_per_call="
                     f"{config.get('steps_per_call', 1)}; with eval_offset={config.eval_offset} the calls end on "
                     "the evaluation points only if it is")
  if config.get("remat", "none") not in REMAT_POLICIES:
    raise InputError(f"remat must be one of {sorted(REMAT_POLICIES)}, got {config.get('remat')!r}")
  if config.get("compute_dtype", "float32") not in COMPUTE_DTYPES:
    raise InputError(f"compute_dtype must be one of {COMPUTE_DTYPES}, got {config.get('compute_dtype')!r}")
  if not isinstance(config.get("skip_nonfinite", True), bool):
    raise InputError(f"skip_nonfinite must be True or False, got {config.get('skip_nonfinite')!r}")
