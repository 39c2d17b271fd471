"""The trainer's config keys and their defaults; experiment configs add task, model, loss, optimizer."""

from __future__ import annotations

from typing import Any

import ml_collections


def trainer_config(**overrides: Any) -> ml_collections.ConfigDict:
  """A ConfigDict with every key ``jaxlab.train.trainer.train`` reads, set to its default.

  Keys: ``seed``, ``batch_size`` (global), ``num_steps``, ``mesh`` (``((axis, size), ...)``,
  one size may be -1), ``sharding_rules`` (``((regex over state paths, PartitionSpec axes), ...)``;
  unmatched leaves are replicated), ``skip_nonfinite``, ``log_every``, ``eval_every``,
  ``checkpoint_every``.
  """
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.batch_size = 128
  c.num_steps = 1000
  c.mesh = (("data", -1), ("model", 1))
  c.sharding_rules = ()
  c.skip_nonfinite = True
  c.log_every = 50
  c.eval_every = 200
  c.checkpoint_every = 200
  c.update(overrides)
  return c


def make_tiny(c: ml_collections.ConfigDict, num_steps: int = 20) -> ml_collections.ConfigDict:
  """Shrinks a config's schedule to a few seconds (the ``:tiny`` variants used by tests)."""
  c.num_steps = num_steps
  c.log_every = max(1, num_steps // 4)
  c.eval_every = max(1, num_steps // 2)
  c.checkpoint_every = max(1, num_steps // 2)
  return c
