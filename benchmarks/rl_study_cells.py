"""The cells of a DQN study config (``configs/rl_expert_scaling.py``, ``configs/rl_momo_dqn.py``,
``configs/rl_router_diagnosis.py``) as trainer configs, trained and scored: what
``benchmarks/rl_study.py`` and ``benchmarks/rl_router_diagnosis.py`` train, in the order they train them.

A study config lists cells (``cells.<name>.set``: settings over ``base``), its ``seeds`` (and, for
a learning-rate study, ``lrs``) and, optionally, ``games``; this module turns them into complete
``configs/dqn_minatar.py`` configs, one per cell (and game), with the seeds vmapped as runs
(:func:`cell_config`), trains one (:func:`run_cell`) and scores cells by IQM (:func:`iqm_table`).
"""

from __future__ import annotations

import copy
import os
import time
from typing import Any

import ml_collections
import numpy as np

from jaxlab.config_files import load_config
from jaxlab.report import iqm_ci  # the IQM and stratified-bootstrap CI of python -m jaxlab.report
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train


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


#: record name -> the logged metric it follows (``network.router_diagnostics``'s).
CURVES = {
    "dispatch_entropy": "moe/dispatch_entropy", "combine_entropy": "moe/combine_entropy",
    "combine_spread": "moe/combine_spread",
    "router_grad_rms": "router/grad_rms", "router_grad_rms_over_eps": "router/grad_rms_over_eps",
    "router_step_fraction": "router/step_fraction",
    "adam_grad_rms_over_eps": "adam/grad_rms_over_eps", "adam_step_fraction": "adam/step_fraction",
    "q_spread_states": "q_spread_states", "q_spread_actions": "q_spread_actions",
}


def diagnostic_curves(workdir: str, runs: int, frames_per_update: int) -> dict[str, Any]:
  """The curves of the :data:`CURVES` a run logged (``curve_<name>``: per log point, per run; ``curve_<name>_frames``)
  and their last values (``final_<name>``): the routing entropies of every MoE run, the rest with
  ``network.router_diagnostics``."""
  rows = read_metrics(workdir)
  out: dict[str, Any] = {}
  for name, key in CURVES.items():
    points = [r for r in rows if key in r]
    if not points:
      continue
    out[f"curve_{name}_frames"] = [r["step"] * frames_per_update for r in points]
    out[f"curve_{name}"] = [per_run(r[key], runs) for r in points]
    out[f"final_{name}"] = per_run(points[-1][key], runs)
  return out


def per_run(value: Any, runs: int) -> list[float]:
  """A metric as one float per run (a scalar repeated for every run)."""
  v = np.asarray(value, np.float64).reshape(-1)
  return [float(x) for x in (v if v.size == runs else np.repeat(v, runs))]


def run_cell(study: Any, name: str, game: str | None = None, key: str | None = None) -> dict[str, Any]:
  """Trains one cell (all its runs in one program) on ``game``; returns its record for the JSON."""
  c = cell_config(study, name, game)
  workdir = os.path.join(study.workdir, key or name)
  t0 = time.perf_counter()
  summary = train(c, workdir, progress=False).summary
  wall = time.perf_counter() - t0
  runs = summary["runs"]
  rows = read_metrics(workdir)
  curve = [r for r in rows if "episode_return" in r]
  frames_per_update = c.dqn.update_period  # frames of all environments per update
  lb = [r for r in rows if "opt/lb" in r]
  return {
      "cell": name, "game": c.env.name, "what": study.cells[name].what, "runs": run_labels(study),
      "network": c.network.to_dict(), "optimizer": c.optimizer.to_dict(), "env": c.env.name,
      "frames": c.num_steps * frames_per_update, "dqn": c.dqn.to_dict(),
      "parameters": summary["parameters"],
      "frames_per_sec_all_runs": float(np.mean(summary["frames_per_sec"])) * runs,
      "wall_time_s": wall,
      # Greedy-ish evaluation (eval_epsilon) after the last update: one whole episode per eval env,
      # capped at eval_steps steps (eval_capped = 1 where the cap cut an episode short).
      "eval_return": per_run(summary["eval_return"], runs),
      "eval_episodes": per_run(summary["eval_episodes"], runs),
      "eval_capped": per_run(summary["eval_capped"], runs) if "eval_capped" in summary else None,
      # Mean return of the last 100 completed training episodes (epsilon-greedy), over time.
      "curve_frames": [r["step"] * frames_per_update for r in curve],
      "curve_return": [per_run(r["episode_return"], runs) for r in curve],
      "final_train_return": per_run(curve[-1]["episode_return"], runs),
      "final_loss": per_run(summary["final_loss"], runs),
      "nonfinite_skipped": per_run(summary["nonfinite_skipped"], runs),
      "final_lb": per_run(lb[-1]["opt/lb"], runs) if lb else None,
      "final_step_size": per_run(lb[-1]["opt/step_size"], runs) if lb and "opt/step_size" in lb[-1] else None,
      "loss_curve": [per_run(r["loss"], runs) for r in rows if "loss" in r],
      "load_average": os.getloadavg()[0],
      # routing entropies, combine spread, router gradient vs eps, Q spread (network.router_diagnostics)
      **diagnostic_curves(workdir, runs, frames_per_update),
  }


def iqm_table(results: dict[str, Any], order: list[str], key: str,
              by_game: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, Any]]:
  """IQM of min-max normalised returns per cell, 95% stratified-bootstrap CIs.

  ``by_game``: cell -> {game: record key} (default: each cell is its own record, one game).
  Normalisation, per game: (R - min) / (max - min) with min/max over every run of every cell of
  this study on that game, so 0 = the worst run seen, 1 = the best; a cell's scores are
  [runs, games], the bootstrap resamples runs within each game (rliable's stratification).
  """
  by_game = by_game or {n: {"": n} for n in order if n in results}
  names = [n for n in order if n in by_game and by_game[n]]
  games = sorted({g for n in names for g in by_game[n]})
  bounds = {}
  for g in games:
    allv = np.concatenate([np.asarray(results[by_game[n][g]][key], np.float64) for n in names if g in by_game[n]])
    bounds[g] = (float(np.nanmin(allv)), float(np.nanmax(allv)))
  out = {}
  for n in names:
    cols = []
    for g in games:
      if g in by_game[n]:
        lo, hi = bounds[g]
        cols.append((np.nan_to_num(np.asarray(results[by_game[n][g]][key], np.float64), nan=lo) - lo)
                    / max(hi - lo, 1e-12))
    point, ci_lo, ci_hi = iqm_ci(np.stack(cols, axis=1))  # [runs, games]; rliable, 2000 reps, seed 0
    out[n] = {"iqm": point, "ci_low": ci_lo, "ci_high": ci_hi}
    if games == [""]:
      out[n].update(min=bounds[""][0], max=bounds[""][1])
    else:
      out[n].update(games=[g for g in games if g in by_game[n]], min={g: bounds[g][0] for g in games},
                    max={g: bounds[g][1] for g in games})
  return out
