r"""DQN studies on MinAtar through the trainer: expert scaling and MoMo in deep RL.

Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024;
Schaipp et al., "MoMo: Momentum Models for Adaptive Learning Rates", ICML 2024. The study config
(``configs/rl_expert_scaling.py`` or ``configs/rl_momo_dqn.py``) lists cells; each cell is
``configs/dqn_minatar.py`` + ``base`` + the cell's ``set``, its seeds (and, for the MoMo study, its
learning rates) vmapped as runs of one program, trained by ``jaxlab.experiment.train`` in
``<workdir>/<cell>`` (with ``games``: one program per cell and game, in ``<workdir>/<game>/<cell>``).
A finished program's record goes to ``<out_dir>/<prefix>.json`` and is skipped on rerun; a killed
one resumes from its checkpoint. Then a table (``<prefix>.md``) and a plot (``<prefix>.png``).

  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --measure
  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:full   # 2 games x 8 cells x 3 seeds x 1M frames
  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_momo_dqn.py
  python benchmarks/rl_study.py --config=configs/rl_momo_dqn.py --report_only
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from typing import Any

from absl import app, flags, logging
import ml_collections
from ml_collections import config_flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.rl_study_cells import cell_config, iqm_table, run_cell, run_labels, units  # noqa: E402
from jaxlab.experiment import train  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", "configs/rl_expert_scaling.py", "study config")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "only rebuild the table and plot from the JSON")
_MEASURE = flags.DEFINE_bool("measure", False, "time every cell (frames/s of all its runs), then stop")
_CELLS = flags.DEFINE_list("cells", None, "run only these cells or game/cell keys (default: all, in order)")


def _runs(study: Any) -> int:
  return len(run_labels(study))


# ---------------------------------------------------------------- measure

def measure(study: Any, out: str) -> None:
  """Frames/s of every cell (all its vmapped runs together), from the trainer's own timer.

  ``measure_steps`` updates in calls of ``steps_per_call``; the trainer excludes the first
  (compiling) call, so the rate is that of the later calls.
  """
  rows = []
  for key, name, game in _selected(study):
    c = cell_config(study, name, game)
    c.num_steps = study.measure_steps
    c.log_every = c.eval_every = c.checkpoint_every = study.measure_steps
    c.dqn.eval_steps = 0
    t0 = time.perf_counter()
    s = train(c, tempfile.mkdtemp(prefix="rlstudy_measure_"), progress=False).summary
    runs = s["runs"]
    row = {"cell": key, "runs": runs, "parameters": s["parameters"], "updates": study.measure_steps,
           "steps_per_sec": s["steps_per_sec"], "frames_per_sec_all_runs": s["frames_per_sec"] * runs,
           "wall_s_incl_compile": time.perf_counter() - t0, "load_average": os.getloadavg()[0]}
    rows.append(row)
    print(json.dumps(row), flush=True)
  with open(os.path.join(out, f"{study.prefix}_speed.json"), "w") as f:
    json.dump(rows, f, indent=1)


# ---------------------------------------------------------------- cells

def _selected(study: Any) -> list[tuple[str, str, str | None]]:
  """The study's programs, or those whose cell or key ``--cells`` names."""
  wanted = set(_CELLS.value or ())
  return [u for u in units(study) if not wanted or u[0] in wanted or u[1] in wanted]


# ---------------------------------------------------------------- report

def _fmt(values: list[float] | None, digits: int = 2) -> str:
  if not values:
    return "-"
  v = np.asarray(values, np.float64)
  if np.all(np.isnan(v)):
    return "nan"
  return f"{np.nanmean(v):.{digits}f} ± {np.nanstd(v):.{digits}f}"


def _eval_description(r: dict[str, Any]) -> str:
  d = r["dqn"]
  if r.get("eval_capped") is not None:  # the evaluation that plays whole episodes
    return (f"eval return: mean over {d['eval_envs']} fresh envs of one whole episode each (capped at "
            f"{d['eval_steps']} steps; capped runs: {int(np.sum(r['eval_capped']))}) at epsilon {d['eval_epsilon']} "
            "after the last update")
  return (f"eval return: mean over completed episodes of {d['eval_envs']} envs x {d['eval_steps']} steps at epsilon "
          f"{d['eval_epsilon']} after the last update (the earlier evaluation: episodes unfinished at the window's "
          "end are dropped, short ones over-weighted)")


def _cell_columns(r: dict[str, Any], q: dict[str, float], qt: dict[str, float]) -> str:
  """A scaling table's columns after the cell (and game): what, size, returns, IQMs, speed."""
  return (f"{r['what']} | {r['parameters']:,} | {r['frames']:,} | {len(r['runs'])} | "
          f"{_fmt(r['eval_return'])} | {_fmt(r['final_train_return'])} | "
          f"{q['iqm']:.2f} [{q['ci_low']:.2f}, {q['ci_high']:.2f}] | "
          f"{qt['iqm']:.2f} [{qt['ci_low']:.2f}, {qt['ci_high']:.2f}] | "
          f"{r['frames_per_sec_all_runs']:.0f} | {r['wall_time_s']:.0f} |")


