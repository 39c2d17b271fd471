r"""DPOT study on CPU through the trainer: DPOT vs FNO, denoising, pre-training + fine-tuning.

Hao et al., "DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
Pre-Training", ICML 2024. The cells are in ``configs/dpot_study.py``; each is a trainer config
(the ``pde_operator`` task) trained by ``jaxlab.experiment.train`` in
``<workdir>/<cell>[/seed<i>]``, its summary appended to ``<out_dir>/study.json`` (finished cells
are skipped on rerun; a killed cell resumes from its checkpoints). Then ``study_table.md`` and
a rollout plot of one NS test trajectory (prediction, truth, error over time).

  nice -n 5 python benchmarks/dpot_study.py --config=configs/dpot_study.py
  python benchmarks/dpot_study.py --config=configs/dpot_study.py --report_only
  nice -n 5 python benchmarks/dpot_study.py --config=configs/dpot_study.py --vmap_check   # seeds: vmap or not

Data: ``$JAXLAB_DATA_DIR`` (generated on first use).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from typing import Any

from absl import app, flags, logging
import jax
import ml_collections
from ml_collections import config_flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from configs import dpot_pde  # noqa: E402
from jaxlab.tasks.pde_data import (channels_of, evaluation_data, load_datasets, pad_value,  # noqa: E402
                                         served_sets)
from jaxlab.tasks.pde_model import build_model  # noqa: E402
from jaxlab.pde.rollout import rollout  # noqa: E402
from jaxlab.experiment import train  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", "configs/dpot_study.py", "study config")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "only rebuild the table and plot from study.json")
_CELLS = flags.DEFINE_list("cells", None, "run only these cells (default: all, in order)")
_VMAP_CHECK = flags.DEFINE_bool("vmap_check", False, "time 3 seeds vmapped vs one after another, then stop")
_REEVALUATE = flags.DEFINE_list("reevaluate", None, "re-run the evaluation of these finished cells "
                                 "from their checkpoints (after a fix to the evaluation) and update study.json")
_VMAP_STEPS = flags.DEFINE_integer("vmap_steps", 100, "steps per run in --vmap_check")


# ---------------------------------------------------------------- configs

def _merge(config: ml_collections.ConfigDict, settings: Any) -> None:
  """Sets ``settings`` into ``config``; nested dicts merge key by key, anything else replaces."""
  for key, value in dict(settings).items():
    if isinstance(value, (dict, ml_collections.ConfigDict)) and key in config and \
        isinstance(config[key], ml_collections.ConfigDict) and key != "model":
      _merge(config[key], value)
    else:
      with config.unlocked():
        config[key] = value.to_dict() if isinstance(value, ml_collections.ConfigDict) else copy.deepcopy(value)


def cell_config(study: Any, name: str, seed: int = 0) -> ml_collections.ConfigDict:
  """The trainer config of cell ``name`` (``configs/dpot_pde.py`` + ``study.base`` + the cell's settings)."""
  c = dpot_pde.get_config()
  _merge(c, study.base)
  cell = study.cells[name]
  _merge(c, cell.set)
  c.model = ml_collections.ConfigDict(c.model)
  c.name, c.seed = name, seed
  if cell.after:
    c.init_from.workdir = run_dir(study, cell.after, 0, vmapped=False)
  return c


def run_dir(study: Any, name: str, seed: int, vmapped: bool) -> str:
  return os.path.join(study.workdir, name) if vmapped else os.path.join(study.workdir, name, f"seed{seed}")


def _seeds(study: Any, name: str) -> int:
  return study.cells[name].seeds or study.seeds


def _vmapped(study: Any, name: str) -> bool:
  # fine-tuning starts (init_from) are single runs in the trainer
  return bool(study.vmap_seeds) and _seeds(study, name) > 1 and not study.cells[name].after


# ---------------------------------------------------------------- cells

def _per_seed(summary: dict[str, Any], key: str, runs: int) -> list[float]:
  v = np.asarray(summary[key], np.float64).reshape(-1)
  return [float(x) for x in (v if v.size == runs else np.repeat(v, runs))]


def run_cell(study: Any, name: str) -> dict[str, Any]:
  """Trains every seed of one cell; returns its record for study.json."""
  seeds = _seeds(study, name)
  summaries, vmapped = [], _vmapped(study, name)
  t0 = time.perf_counter()
  if vmapped:
    c = cell_config(study, name)
    c.runs.seeds = seeds
    summaries.append(train(c, run_dir(study, name, 0, True), progress=False).summary)
  else:
    for s in range(seeds):
      summaries.append(train(cell_config(study, name, s), run_dir(study, name, s, False), progress=False).summary)
  wall = time.perf_counter() - t0
  metrics: dict[str, list[float]] = {}
  for summary in summaries:
    runs = summary["runs"]
    for key in summary:
      if key.startswith("l2re_") or key in ("final_loss", "nonfinite_skipped"):
        metrics.setdefault(key, []).extend(_per_seed(summary, key, runs))
  cell = study.cells[name]
  c = cell_config(study, name)
  return {
      "cell": name, "group": cell.group, "what": cell.what, "seeds": seeds, "vmapped_seeds": vmapped,
      "model": c.model.to_dict(), "noise_scale": c.noise_scale, "num_steps": c.num_steps,
      "batch_size": c.batch_size, "data": [dict(s) for s in c.data.sets], "init_from": cell.after,
      "parameters": summaries[0]["parameters"],
      "steps_per_sec": [float(np.mean(s["steps_per_sec"])) for s in summaries],
      "train_time_s_per_seed": float(np.mean([c.num_steps / np.mean(s["steps_per_sec"]) / (seeds if vmapped else 1)
                                              for s in summaries])),
      "wall_time_s": wall,
      "protocol": protocol(c),
      **metrics,
  }


def protocol(c: ml_collections.ConfigDict) -> dict[str, Any]:
  """What a cell's numbers mean: served frames, test horizons, mixture rule, padding, optimizer."""
  sets = served_sets(c)
  return {"keep_w0": bool(c.data.get("keep_w0", False)), "t_in": c.t_in,
          "frames": {s.spec.name: s.num_frames for s in sets}, "t_test": {s.spec.name: s.t_test for s in sets},
          "mixture_rule": c.data.get("mixture_rule"), "channel_padding": c.data.get("channel_padding"),
          "optimizer": c.optimizer.to_dict()}


def reevaluate(study: Any, name: str, record: dict[str, Any]) -> dict[str, Any]:
  """``record`` with its L2RE lists recomputed from each seed's final checkpoint (nothing trained)."""
  from jaxlab.experiment import task_context  # noqa: PLC0415
  from jaxlab.tasks import make_task  # noqa: PLC0415
  check_vmapped = _vmapped(study, name)
  if check_vmapped:
    raise SystemExit(f"--reevaluate handles sequential seeds only; {name} was vmapped")
  metrics: dict[str, list[float]] = {}
  for s in range(_seeds(study, name)):
    c = cell_config(study, name, s)
    state = train(c, run_dir(study, name, s, False), progress=False).state  # restored, nothing trained
    values = jax.jit(make_task(c, task_context(c)).evaluate)(state, jax.random.key(0))
    for key, v in values.items():
      metrics.setdefault(key, []).append(float(v))
  return {**record, **metrics, "reevaluated": True}


def vmap_check(study: Any, out: str) -> None:
  """Samples/s of 3 seeds vmapped in one program vs 3 runs one after another (same steps), DPOT and FNO."""
  import tempfile  # noqa: PLC0415
  rows = []
  for name in ("a_dpot_nu1e-3", "a_fno_nu1e-3"):
    for vmapped in (True, False):
      t0 = time.perf_counter()
      rates = []
      for s in range(1 if vmapped else 3):
        c = cell_config(study, name, s)
        c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = (_VMAP_STEPS.value,) * 4
        c.data.eval_trajectories = 1
        if vmapped:
          c.runs.seeds = 3
        rates.append(train(c, tempfile.mkdtemp(), progress=False).summary["steps_per_sec"])
      wall = time.perf_counter() - t0
      samples = float(np.mean(rates)) * c.batch_size * (3 if vmapped else 1)
      rows.append({"cell": name, "vmapped": vmapped, "seeds": 3, "steps": _VMAP_STEPS.value,
                   "samples_per_sec_all_seeds": samples, "wall_time_s_incl_compile": wall,
                   "load_average": os.getloadavg()[0]})
      print(json.dumps(rows[-1]))
  with open(os.path.join(out, "seeds_vmap.json"), "w") as f:
    json.dump(rows, f, indent=1)


# ---------------------------------------------------------------- report

def _load(path: str) -> dict[str, Any]:
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  return {}


def _fmt(values: list[float] | None) -> str:
  if not values:
    return "-"
  v = np.asarray(values)
  return f"{v.mean():.4f} ± {v.std():.4f}" if len(v) > 1 else f"{v.mean():.4f}"


def report(study: Any, results: dict[str, Any]) -> str:
  lines = ["# DPOT study (CPU)", "",
           "L2RE = mean over test trajectories of ||pred - y|| / ||y|| (norms over x, y and time); "
           "1-step: first predicted frame from true inputs; rollout: the set's t_test frames after the t_in "
           "inputs, auto-regressive (DPOT's protocol: 20 / 20 / 10 frames of FNO's u for NS nu = 1e-3 / 1e-4 / "
           "1e-5, every remaining frame for other sets; each record's `protocol` in study.json says which). "
           "Mean ± std over seeds.", "",
           "| cell | what | data set | params | steps x batch | seeds | 1-step L2RE | rollout L2RE | "
           "train s / seed | wall s (all seeds) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  total = 0.0
  for name in study.order:
    r = results.get(name)
    if r is None:
      lines.append(f"| {name} | {study.cells[name].what} | (not run) | | | | | | | |")
      continue
    total += r["wall_time_s"]
    sets = sorted(k.split("/", 1)[1] for k in r if k.startswith("l2re_rollout/"))
    for i, s in enumerate(sets):
      head = (f"| {name} | {r['what']} | " if i == 0 else "| | | ")
      tail = (f" | {r['parameters']:,} | {r['num_steps']} x {r['batch_size']} | {r['seeds']} | " if i == 0
              else " | | | | ")
      end = f" | {r['train_time_s_per_seed']:.0f} | {r['wall_time_s']:.0f} |" if i == 0 else " | | |"
      lines.append(head + s + tail + _fmt(r.get(f"l2re_1step/{s}")) + " | " + _fmt(r.get(f"l2re_rollout/{s}")) + end)
  lines += ["", f"Compute used by the cells: {total / 60:.1f} min wall (training, compilation, evaluation, "
            "checkpoints; data generation not included)."]
  return "\n".join(lines) + "\n"


def plot_rollout(study: Any, out: str) -> str | None:
  """Prediction, truth and error over time for one NS 1e-3 test trajectory, one row pair per model."""
  import matplotlib  # noqa: PLC0415
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  preds, truth, x0 = {}, None, None
  for name in study.plot_cells:
    if name not in study.cells:
      continue
    vmapped = _vmapped(study, name)
    c = cell_config(study, name)
    if vmapped:
      c.runs.seeds = _seeds(study, name)
    workdir = run_dir(study, name, 0, vmapped)
    if not os.path.isdir(os.path.join(workdir, "checkpoints")):
      continue
    params = train(c, workdir, progress=False).state.params  # a finished run: restored, nothing trained
    if vmapped:
      params = jax.tree.map(lambda p: p[0], params)
    datasets = load_datasets(c)
    channels = channels_of(c)
    e = next(iter(evaluation_data(c, datasets, channels).values()))  # the task's frames and t_test
    i = study.plot_trajectory
    model = build_model(c, channels)
    y = e["y"][i:i + 1]
    preds[name] = np.asarray(jax.jit(rollout, static_argnums=(0, 3, 4, 6))(
        model.apply, params, e["x"][i:i + 1], y.shape[3], c.t_out, e["channel_mask"][i:i + 1],
        pad_value(c)))[0, ..., 0]
    truth, x0 = y[0, ..., 0], e["x"][i, ..., 0]
  if not preds:
    return None
  steps = truth.shape[2]
  show = sorted({0, steps // 4, steps // 2, 3 * steps // 4, steps - 1})
  rows = 1 + 2 * len(preds)
  fig = plt.figure(figsize=(2.2 * len(show) + 3.2, 2.1 * rows))
  grid = fig.add_gridspec(rows, len(show) + 1, width_ratios=[1] * len(show) + [1.5])
  lim = float(np.abs(truth).max())
  err_lim = max(float(np.abs(p - truth).max()) for p in preds.values())
  labels = [("truth", None, truth)]
  for name, p in preds.items():
    labels += [(f"{name}\nprediction", name, p), (f"{name}\n|error|", name, np.abs(p - truth))]
  for r, (label, _, field) in enumerate(labels):
    for j, t in enumerate(show):
      ax = fig.add_subplot(grid[r, j])
      is_err = "error" in label
      ax.imshow(field[..., t].T, origin="lower", cmap="magma" if is_err else "RdBu_r",
                vmin=0 if is_err else -lim, vmax=err_lim if is_err else lim)
      ax.set_xticks([]), ax.set_yticks([])
      if r == 0:
        ax.set_title(f"step {t + 1} (frame {t + x0.shape[-1]})", fontsize=8)
      if j == 0:
        ax.set_ylabel(label, fontsize=7)
  ax = fig.add_subplot(grid[:, -1])
  for name, p in preds.items():
    err = np.sqrt(((p - truth) ** 2).sum(axis=(0, 1))) / np.sqrt((truth ** 2).sum(axis=(0, 1)))
    ax.plot(np.arange(1, steps + 1), err, label=name)
  ax.set(xlabel="rollout step", ylabel="relative L2 error of the frame", yscale="log",
         title="error growth, this trajectory")
  ax.legend(fontsize=7)
  fig.suptitle(f"NS nu=1e-3, test trajectory {study.plot_trajectory}: {steps}-step auto-regressive rollout "
               f"from {x0.shape[-1]} true frames", fontsize=9)
  fig.tight_layout()
  path = os.path.join(out, "rollout_ns1e-3.png")
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


# ---------------------------------------------------------------- main

def main(argv: list[str]) -> None:
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  study = _CONFIG.value
  out = study.out_dir
  os.makedirs(out, exist_ok=True)
  if _VMAP_CHECK.value:
    vmap_check(study, out)
    return
  path = os.path.join(out, "study.json")
  results = _load(path)
  for name in _REEVALUATE.value or ():
    results[name] = reevaluate(study, name, results[name])
    with open(path, "w") as f:
      json.dump(results, f, indent=1)
    print(f"{name} re-evaluated:", {k: _fmt(v) for k, v in results[name].items() if k.startswith("l2re_")}, flush=True)
  if not _REPORT_ONLY.value and not _REEVALUATE.value:
    for name in (_CELLS.value or list(study.order)):
      if name in results:
        print(f"{name}: done, skipped")
        continue
      after = study.cells[name].after
      if after and after not in results:
        raise SystemExit(f"cell {name} fine-tunes from {after}, which has not run yet")
      t = time.perf_counter()
      results[name] = run_cell(study, name)
      results[name]["load_average"] = os.getloadavg()[0]
      with open(path, "w") as f:
        json.dump(results, f, indent=1)
      print(f"{name}: {time.perf_counter() - t:.0f} s", {k: _fmt(v) for k, v in results[name].items()
                                                          if k.startswith("l2re_rollout")}, flush=True)
  with open(os.path.join(out, "study_table.md"), "w") as f:
    f.write(report(study, results))
  print(report(study, results))
  print("plot:", plot_rollout(study, out))


if __name__ == "__main__":
  app.run(main)
