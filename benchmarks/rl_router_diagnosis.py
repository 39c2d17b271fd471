r"""Why the Soft-MoE router does not learn on MinAtar: each variant's router, measured while it trains.

The study config (``configs/rl_router_diagnosis.py``) lists the variants (cells) and games; each
(game, variant) is ``configs/dqn_minatar.py`` + ``base`` + the variant's ``set``, its seeds vmapped
as runs of one program (``runs.seeds``), trained by ``jaxlab.experiment.train`` in
``<workdir>/<game>/<variant>`` with ``network.router_diagnostics`` on. A finished program's record
(:func:`benchmarks.rl_study_cells.run_cell`'s, with the diagnostics' curves) goes to
``<out_dir>/<prefix>.json`` at once, so a rerun skips it; a killed program resumes from its
checkpoint. Then the table (``<prefix>.md``) and the plot (``<prefix>.png``).

Per variant and game the JSON holds, per run, at every log point and at the end (the last log point):

* ``dispatch_entropy`` / ``combine_entropy``: the routing entropies, normalised (1 = uniform), of the
  acting passes (``moe/...``);
* ``combine_spread``: the combine weights' spread over positions (:func:`jaxlab.moe.combine_spread`;
  0 = every output token the same);
* ``router_grad_rms_over_eps`` and ``router_step_fraction``: the router's gradient RMS from Adam's
  second moment over Adam's eps, and the share of Adam's normalised step that eps leaves it
  (:func:`jaxlab.rl.diagnostics.adam_moments`); ``adam_...`` the same over all parameters;
* ``q_spread_states`` / ``q_spread_actions``: the Q-values' spread on the replay batch;
* the training return (last 100 episodes) and the evaluation return after the last update;

and per variant ``learns``: whether its final dispatch or combine entropy, averaged over the runs of
each game, is at most ``entropy_target`` (0.9), and the IQM of the min-max normalised returns over
both games with a 95% stratified-bootstrap CI.

  nice -n 10 python benchmarks/rl_router_diagnosis.py --measure
  nice -n 10 python benchmarks/rl_router_diagnosis.py
  python benchmarks/rl_router_diagnosis.py --report_only
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
import threading
import time
from typing import Any

from absl import app, flags, logging
from ml_collections import config_flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.rl_study_cells import CURVES, cell_config, iqm_table, run_cell, units  # noqa: E402
from jaxlab.errors import check  # noqa: E402
from jaxlab.experiment import train  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", "configs/rl_router_diagnosis.py", "study config")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "only rebuild the table and plot from the JSON")
_MEASURE = flags.DEFINE_bool("measure", False, "CPU seconds per 1k frames of every variant (first game), then stop")
_CELLS = flags.DEFINE_list("cells", None, "run only these variants or game/variant keys (default: all, in order)")

def _command() -> str:
  return "python " + " ".join(sys.argv)


def _selected(study: Any) -> list[tuple[str, str, str | None]]:
  wanted = set(_CELLS.value or ())
  return [u for u in units(study) if not wanted or u[0] in wanted or u[1] in wanted]


# ---------------------------------------------------------------- measure

def _timed_program(study: Any, name: str, game: str, num_steps: int, diagnostics: bool = True
                   ) -> tuple[float, float, float]:
  """Trains one program for ``num_steps`` updates, logging after every call; returns (CPU s of the calls
  after the first, wall s of them, CPU s up to the end of the first call, which compiles).

  The process's CPU time is read when each call's row appears in ``metrics.jsonl`` (a thread polls
  it every 50 ms), so compilation and the final checkpoint are left out of the rate.
  """
  c = cell_config(study, name, game)
  c.network.router_diagnostics = diagnostics
  c.num_steps = c.eval_every = c.checkpoint_every = num_steps
  c.log_every = c.steps_per_call
  c.dqn.eval_steps = 0
  workdir = tempfile.mkdtemp(prefix="router_measure_")
  metrics = os.path.join(workdir, "metrics.jsonl")
  seen: list[tuple[int, float, float]] = []  # (rows, CPU s, wall s) whenever the row count grows
  done = threading.Event()

  def poll() -> None:
    rows = 0
    while not done.is_set():
      if os.path.exists(metrics):
        with open(metrics) as f:
          now = sum(1 for _ in f)
        if now > rows:
          rows = now
          seen.append((rows, time.process_time(), time.perf_counter()))
      time.sleep(0.05)

  watcher = threading.Thread(target=poll, daemon=True)
  cpu0 = time.process_time()
  watcher.start()
  train(c, workdir, progress=False)
  done.set()
  watcher.join()
  calls = num_steps // c.steps_per_call
  check(seen and seen[0][0] == 1 and seen[-1][0] == calls,
        f"--measure saw metrics rows {[r for r, _, _ in seen]}; expected 1..{calls} (one per call)")
  first, last = seen[0], seen[-1]
  return last[1] - first[1], last[2] - first[2], first[1] - cpu0


def measure(study: Any, out: str) -> dict[str, Any]:
  """CPU seconds per 1k frames (all vmapped runs of a program) of each variant on the first game.

  Each variant trains ``measure_steps`` updates in calls of ``steps_per_call``; the CPU time of the
  calls after the first (which compiles) gives the rate (:func:`_timed_program`). CPU time is the
  process's (``time.process_time``: all its threads), which depends less than wall time on what
  else the shared machine runs. The first variant is also timed without ``network.router_diagnostics``
  (row ``<variant>_no_diagnostics``): what the diagnostics cost.
  """
  game = study.games[0]
  rows = []
  names = [u[1] for u in _selected(study) if u[2] == game]
  for name, diagnostics_on in [(n, True) for n in names] + [(names[0], False)]:
    cpu, wall, cpu_first = _timed_program(study, name, game, study.measure_steps, diagnostics_on)
    frames = (study.measure_steps - study.base.steps_per_call) * 4 * study.seeds  # update_period: 4 frames
    row = {"variant": name if diagnostics_on else f"{name}_no_diagnostics", "game": game, "seeds": study.seeds,
           "router_diagnostics": diagnostics_on, "timed_frames_all_runs": frames,
           "cpu_s_per_1k_frames": 1000 * cpu / frames, "wall_s_per_1k_frames": 1000 * wall / frames,
           "cpu_s_compile_and_first_call": cpu_first, "load_average": os.getloadavg()[0]}
    rows.append(row)
    print(json.dumps(row), flush=True)
  frames_total = study.base.num_steps * 4 * study.seeds
  per_program = {r["variant"]: r["cpu_s_per_1k_frames"] * frames_total / 1000 + r["cpu_s_compile_and_first_call"]
                 for r in rows if r["router_diagnostics"]}
  result = {"date": datetime.date.today().isoformat(), "command": _command(), "rows": rows,
            "frames_per_run": study.base.num_steps * 4, "seeds": study.seeds, "games": list(study.games),
            "cpu_minutes_estimate": sum(per_program.values()) * len(study.games) / 60,
            "note": "CPU time of this process (all threads), 2 shared cores; the estimate is the measured rate x "
                    "the study's frames + one compile per program, for every game"}
  with open(os.path.join(out, f"{study.prefix}_cost.json"), "w") as f:
    json.dump(result, f, indent=1)
  print(f"estimated CPU time of the study: {result['cpu_minutes_estimate']:.0f} min", flush=True)
  return result


# ---------------------------------------------------------------- cells

def router_state(workdir: str) -> dict[str, Any]:
  """The router's parameters at the end of a program, per run: ``final_router_phi_rms`` (the RMS of
  ``phi``), ``router_phi_rms_init`` (its initial RMS, LeCun normal over fan-in d n: 1 / sqrt(d n)) and,
  with ``network.normalize``, ``final_router_scale``; ``{}`` for a network without a router."""
  import jaxlab  # noqa: PLC0415 - the trained run, read back from its checkpoint

  params = jaxlab.load_run(workdir).params
  router = next((v["router"] for v in params.values() if isinstance(v, dict) and "router" in v), None)
  if router is None or "phi" not in router:
    return {}
  phi = np.asarray(router["phi"], np.float64)  # [runs, d, n, p]
  out = {"final_router_phi_rms": [float(x) for x in np.sqrt(np.mean(phi.reshape(phi.shape[0], -1) ** 2, axis=1))],
         "router_phi_rms_init": float(1 / np.sqrt(phi.shape[1] * phi.shape[2]))}
  if "scale" in router:
    out["final_router_scale"] = [float(x) for x in np.ravel(router["scale"])]
  return out


def run_unit(study: Any, name: str, game: str, key: str) -> dict[str, Any]:
  """Trains one variant on one game (all its seeds in one program); its record with the diagnostics."""
  t0 = time.process_time()
  record = run_cell(study, name, game, key)  # with the diagnostics' curves (network.router_diagnostics)
  record["cpu_time_s"] = time.process_time() - t0
  record.update(router_state(os.path.join(study.workdir, key)))
  return record


# ---------------------------------------------------------------- report

def _mean(values: Any) -> float:
  v = np.asarray(values, np.float64)
  return float(np.nanmean(v)) if v.size and not np.all(np.isnan(v)) else float("nan")


def summarise(study: Any, cells: dict[str, Any]) -> dict[str, Any]:
  """Per variant: the final diagnostics per game (mean over runs), ``learns``, and the returns' IQM over games."""
  by_game = {n: {g: k for k, n2, g in units(study) if n2 == n and k in cells} for n in study.order}
  order = [n for n in study.order if by_game[n]]
  iqm_eval = iqm_table(cells, order, "eval_return", by_game) if order else {}
  iqm_train = iqm_table(cells, order, "final_train_return", by_game) if order else {}
  out = {}
  for n in order:
    games = {}
    for g, k in by_game[n].items():
      r = cells[k]
      games[g] = {name: _mean(r[f"final_{name}"]) for name in CURVES if f"final_{name}" in r}
      games[g].update({name: _mean(r[f"final_{name}"]) for name in ("router_phi_rms", "router_scale")
                       if f"final_{name}" in r})
      if "router_phi_rms_init" in r:
        games[g]["router_phi_rms_init"] = r["router_phi_rms_init"]
      games[g].update(eval_return=_mean(r["eval_return"]), train_return=_mean(r["final_train_return"]),
                      eval_return_std=float(np.nanstd(r["eval_return"])),
                      train_return_std=float(np.nanstd(r["final_train_return"])))
    has_router = all("dispatch_entropy" in v for v in games.values())
    lowest = {g: min(v["dispatch_entropy"], v["combine_entropy"]) for g, v in games.items()} if has_router else {}
    out[n] = {"what": study.cells[n].what, "games": games,
              "lowest_final_entropy": lowest,
              "learns": bool(has_router and all(e <= study.entropy_target for e in lowest.values())),
              "iqm_eval": iqm_eval[n], "iqm_train": iqm_train[n]}
  return out