def report_scaling(study: Any, results: dict[str, Any], out: str) -> str:
  if study.get("games", None):
    return report_scaling_games(study, results, out)
  import matplotlib  # noqa: PLC0415
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  order = [n for n in study.order if n in results]
  iqm = iqm_table(results, order, "eval_return") if order else {}
  iqm_train = iqm_table(results, order, "final_train_return") if order else {}
  lines = [f"# Expert scaling, MinAtar {results[order[0]]['env'] if order else ''} (CPU budget)", "",
           (_eval_description(results[order[0]]) if order else "eval return") +
           "; train return: mean of the last 100 completed training episodes. Mean ± std over seeds. "
           "IQM: of min-max normalised eval returns (min/max over all runs of the study), 95% stratified "
           "bootstrap CI (rliable.library.get_interval_estimates with rliable.metrics.aggregate_iqm, 2000 reps).", "",
           "| cell | what | params | frames/seed | seeds | eval return | train return (last 100 ep) | "
           "IQM [95% CI] (eval) | IQM [95% CI] (train) | frames/s all seeds | wall s |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  total = 0.0
  for name in study.order:
    r = results.get(name)
    if r is None:
      lines.append(f"| {name} | {study.cells[name].what} | (not run) | | | | | | | | |")
      continue
    total += r["wall_time_s"]
    lines.append(f"| {name} | {_cell_columns(r, iqm[name], iqm_train[name])}")
  lines += ["", f"Compute: {total / 60:.1f} min wall for the cells (training, compilation, evaluation, checkpoints)."]
  if order:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.2))
    _plot_curves(ax, {name: results[name] for name in order}, f"MinAtar {results[order[0]]['env']}")
    _plot_iqm(bx, order, iqm, iqm_train)
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"{study.prefix}.png"), dpi=90)
    plt.close(fig)
  with open(os.path.join(out, f"{study.prefix}_iqm.json"), "w") as f:
    json.dump({"eval": iqm, "train": iqm_train}, f, indent=1)
  return "\n".join(lines) + "\n"


def _plot_curves(ax: Any, records: dict[str, dict[str, Any]], title: str) -> None:
  for name, r in records.items():
    y = np.asarray(r["curve_return"], np.float64)  # [log points, runs]
    x = np.asarray(r["curve_frames"])
    m, s = np.nanmean(y, axis=1), np.nanstd(y, axis=1)
    ax.plot(x, m, label=f"{name} ({r['parameters'] / 1e3:.0f}k)")
    ax.fill_between(x, m - s, m + s, alpha=0.15)
  ax.set(xlabel="frames (per seed)", ylabel="training return (last 100 episodes)",
         title=f"{title}: learning curves (mean ± std over seeds)")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)


def _plot_iqm(bx: Any, order: list[str], iqm: dict[str, Any], iqm_train: dict[str, Any]) -> None:
  pos = np.arange(len(order))
  for off, table, label in ((-0.18, iqm, "eval"), (0.18, iqm_train, "train (last 100 ep)")):
    pts = np.array([table[n]["iqm"] for n in order])
    err = np.array([[pts[i] - table[n]["ci_low"], table[n]["ci_high"] - pts[i]] for i, n in enumerate(order)]).T
    bx.errorbar(pos + off, pts, yerr=err, fmt="o", capsize=3, label=label)
  bx.set_xticks(pos, order, rotation=30, fontsize=8)
  bx.set(ylabel="IQM of min-max normalised return", title="IQM, 95% stratified-bootstrap CI")
  bx.grid(alpha=0.3)
  bx.legend(fontsize=7)


def report_scaling_games(study: Any, results: dict[str, Any], out: str) -> str:
  """Table per (cell, game), IQM per cell over all its games' runs, curves per game."""
  import matplotlib  # noqa: PLC0415
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  games = tuple(study.games)
  by_game = {n: {g: k for k, n2, g in units(study) if n2 == n and k in results} for n in study.order}
  order = [n for n in study.order if by_game[n]]
  iqm = iqm_table(results, order, "eval_return", by_game) if order else {}
  iqm_train = iqm_table(results, order, "final_train_return", by_game) if order else {}
  first = next((results[k] for k, _, _ in units(study) if k in results), None)
  lines = [f"# Expert scaling, MinAtar {' + '.join(games)}", "",
           (_eval_description(first) if first else "eval return") +
           "; train return: mean of the last 100 completed training episodes. Mean ± std over seeds. "
           "IQM per cell over all its runs on all games: returns min-max normalised per game (min/max over all "
           "runs of the study on that game), 95% stratified bootstrap CI (rliable, runs resampled within each "
           "game, 2000 reps).", "",
           "| cell | game | what | params | frames/seed | seeds | eval return | train return (last 100 ep) | "
           "IQM [95% CI] (eval, all games) | IQM [95% CI] (train, all games) | frames/s all seeds | wall s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
  total = 0.0
  for key, name, game in units(study):
    r = results.get(key)
    if r is None:
      lines.append(f"| {name} | {game} | {study.cells[name].what} | (not run) | | | | | | | | |")
      continue
    total += r["wall_time_s"]
    lines.append(f"| {name} | {game} | {_cell_columns(r, iqm[name], iqm_train[name])}")
  lines += ["", f"Compute: {total / 60:.1f} min wall for the programs (training, compilation, evaluation, "
            "checkpoints)."]
  if order:
    fig, axes = plt.subplots(1, len(games) + 1, figsize=(6 * (len(games) + 1), 4.2))
    for ax, game in zip(axes, games):
      _plot_curves(ax, {n: results[by_game[n][game]] for n in order if game in by_game[n]}, f"MinAtar {game}")
    _plot_iqm(axes[-1], order, iqm, iqm_train)
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"{study.prefix}.png"), dpi=90)
    plt.close(fig)
  with open(os.path.join(out, f"{study.prefix}_iqm.json"), "w") as f:
    json.dump({"eval": iqm, "train": iqm_train}, f, indent=1)
  return "\n".join(lines) + "\n"


