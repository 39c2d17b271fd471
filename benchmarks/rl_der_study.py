r"""Atari 100k: Data-Efficient Rainbow (DER) with a dense vs a Soft-MoE penultimate layer.

Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024, in its
Atari 100k setting: Dopamine's ``labs/moes/configs/DER.gin`` (google/dopamine @ 5873f54), DER (van
Hasselt et al., NeurIPS 2019) on the Nature CNN with the penultimate layer dense or a Soft MoE of
4 experts (``FullRainbowMoENetwork.num_experts = 4``, ``moe_type = 'SOFTMOE'``, DER.gin:32-37).
Each cell is one game x one head, its seeds vmapped in one program (``runs.seeds``), trained by
``jaxlab.experiment.train`` for ``--agent_steps`` agent steps (Atari 100k: 100k agent steps =
400k frames, the random warm-up included, as Dopamine counts them).

Reported as Dopamine reports Atari 100k (``labs/atari_100k/atari_100k_runner.py``):

* ``eval_return``: after the last update, the mean whole-game score of ``--eval_episodes``
  fresh environments, one game each, at epsilon 0.001 (``Eval/AverageReturns``, what the papers
  report at 100k; :mod:`jaxlab.rl.atari_play`), per run;
* ``train_iterations``: per 10k-agent-step iteration (``Runner.training_steps = 10000``,
  DER.gin:50) the mean score of the training episodes that ended in it (``Train/AverageReturns``);
  exact while a run has completed at most ``RETURN_WINDOW`` episodes (the task keeps a ring of the
  last 100), after which the row holds the mean of the last 100 episodes and says so;
* human-normalised scores (:func:`jaxlab.rl.atari_scores.human_normalized`) and, per head, their
  IQM over runs x games with a 95% stratified-bootstrap CI (:func:`~jaxlab.rl.atari_scores.iqm_with_ci`).

  python benchmarks/rl_der_study.py --measure                  # s per 1k agent steps, dense vs softmoe
  python benchmarks/rl_der_study.py                            # the study (resumable: finished cells are skipped)
  python benchmarks/rl_der_study.py --games=Pong,Breakout --seeds=3 --agent_steps=100000
  python benchmarks/rl_der_study.py --report_only              # rebuild the JSON and plot from the cell files
  python benchmarks/rl_der_study.py --backend=ale_py           # ale-py's emulator (no frame at reset, 3 MB wheel)
  python benchmarks/rl_der_study.py --size=tiny --agent_steps=300 --eval_episodes=2 \
      --workdir=<tmp>/der --out=<tmp>/der.json                 # smoke run (toy network, 25-step episodes)

Cells go to ``<workdir>/cells/<game>__<head>.json`` as they finish (their trainer workdirs, with
checkpoints, beside them: a killed cell resumes); ``--out`` (default ``der_study.json`` in
``benchmarks/results/rl``; written by a run, none committed yet) and its ``.png`` are rebuilt from
the cell files.

Cost (``--measure``; ``benchmarks/results/rl/der_cost.json`` and ``der_cost_3_seeds.json``): on the
2-core CPU of this work a 100k-step cell of three seeds is 30-43 hours, so the study is meant for an
accelerator (``benchmarks/accelerator.sh``: its cost there and what cells fit its box, on ale-py).

The config: ``configs/dqn_atari.py:der`` (DER.gin's values; its protocol table is on the Soft-MoE
RL methods page), with the game, the head, the budget and the seeds set here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from jaxlab.errors import InputError  # noqa: E402
from jaxlab.rl.atari_scores import (ATARI_100K_GAMES, check_atari_100k_game, human_normalized,  # noqa: E402
                                    iqm_with_ci)

HEADS = ("dense", "softmoe")
ITERATION_STEPS = 10_000  # Runner.training_steps, DER.gin:50: one Dopamine iteration, in agent steps
DEFAULT_GAMES = ("Boxing", "Breakout")
BASE_CONFIG = "dqn_atari:der"

# ---------------------------------------------------------------- configs

def cell_config(game: str, head: str, *, agent_steps: int, seeds: int, size: str, eval_episodes: int,
                backend: str = "envpool", step_via: str = "auto") -> Any:
  """The trainer config of one cell: the ``der`` preset for this game, head, budget and seeds.

  Args:
    game: an Atari 100k game.
    head: "dense" or "softmoe".
    agent_steps: the budget in agent steps, the random warm-up included (Atari 100k: 100k).
    seeds: vmapped runs.
    size: "real" (DER's network) or "tiny" (toy head, 25-step episodes, a small warm-up: a smoke run).
    eval_episodes: evaluation environments per run after the last update (Dopamine: 100).
    backend: the emulator, ``env.backend`` ("envpool" or "ale_py", :mod:`jaxlab.rl.atari`).
    step_via: how the program steps it, ``env.step_via`` ("auto", "xla" or "callback").

  Returns:
    The config.
  """
  from jaxlab.config_files import load_config  # noqa: PLC0415

  c = load_config(BASE_CONFIG)
  c.name = f"rl_der_study/{game}/{head}"
  c.env.name = game
  c.env.backend = backend
  c.env.step_via = step_via
  c.network.head = head
  if head == "dense":
    c.network.width, c.network.width_multiplier = 512, 1  # NatureDQN's / Rainbow's Dense 512
  warmup = c.dqn.min_replay_history
  if size == "tiny":
    c.network.expert_hidden, c.network.width = 16, 16
    c.env.max_episode_steps = 25
    warmup = c.dqn.min_replay_history = min(64, agent_steps // 2)
    c.dqn.epsilon_decay_period = max(1, agent_steps // 4)
    c.dqn.target_update_period = 32
  # one update per agent step (update_period 1) after the warm-up's warmup + n agent steps (dqn_atari's
  # prefill: the newest n slots have no n-step successor yet)
  prefill = warmup + c.dqn.update_horizon
  steps_per_call = 8 if size == "tiny" else 200
  num_steps = (agent_steps - prefill) // steps_per_call * steps_per_call
  if num_steps <= 0:
    raise InputError(f"--agent_steps={agent_steps} leaves no updates after the {prefill} agent steps of warm-up "
                     f"(dqn.min_replay_history + dqn.update_horizon) in calls of {steps_per_call}; allowed: >= {prefill + steps_per_call}")
  c.num_steps = num_steps
  c.steps_per_call = steps_per_call
  iteration = ITERATION_STEPS if size == "real" else max(steps_per_call, num_steps // 3)
  c.log_every = max(steps_per_call, iteration // steps_per_call * steps_per_call)
  c.eval_every, c.eval_offset = num_steps, 0  # after the last update only (the number Atari 100k reports)
  c.checkpoint_every = max(steps_per_call, min(num_steps, 25_000) // steps_per_call * steps_per_call)
  c.dqn.replay_capacity = agent_steps + 8  # every transition stays (DER.gin:53: 1M, "a proxy for unbounded")
  c.runs.seeds = seeds
  if seeds > 1:  # the task refuses no-op starts with vmapped runs (their emulators step together): none here
    c.env.max_noops = 0
  c.mesh = (("data", 1), ("model", 1))  # one device: envpool steps inside the program
  c.dqn.eval_episodes = eval_episodes
  return c


# ---------------------------------------------------------------- one cell

def train_iterations(rows: list[dict[str, Any]], runs: int, window: int) -> list[dict[str, Any]]:
  """Dopamine's ``Train/AverageReturns`` per logged iteration from the task's logged metrics.

  Between two log rows the episodes that ended are ``episodes - episodes_before``; their mean
  return is ``(R * E - R' * E') / (E - E')`` with ``R`` the logged mean of the last
  ``min(E, window)`` episodes, exact while ``E <= window``.

  Args:
    rows: the trainer's metrics rows (``agent_steps``, ``episodes``, ``episode_return`` per run).
    runs: vmapped runs.
    window: the task's ring size (``RETURN_WINDOW``).

  Returns:
    One ``{"agent_steps", "episodes", "average_return", "exact"}`` per row (values per run);
    ``exact`` False where the row falls back to the last-``window`` mean.
  """
  out, e_prev, s_prev = [], np.zeros(runs), np.zeros(runs)
  for r in rows:
    if "episodes" not in r:
      continue
    e = np.broadcast_to(np.asarray(r["episodes"], np.float64).reshape(-1), (runs,))
    m = np.broadcast_to(np.asarray(r["episode_return"], np.float64).reshape(-1), (runs,))
    s = np.where(e > 0, np.nan_to_num(m) * e, 0.0)
    new = e - e_prev
    exact = e <= window
    avg = np.where(exact & (new > 0), (s - s_prev) / np.maximum(new, 1), np.where(exact, np.nan, m))
    steps = np.asarray(r["agent_steps"]).reshape(-1)
    out.append({"agent_steps": int(steps[0]), "episodes": [int(x) for x in new],
                "average_return": [None if np.isnan(x) else float(x) for x in avg],
                "exact": bool(np.all(exact))})
    e_prev, s_prev = e, s
  return out


def _per_run(value: Any, runs: int) -> list[float]:
  v = np.asarray(value, np.float64).reshape(-1)
  return [float(x) for x in (v if v.size == runs else np.repeat(v, runs))]


def run_cell(game: str, head: str, args: argparse.Namespace) -> dict[str, Any]:
  """Trains one cell (its seeds vmapped) and returns its record."""
  import jax  # noqa: PLC0415
  from jaxlab.rl.episode_returns import RETURN_WINDOW  # noqa: PLC0415
  from jaxlab.train.metrics_writer import read_metrics  # noqa: PLC0415
  from jaxlab.experiment import train  # noqa: PLC0415

  c = cell_config(game, head, agent_steps=args.agent_steps, seeds=args.seeds, size=args.size,
                  eval_episodes=args.eval_episodes, backend=args.backend, step_via=args.step_via)
  workdir = os.path.join(args.workdir, game, head)
  t0 = time.perf_counter()
  s = train(c, workdir, devices=jax.devices()[:1], progress=False).summary
  wall = time.perf_counter() - t0
  runs = s["runs"]
  rows = read_metrics(workdir)
  last = [r for r in rows if "agent_steps" in r][-1]
  eval_return = _per_run(s["eval_return"], runs)
  return {
      "game": game, "head": head, "size": args.size, "seeds": runs, "config": BASE_CONFIG,
      "agent_steps": int(np.asarray(last["agent_steps"]).reshape(-1)[0]), "agent_steps_budget": args.agent_steps,
      "frames": int(np.asarray(last["frames"]).reshape(-1)[0]), "updates": int(s["steps"]),
      "parameters": s["parameters"], "network": c.network.to_dict(), "dqn": c.dqn.to_dict(), "env": c.env.to_dict(),
      "eval_return": eval_return,
      "eval_episodes": _per_run(s["eval_episodes"], runs), "eval_capped": _per_run(s["eval_capped"], runs),
      "human_normalized": [float(human_normalized(game, x)) for x in eval_return],
      "train_iterations": train_iterations(rows, runs, RETURN_WINDOW),
      "final_loss": _per_run(s["final_loss"], runs),
      "steps_per_sec_all_runs": float(np.mean(s["steps_per_sec"])),
      "s_per_1k_agent_steps": 1000.0 / float(np.mean(s["steps_per_sec"])),
      "wall_time_s": wall, "load_average": os.getloadavg()[0],
  }


def _cell_path(workdir: str, game: str, head: str) -> str:
  return os.path.join(workdir, "cells", f"{game}__{head}.json")


def run_study(args: argparse.Namespace, deadline: float | None = None) -> dict[str, Any]:
  """Trains every unfinished cell (games outer, heads inner), then writes the JSON and plot.

  Args:
    args: the parsed command line.
    deadline: ``time.monotonic()`` after which no cell starts; one that would not finish before it
      (judged by the longest cell so far) is skipped and listed under ``skipped``.

  Returns:
    The study's record (what ``--out`` holds).
  """
  skipped, longest = [], 0.0
  for game in args.games:
    for head in args.heads:
      path = _cell_path(args.workdir, game, head)
      if os.path.exists(path):
        print(f"{game}/{head}: done, skipped", flush=True)
        continue
      if args.report_only:
        continue
      if deadline is not None and time.monotonic() + longest > deadline:
        skipped.append(f"{game}/{head}")
        continue
      t0 = time.monotonic()
      record = run_cell(game, head, args)
      longest = max(longest, time.monotonic() - t0)
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
      os.replace(path + ".tmp", path)  # a cell file is whole or absent
      print(f"{game}/{head}: {record['wall_time_s']:.0f} s, eval {np.mean(record['eval_return']):.1f} "
            f"(HNS {np.mean(record['human_normalized']):.3f})", flush=True)
  result = report(args, skipped)
  return result


# ---------------------------------------------------------------- report

def report(args: argparse.Namespace, skipped: list[str]) -> dict[str, Any]:
  """The study's JSON (``--out``) and plot from the finished cell files."""
  cells = {}
  for game in args.games:
    for head in args.heads:
      path = _cell_path(args.workdir, game, head)
      if os.path.exists(path):
        with open(path) as f:
          cells[f"{game}/{head}"] = json.load(f)
  # IQM over the games every head finished, so that the heads are compared on the same games
  games = [g for g in args.games if all(f"{g}/{h}" in cells for h in args.heads)]
  iqm = {}
  if games:
    scores = {h: np.stack([cells[f"{g}/{h}"]["human_normalized"] for g in games], axis=1) for h in args.heads}
    iqm = iqm_with_ci(scores, games=games)
    for h in args.heads:
      iqm[h]["games"] = games
  result = {
      "study": "Atari 100k, DER vs DER + Soft MoE (4 experts)",
      "budget": {"agent_steps": args.agent_steps, "frames": 4 * args.agent_steps, "games": list(args.games),
                 "seeds": args.seeds, "heads": list(args.heads), "size": args.size,
                 "eval_episodes": args.eval_episodes, "backend": args.backend},
      "protocol": ("eval_return: mean whole-game score of eval_episodes fresh environments (one game each, epsilon "
                   "0.001) after the last update, per run (Dopamine's Eval/AverageReturns, "
                   "labs/atari_100k/atari_100k_runner.py:425-468 @ 5873f54); human_normalized: (score - random) / "
                   "(human - random), jaxlab.rl.atari_scores; iqm: over runs x games of the games every head "
                   "finished, 95% stratified-bootstrap CI (rliable, 2000 reps); train_iterations: mean score of "
                   "the training episodes that ended in each logged iteration (Train/AverageReturns)"),
      "config": BASE_CONFIG, "cells": cells, "iqm_human_normalized": iqm,
      "skipped": skipped, "not_run": [f"{g}/{h}" for g in args.games for h in args.heads if f"{g}/{h}" not in cells],
      "compute_s": sum(c["wall_time_s"] for c in cells.values()),
  }
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1)
  if cells:
    _plot(result, os.path.splitext(args.out)[0] + ".png")
  return result


def _plot(result: dict[str, Any], path: str) -> None:
  import matplotlib  # noqa: PLC0415
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  heads, games = result["budget"]["heads"], result["budget"]["games"]
  fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
  width = 0.8 / len(heads)
  for i, h in enumerate(heads):
    for j, g in enumerate(games):
      cell = result["cells"].get(f"{g}/{h}")
      if cell is None:
        continue
      v = np.asarray(cell["human_normalized"])
      x = j + (i - (len(heads) - 1) / 2) * width
      ax.bar(x, v.mean(), width, color=f"C{i}", alpha=0.6, label=h if j == 0 else None)
      ax.plot(np.full(v.size, x), v, "k.", ms=4)
  ax.set_xticks(range(len(games)), games)
  ax.set(ylabel="human-normalised eval score", title=f"Atari {result['budget']['agent_steps'] // 1000}k: per game "
         "(bars: mean, dots: seeds)")
  ax.axhline(0, color="gray", lw=0.5)
  ax.legend(fontsize=8)
  for i, h in enumerate(heads):
    q = result["iqm_human_normalized"].get(h)
    if q:
      bx.errorbar(i, q["iqm"], yerr=[[q["iqm"] - q["ci_low"]], [q["ci_high"] - q["iqm"]]], fmt="o", capsize=4,
                  color=f"C{i}")
  bx.set_xticks(range(len(heads)), heads)
  bx.set(ylabel="IQM human-normalised score", title="IQM, 95% stratified-bootstrap CI")
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


# ---------------------------------------------------------------- measure

def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
  """Seconds per 1k agent steps (one update each) of each head, from the trainer's own timer.

  ``--measure_steps`` updates in two calls; the trainer leaves the first, compiling call out of
  its rate. No evaluation.
  """
  steps = args.measure_steps
  import tempfile  # noqa: PLC0415

  import jax  # noqa: PLC0415
  from jaxlab.experiment import train  # noqa: PLC0415

  rows = []
  for head in args.heads:
    c = cell_config(args.games[0], head, agent_steps=2000 + steps, seeds=args.seeds, size=args.size,
                    eval_episodes=0, backend=args.backend, step_via=args.step_via)  # a replay that holds the run
    c.steps_per_call = steps // 2
    c.num_steps = c.log_every = c.eval_every = c.checkpoint_every = steps
    with tempfile.TemporaryDirectory(prefix="der_measure_") as tmp:
      t0 = time.perf_counter()
      s = train(c, tmp, devices=jax.devices()[:1], progress=False).summary
    rate = float(np.mean(s["steps_per_sec"]))
    row = {"game": args.games[0], "head": head, "size": args.size, "seeds": args.seeds, "backend": args.backend,
           "parameters": s["parameters"],
           "updates_timed": steps // 2, "s_per_1k_agent_steps": 1000.0 / rate,
           "wall_s_incl_compile_and_warmup": time.perf_counter() - t0, "load_average": os.getloadavg()[0]}
    rows.append(row)
    print(json.dumps(row), flush=True)
  import platform  # noqa: PLC0415
  record = {"what": "s per 1k agent steps of configs/dqn_atari.py:der (one update per agent step, batch 32), "
                    "dense vs Soft-MoE head, from the trainer's rate (the compiling first call left out)",
            "command": "python benchmarks/rl_der_study.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}",
            "jax": jax.__version__, "rows": rows}
  os.makedirs(os.path.dirname(os.path.abspath(args.measure_out)), exist_ok=True)
  with open(args.measure_out, "w") as f:
    json.dump(record, f, indent=1)
  return rows


# ---------------------------------------------------------------- main

def _refuse(message: str) -> None:
  """A bad command line: one line on stderr, exit status 2."""
  print(f"benchmarks/rl_der_study.py: {message}", file=sys.stderr)
  raise SystemExit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
  """The command line (see the module docstring), checked: a bad value exits with one line."""
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--games", default=",".join(DEFAULT_GAMES), help="comma-separated Atari 100k games")
  p.add_argument("--seeds", type=int, default=3, help="vmapped runs per cell")
  p.add_argument("--agent_steps", type=int, default=100_000, help="agent steps per run, warm-up included")
  p.add_argument("--heads", default=",".join(HEADS), help=f"comma-separated subset of {','.join(HEADS)}")
  p.add_argument("--size", default="real", choices=("real", "tiny"))
  p.add_argument("--backend", default="envpool", choices=("envpool", "ale_py"),
                 help="the emulator (env.backend): envpool, or ale-py's vector env (3 MB wheel, no frame at reset)")
  p.add_argument("--step_via", default="auto", choices=("auto", "xla", "callback"),
                 help="env.step_via: the pool's FFI in the program (xla) or io_callback; auto: xla on one device")
  p.add_argument("--eval_episodes", type=int, default=100, help="evaluation games per run (Dopamine: 100)")
  p.add_argument("--workdir", default="runs/rl_der_study", help="cell files and trainer workdirs")
  p.add_argument("--out", default=os.path.join("benchmarks", "results", "rl", "der_study.json"))
  p.add_argument("--report_only", action="store_true")
  p.add_argument("--measure", action="store_true", help="s per 1k agent steps of each head, then stop")
  p.add_argument("--measure_steps", type=int, default=400, help="--measure: updates, in two calls (even)")
  p.add_argument("--measure_out", default=os.path.join("benchmarks", "results", "rl", "der_cost.json"),
                 help="--measure: where the rows go")
  args = p.parse_args(argv)
  args.games = tuple(g for g in args.games.split(",") if g)
  args.heads = tuple(h for h in args.heads.split(",") if h)
  if not args.games:
    _refuse(f"--games is empty; choose from {', '.join(ATARI_100K_GAMES)}")
  for g in args.games:
    try:
      check_atari_100k_game(g, "--games")
    except InputError as e:
      _refuse(str(e))
  bad = [h for h in args.heads if h not in HEADS]
  if bad or not args.heads:
    _refuse(f"--heads={','.join(args.heads)!r}: unknown {bad}; allowed: {', '.join(HEADS)}")
  for name in ("seeds", "agent_steps", "eval_episodes", "measure_steps"):
    if getattr(args, name) < 1:
      _refuse(f"--{name}={getattr(args, name)}: must be >= 1")
  if args.measure_steps % 2:
    _refuse(f"--measure_steps={args.measure_steps}: must be even (two calls, the second timed)")
  return args


def main(argv: list[str] | None = None) -> int:
  """Runs the study (or ``--measure``) as the command line says; returns the exit status."""
  args = parse_args(argv)
  try:
    cell_config(args.games[0], args.heads[0], agent_steps=args.agent_steps, seeds=args.seeds, size=args.size,
                eval_episodes=args.eval_episodes, backend=args.backend, step_via=args.step_via)
  except InputError as e:
    _refuse(str(e))
  if args.measure:
    measure(args)
    return 0
  result = run_study(args)
  iqm = result["iqm_human_normalized"]
  for h, q in iqm.items():
    print(f"{h}: IQM HNS {q['iqm']:.3f} [{q['ci_low']:.3f}, {q['ci_high']:.3f}] over {q['runs']} runs x "
          f"{len(q['games'])} games", flush=True)
  print(f"wrote {args.out}", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