def _f(x: Any, digits: int = 3) -> str:
  return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def table(study: Any, summary: dict[str, Any], cells: dict[str, Any]) -> str:
  first = next(iter(cells.values()), None)
  lines = [f"# Why the Soft-MoE router does not learn: {' + '.join(study.games)}", "",
           (f"{first['frames']:,} frames per run, {len(first['runs'])} vmapped seeds per program; " if first else "")
           + "final = the last log point (mean of its call's updates), mean over seeds. Entropies normalised "
           f"(1 = uniform); the router learns where an entropy is <= {study.entropy_target}. Return IQM: min-max "
           "normalised per game over every run of the study, 95% stratified-bootstrap CI (rliable, 2000 reps).", "",
           "| variant | game | dispatch entropy | combine entropy | combine spread | router grad RMS / eps | "
           "router step fraction | router phi RMS end / init | router scale | Q spread (states) | Q spread (actions) | "
           "eval return | train return | IQM eval [95% CI] | IQM train [95% CI] |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for n, s in summary.items():
    for g, v in s["games"].items():
      qi, qt = s["iqm_eval"], s["iqm_train"]
      lines.append(
          f"| {n} | {g} | {_f(v.get('dispatch_entropy'), 4)} | {_f(v.get('combine_entropy'), 4)} | "
          f"{_f(v.get('combine_spread'))} | {_f(v.get('router_grad_rms_over_eps'))} | "
          f"{_f(v.get('router_step_fraction'))} | "
          f"{_f(v['router_phi_rms'] / v['router_phi_rms_init'] if 'router_phi_rms' in v else None, 2)} | "
          f"{_f(v.get('router_scale'), 2)} | {_f(v.get('q_spread_states'), 4)} | "
          f"{_f(v.get('q_spread_actions'), 4)} | {v['eval_return']:.2f} ± {v['eval_return_std']:.2f} | "
          f"{v['train_return']:.2f} ± {v['train_return_std']:.2f} | "
          f"{qi['iqm']:.2f} [{qi['ci_low']:.2f}, {qi['ci_high']:.2f}] | "
          f"{qt['iqm']:.2f} [{qt['ci_low']:.2f}, {qt['ci_high']:.2f}] |")
  learners = [n for n, s in summary.items() if s["learns"]]
  lines += ["", "Variants whose router learns (final entropy <= "
            f"{study.entropy_target} on every game): {', '.join(learners) if learners else 'none'}.",
            "", f"Compute: {sum(r.get('cpu_time_s', 0.0) for r in cells.values()) / 60:.1f} CPU-minutes, "
            f"{sum(r['wall_time_s'] for r in cells.values()) / 60:.1f} min wall for the programs."]
  return "\n".join(lines) + "\n"


PANELS = (("dispatch_entropy", "dispatch entropy (1 = uniform)"), ("combine_entropy", "combine entropy"),
          ("combine_spread", "combine spread over positions"), ("router_grad_rms_over_eps", "router grad RMS / eps"),
          ("router_step_fraction", "router: share of Adam's step"), ("q_spread_states", "Q spread over states"),
          ("return", "training return (last 100 episodes)"))


def plot(study: Any, cells: dict[str, Any], path: str) -> None:
  import matplotlib  # noqa: PLC0415
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  games = tuple(study.games)
  fig, axes = plt.subplots(len(PANELS), len(games), figsize=(6 * len(games), 2.6 * len(PANELS)), squeeze=False)
  for j, game in enumerate(games):
    for i, (name, label) in enumerate(PANELS):
      ax = axes[i, j]
      for n in study.order:
        r = cells.get(f"{game}/{n}")
        if r is None:
          continue
        x_key, y_key = ("curve_frames", "curve_return") if name == "return" else (f"curve_{name}_frames",
                                                                               f"curve_{name}")
        if y_key not in r:
          continue
        y = np.asarray(r[y_key], np.float64)
        m, s = np.nanmean(y, axis=1), np.nanstd(y, axis=1)
        x = np.asarray(r[x_key])
        ax.plot(x, m, label=n)
        ax.fill_between(x, m - s, m + s, alpha=0.12)
      if name.endswith("entropy"):
        ax.axhline(study.entropy_target, color="k", lw=0.6, ls=":")
      if name == "router_grad_rms_over_eps":
        ax.set_yscale("log")
        ax.axhline(1.0, color="k", lw=0.6, ls=":")
      ax.set(ylabel=label, title=f"MinAtar {game}" if i == 0 else None)
      ax.grid(alpha=0.3)
      if i == len(PANELS) - 1:
        ax.set_xlabel("frames (per seed)")
  axes[0, 0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=80)
  plt.close(fig)


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
  result = json.load(open(path)) if os.path.exists(path) else {}
  cells = result.get("cells", {})

  def save() -> None:
    # the summary first: the results page shows a file's first values
    result.clear()
    result.update(date=datetime.date.today().isoformat(), command=_command(), study=study.name,
                  entropy_target=study.entropy_target, games=list(study.games), seeds=study.seeds,
                  frames_per_run=study.base.num_steps * 4, variants=list(study.order),
                  summary=summarise(study, cells) if cells else {}, cells=cells)
    with open(path, "w") as f:
      json.dump(result, f, indent=1)

  if not _REPORT_ONLY.value:
    for key, name, game in _selected(study):
      if key in cells:
        print(f"{key}: done, skipped", flush=True)
        continue
      cells[key] = run_unit(study, name, game, key)
      save()
      r = cells[key]
      print(f"{key}: {r['cpu_time_s'] / 60:.1f} CPU-min, final dispatch entropy "
            f"{_f(_mean(r.get('final_dispatch_entropy', [np.nan])), 4)}, eval {_mean(r['eval_return']):.2f}",
            flush=True)
  for key, record in cells.items():  # programs recorded before the router state was: read it back if still there
    workdir = os.path.join(study.workdir, key)
    if "final_router_phi_rms" not in record and os.path.isdir(os.path.join(workdir, "checkpoints")):
      record.update(router_state(workdir))
  save()
  text = table(study, result["summary"], cells)
  with open(os.path.join(out, f"{study.prefix}.md"), "w") as f:
    f.write(text)
  if cells:
    plot(study, cells, os.path.join(out, f"{study.prefix}.png"))
  print(text)


if __name__ == "__main__":
  app.run(main)