def _by_lr(r: dict[str, Any], key: str) -> dict[float, list[float]]:
  out: dict[float, list[float]] = {}
  for label, v in zip(r["runs"], r[key] or []):
    out.setdefault(label["lr"], []).append(v)
  return out


def report_lr_sweep(study: Any, results: dict[str, Any], out: str) -> str:
  import matplotlib  # noqa: PLC0415
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  order = [n for n in study.order if n in results]
  lines = ["# MoMo-Adam vs Adam in DQN (MinAtar, CPU budget)", "",
           "Per (optimizer, lr): mean ± std over seeds. " + (_eval_description(results[order[0]]) if order else "eval") +
           "; train: mean of the last 100 training episodes; loss: mean TD loss of the last logged "
           "call; lb: MoMo's lower bound at the end (0 unless MoMo*); tau: MoMo's last adaptive step "
           "(min(lr, Polyak step)).", "",
           "| optimizer | lr | eval return | train return | final TD loss | lb | tau | non-finite skipped |",
           "|---|---|---|---|---|---|---|---|"]
  total = 0.0
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for name in study.order:
    r = results.get(name)
    if r is None:
      lines.append(f"| {name} | (not run) | | | | | | |")
      continue
    total += r["wall_time_s"]
    ev, tr = _by_lr(r, "eval_return"), _by_lr(r, "final_train_return")
    loss = _by_lr(r, "final_loss")
    lb = _by_lr(r, "final_lb") if r.get("final_lb") else {}
    tau = _by_lr(r, "final_step_size") if r.get("final_step_size") else {}
    skipped = _by_lr(r, "nonfinite_skipped")
    for lr in ev:
      lines.append(f"| {name} | {lr:.0e} | {_fmt(ev[lr])} | {_fmt(tr[lr])} | {_fmt(loss[lr], 4)} | "
                   f"{_fmt(lb.get(lr), 4)} | {_fmt(tau.get(lr), 6)} | {int(np.sum(skipped[lr]))} |")
    lrs = sorted(ev)
    for ax, table in zip(axes, (ev, tr)):
      m = [np.nanmean(table[lr]) for lr in lrs]
      s = [np.nanstd(table[lr]) for lr in lrs]
      ax.errorbar(lrs, m, yerr=s, marker="o", capsize=3, label=study.cells[name].what)
  for ax, t in zip(axes, ("eval return (epsilon 0.001)", "training return (last 100 episodes)")):
    ax.set(xscale="log", xlabel="learning rate", ylabel=t)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  if order:
    r0 = results[order[0]]
    fig.suptitle(f"MinAtar {r0['env']}, {r0['frames']:,} frames, {study.seeds} seeds per lr, "
                 f"Soft-MoE {r0['network']['num_experts']} experts ({r0['parameters']:,} params)", fontsize=9)
  fig.tight_layout()
  fig.savefig(os.path.join(out, f"{study.prefix}.png"), dpi=90)
  plt.close(fig)
  lines += ["", f"Compute: {total / 60:.1f} min wall for the cells (training, compilation, evaluation, checkpoints)."]
  return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- main

def main(argv: list[str]) -> None:
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  study = _CONFIG.value
  out = study.out_dir
  os.makedirs(out, exist_ok=True)
  if _MEASURE.value:
    measure(study, out)
    return
  path = os.path.join(out, f"{study.prefix}.json")
  results = json.load(open(path)) if os.path.exists(path) else {}
  if not _REPORT_ONLY.value:
    for key, name, game in _selected(study):
      if key in results:
        print(f"{key}: done, skipped", flush=True)
        continue
      results[key] = run_cell(study, name, game, key)
      with open(path, "w") as f:
        json.dump(results, f, indent=1)
      r = results[key]
      print(f"{key}: {r['wall_time_s']:.0f} s, eval {_fmt(r['eval_return'])}, "
            f"train {_fmt(r['final_train_return'])}", flush=True)
  text = (report_scaling if study.kind == "scaling" else report_lr_sweep)(study, results, out)
  with open(os.path.join(out, f"{study.prefix}.md"), "w") as f:
    f.write(text)
  print(text)


if __name__ == "__main__":
  app.run(main)
