"""The cells of a DQN study config (``configs/rl_expert_scaling.py``, ``configs/rl_momo_dqn.py``)
as trainer configs: what ``benchmarks/rl_study.py`` trains, in the order it trains them.

A study config lists cells (``cells.<name>.set``: settings over ``base``), its ``seeds`` (and, for
a learning-rate study, ``lrs``) and, optionally, ``games``; this module turns them into complete
``configs/dqn_minatar.py`` configs, one per cell (and game), with the seeds vmapped as runs.
"""

from __future__ import annotations

import copy
from typing import Any

import ml_collections

from jaxlab.config_files import load_config


def merge(config: ml_collections.ConfigDict, settings: Any) -> None:
  """Sets ``settings`` into ``config``; nested dicts merge key by key, anything else replaces."""
  for key, value in dict(settings).items():
    if isinstance(value, (dict, ml_collections.ConfigDict)) and key in config and \
        isinstance(config[key], ml_collections.ConfigDict):
      merge(config[key], value)
    else:
      with config.unlocked():
        config[key] = value.to_dict() if isinstance(value, ml_collections.ConfigDict) else copy.deepcopy(value)


def units(study: Any) -> list[tuple[str, str, str | None]]:
  """``(key, cell, game)`` of every program the study trains, in run order: one per cell, or with
  ``study.games`` one per (cell, game), cells outer (``key`` = "game/cell"), so that a budget
  that ends early leaves whole cells."""
  games = tuple(study.get("games", None) or ())
  if not games:
    return [(name, name, None) for name in study.order]
  return [(f"{game}/{name}", name, game) for name in study.order for game in games]


def cell_config(study: Any, name: str, game: str | None = None) -> ml_collections.ConfigDict:
  """The trainer config of a study's cell: dqn_minatar + ``study.base`` + the cell's ``set`` (+
  ``env.name = game``), with ``study.seeds`` vmapped seeds (and ``study.lrs`` as a vmapped
  learning-rate sweep, if set)."""
  c = load_config("dqn_minatar")
  merge(c, study.base)
  merge(c, study.cells[name].set)
  c.name = f"{study.name}/{name}"
  if game is not None:
    c.env.name = game
    c.name = f"{study.name}/{game}/{name}"
  c.runs.seeds = study.seeds
  if study.get("lrs", None):
    c.runs.sweep = (("learning_rate", tuple(study.lrs)),)
  return c


def run_labels(study: Any) -> list[dict[str, Any]]:
  """One ``{"lr", "seed"}`` per run of a cell, in the trainer's order (sweep outer, seeds inner)."""
  lrs = tuple(study.get("lrs", None) or (None,))
  return [{"lr": lr, "seed": s} for lr in lrs for s in range(study.seeds)]
