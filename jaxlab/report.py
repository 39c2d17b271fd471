r"""Results as a researcher reads them: ``python -m jaxlab.report WORKDIR [WORKDIR ...]``.

Reads each workdir's ``metrics.jsonl`` and the config saved beside its newest checkpoint (for the
task and the run labels, ``seed=3,lr=0.1``), then writes into the folder ``--out`` (default
``report`` in the current directory, made if missing; never inside a workdir unless ``--out`` points
there):

* ``<out>/report.md``: per run (seed / swept value), each metric's final and best value; per setting (the
  runs that differ only in their seed), the mean over seeds of the final values with a 95%
  Student-t CI and the count of finite values it was taken over (one seed: its value and ``n=1``,
  no interval), and for RL returns (metrics named ``*return``) the IQM with a 95%
  stratified-bootstrap CI (rliable, the ``rl`` extra);
* ``<out>/report.json``: the same numbers;
* ``<out>/curves.png``: learning curves, one line per run, the mean over seeds and its 95% CI as a band.

``--out`` names a folder. It used to be a file prefix (``--out=reports/dqn`` wrote
``reports/dqn.md``): that command now writes ``reports/dqn/report.md``, and says so when an
earlier ``reports/dqn.md`` is found beside it; an ``--out`` ending in ``.md`` / ``.json`` / ``.png``
is refused with the folder form to use.

Workdirs of one experiment only: the same task, and at least one metric in common. A seed of a
setting found in two workdirs (a copied run) counts once in the aggregates; a note says so.

  python -m jaxlab.report runs/mlp_seeds                      # report/report.md, report.json, curves.png
  python -m jaxlab.report runs/dqn_a runs/dqn_b --out=reports/dqn --metrics=eval_return,loss
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import math
import os
import re
import sys
from typing import Any, Sequence

import numpy as np

from jaxlab.errors import InputError, check, check_int
from jaxlab.registry import optional_imports
from jaxlab.train import workdir as workdir_lib
from jaxlab.train.checkpoint import BOOKKEEPING_KEYS

#: Config keys (``fnmatch`` patterns) that do not make two runs a different setting: the
#: bookkeeping and placement keys (``jaxlab.train.checkpoint.BOOKKEEPING_KEYS``, which a resumed run
#: may change too), and the seed and the runs of one program (``seed``, ``runs.*``), which tell the
#: seeds of a setting apart (a resumed run may not change them). ``num_steps`` is a setting here,
#: though a resumed run may change it: runs of another length are another experiment to compare.
#: The swept values of ``runs.sweep`` are added per run.
NOT_A_SETTING = ("seed", "runs.*") + BOOKKEEPING_KEYS
# The default metrics: results (losses, accuracies, errors, returns), not the logged counters, rates
# and diagnostics (grad_norm, opt/*, moe/*: shown when asked for with --metrics).
#: A metric is reported by default when a word of its name (between ``_`` / ``/`` or at its ends)
#: names a result, as in ``eval_return`` or ``l2re_rollout/ns_fno_nu1e-03``.
RESULT = re.compile(r"(^|[_/])(loss|accuracy|acc|error|mse|l2|l2re|nrmse|return|reward|score)([_/]|$)")
#: Metrics (``fnmatch`` patterns) never reported by default: counters, rates and diagnostics.
NOT_A_RESULT = ("step", "*_per_sec", "nonfinite_skipped", "grad_norm", "opt/*", "moe/*")
#: Metric names where lower is better (losses, errors); the best value of any other is its maximum.
LOWER_IS_BETTER = re.compile(r"loss|error|err$|mse|l2|nrmse|regret")
#: Bootstrap resamples of the IQM's confidence interval (:func:`iqm_ci`).
BOOTSTRAP_REPS = 2000


@dataclasses.dataclass
class Workdir:
  """One training workdir as read back: its rows, its saved config and its runs' labels."""
  path: str
  rows: list[dict[str, Any]]
  config: dict[str, Any] | None  # None: no readable saved config (checkpoints removed)
  labels: list[str]              # one per run, e.g. "seed=3,lr=0.1"
  hparams: list[dict[str, float]]  # one per run: the swept values

  @property
  def task(self) -> str | None:
    return None if self.config is None else self.config.get("task")

  def metric_names(self) -> list[str]:
    return sorted({k for r in self.rows for k in r if k != "step"})


# ---------------------------------------------------------------- reading

def _runs_of(config: dict[str, Any] | None, num_runs: int) -> tuple[list[str], list[dict[str, float]]]:
  """Labels and swept values per run, from the saved config (``run_<i>`` without one)."""
  if config is not None:
    import ml_collections  # noqa: PLC0415
    from jaxlab.experiment.context import runs_from_config  # noqa: PLC0415
    try:
      runs = runs_from_config(ml_collections.ConfigDict(config))
    except (InputError, TypeError, ValueError, AttributeError, KeyError):
      runs = None
    if runs is None and num_runs == 1:
      return [f"seed={config.get('seed', '?')}"], [{}]
    if runs is not None and runs.size == num_runs:
      return ([runs.label(i) for i in range(runs.size)],
              [{k: v[i] for k, v in runs.hparams.items()} for i in range(runs.size)])
  return [f"run_{i}" for i in range(num_runs)], [{} for _ in range(num_runs)]


def load_workdir(path: str) -> Workdir:
  """Reads one workdir (nothing is written).

  Args:
    path: a training workdir (holding ``metrics.jsonl``).

  Returns:
    The :class:`Workdir`.

  Raises:
    InputError: ``path`` is not a directory, holds no ``metrics.jsonl``, or that file is empty or
      not the trainer's JSON lines (a line that is not JSON, or a row without an integer ``step``:
      the message names the line).
  """
  if not os.path.isdir(path):
    raise InputError(f"workdir {path!r} does not exist (argument WORKDIR)")
  found = workdir_lib.Workdir(path)
  if not found.has_metrics:
    inner = [os.path.basename(w.path) for w in found.experiments() if w.has_metrics]
    hint = (f"; it holds the experiments {', '.join(inner)}: report those, e.g. {os.path.join(path, inner[0])}"
            if inner else "; pass the --workdir a training run wrote")
    raise InputError(f"workdir {path!r} has no metrics.jsonl (argument WORKDIR){hint}")
  try:
    rows = found.metrics()
  except (ValueError, UnicodeDecodeError) as e:
    raise InputError(f"{os.path.join(path, 'metrics.jsonl')} is not the trainer's JSON lines: {e}; "
                     "it must be the file the trainer wrote (argument WORKDIR)") from None
  if not rows:
    raise InputError(f"{os.path.join(path, 'metrics.jsonl')} holds no logged step yet (argument WORKDIR)")
  num_runs = max((len(v) for r in rows for v in r.values() if isinstance(v, list)), default=1)
  # the config of the newest checkpoint whose config reads (None: checkpoints removed)
  config = next((c for c in map(found.saved_config, reversed(found.steps())) if c is not None), None)
  labels, hparams = _runs_of(config, num_runs)
  return Workdir(path=path, rows=rows, config=config, labels=labels, hparams=hparams)


def _matches(key: str, patterns: Sequence[str]) -> bool:
  return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def check_same_experiment(workdirs: Sequence[Workdir], metrics: Sequence[str] | None = None) -> list[str]:
  """The metrics to report, after checking that ``workdirs`` are runs of one experiment.

  Args:
    workdirs: the loaded workdirs.
    metrics: the metrics asked for (``--metrics``); None: every result metric all workdirs log.

  Returns:
    The metric names, in order.

  Raises:
    InputError: (one line) the workdirs' tasks differ, they share no result metric, or a
      requested metric is missing from one of them.
  """
  tasks = {w.path: w.task for w in workdirs if w.task is not None}
  if len(set(tasks.values())) > 1:
    raise InputError("the workdirs are of different experiments (different task): "
                     + ", ".join(f"{p} ({t})" for p, t in tasks.items()) + "; report one experiment at a time")
  if metrics:
    for w in workdirs:
      missing = [m for m in metrics if m not in w.metric_names()]
      if missing:
        raise InputError(f"--metrics={','.join(metrics)}: {', '.join(missing)} not logged in {w.path} "
                         f"(it logs {', '.join(w.metric_names())})")
    return list(metrics)
  shared = [m for m in workdirs[0].metric_names() if not _matches(m, NOT_A_RESULT)]
  for w in workdirs[1:]:
    shared = [m for m in shared if m in w.metric_names()]
  shared = [m for m in shared if RESULT.search(m)] or shared
  if not shared:
    raise InputError("the workdirs are of different experiments (no metric in common): "
                     + "; ".join(f"{w.path} ({', '.join(w.metric_names())})" for w in workdirs)
                     + "; report one experiment at a time")
  return shared


# ---------------------------------------------------------------- aggregation

def curve(workdir: Workdir, metric: str) -> tuple[np.ndarray, np.ndarray]:
  """``(steps [points], values [points, runs])`` of one metric, non-finite values as NaN."""
  rows = [r for r in workdir.rows if metric in r]
  runs = len(workdir.labels)
  values = np.full((len(rows), runs), np.nan)
  for i, r in enumerate(rows):
    v = np.asarray(r[metric], np.float64).reshape(-1)
    values[i] = v if v.size == runs else np.repeat(v[:1], runs)
  return np.asarray([r["step"] for r in rows]), values


def lower_is_better(metric: str) -> bool:
  """Losses and errors are best when lowest; accuracies and returns when highest.

  Decided by the metric's name: by its first ``/``-separated part that names a result. A namespace
  before it does not (``train/loss``, ``eval/loss``: lowest is best), nor does a data set or a
  variant after it (``l2re_1step/ns``: a relative L2 error on the ``ns`` set, lowest is best;
  ``accuracy/loss_set``: highest is best).

  Examples:
    >>> from jaxlab.report import lower_is_better
    >>> [lower_is_better(m) for m in ("train/loss", "eval/accuracy", "l2re_1step/ns")]
    [True, False, True]
  """
  parts = metric.split("/")
  named = next((p for p in parts if RESULT.search(p) or LOWER_IS_BETTER.search(p)), parts[0])
  return bool(LOWER_IS_BETTER.search(named))


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> dict[str, float]:
  """Mean of the finite ``values`` and the half-width of its Student-t confidence interval.

  Args:
    values: one number per seed (NaN / inf are left out and not counted).
    confidence: of the interval.

  Returns:
    ``{"mean", "ci", "n"}``: ``n`` the count of finite values; ``ci`` NaN for ``n < 2``.
  """
  v = np.asarray(values, np.float64)
  v = v[np.isfinite(v)]
  n = int(v.size)
  if n == 0:
    return {"mean": float("nan"), "ci": float("nan"), "n": 0}
  if n == 1:
    return {"mean": float(v[0]), "ci": float("nan"), "n": 1}
  from scipy import stats  # noqa: PLC0415 - scipy comes with jax
  half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
  return {"mean": float(v.mean()), "ci": half, "n": n}


def iqm_ci(scores: np.ndarray, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> tuple[float, float, float]:
  """IQM of ``scores`` and its 95% stratified-bootstrap CI (rliable; Agarwal et al., NeurIPS 2021).

  Runs are resampled with replacement within each task (column), percentile interval.

  Args:
    scores: ``[runs, tasks]`` (one column: a plain bootstrap over runs).
    reps: bootstrap replicates, >= 1.
    seed: seeds numpy's global generator, which rliable draws from (its state is restored after).

  Returns:
    ``(iqm, ci_low, ci_high)``; the interval is NaN over a single run (resampling one run gives it
    back every time: a zero-width interval that is no confidence interval).
  """
  with optional_imports(f"{__name__}.iqm_ci"):
    from rliable import library, metrics  # noqa: PLC0415 - the rl extra
  check_int(reps, "iqm_ci: reps", 1, "bootstrap replicates")
  scores = np.asarray(scores, np.float64)
  check(scores.ndim == 2 and scores.size > 0, f"iqm_ci: scores has shape {scores.shape}; must be [runs, tasks], non-empty")
  if scores.shape[0] < 2:
    return float(metrics.aggregate_iqm(scores)), float("nan"), float("nan")
  aggregate = lambda x: np.array([metrics.aggregate_iqm(x)])  # noqa: E731
  saved = np.random.get_state()
  np.random.seed(seed)
  try:
    point, interval = library.get_interval_estimates({"runs": scores}, aggregate, reps=reps)
  finally:
    np.random.set_state(saved)
  return float(point["runs"][0]), float(interval["runs"][0, 0]), float(interval["runs"][1, 0])


def is_return(metric: str) -> bool:
  """An RL return (``episode_return``, ``eval_return``): aggregated with the IQM as well."""
  return metric.split("/")[-1].endswith("return")


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(tree, dict):
    out: dict[str, Any] = {}
    for k, v in tree.items():
      out.update(_flat(v, f"{prefix}{k}."))
    return out
  return {prefix[:-1]: tree}


def settings(workdirs: Sequence[Workdir]) -> list[str]:
  """Per workdir, the config keys that set it apart from the others (``k=v, ...``; seeds excluded).

  Without a saved config, a workdir is its own setting (its path).
  """
  flats = [_flat(w.config) if w.config is not None else None for w in workdirs]
  known = [f for f in flats if f is not None]
  keys = sorted({k for f in known for k in f})
  differ = [k for k in keys if not _matches(k, NOT_A_SETTING)
            and len({json.dumps(f.get(k), sort_keys=True) for f in known}) > 1]
  return [w.path if f is None else ", ".join(f"{k}={f.get(k)}" for k in differ)
          for w, f in zip(workdirs, flats)]


def _mark_duplicates(runs: list[dict[str, Any]]) -> list[str]:
  """Marks each run of a setting and seed seen before (``"duplicate_of"``); the notes saying so.

  The same run found in two workdirs (a copy, or a workdir given under two names of one
  experiment) is one seed, not two independent ones: only its first occurrence enters the
  aggregates over seeds.
  """
  first: dict[tuple[str, str], dict[str, Any]] = {}
  notes = []
  for r in runs:
    key = (r["setting"], r["label"])
    if key in first:
      kept = first[key]
      r["duplicate_of"] = f"{kept['workdir']} run {kept['run']}"
      notes.append(f"{r['label']} of setting '{r['setting']}' is in {kept['workdir']} and {r['workdir']}: "
                   f"counted once over seeds (from {kept['workdir']})")
    else:
      first[key] = r
  return notes


def build_report(workdirs: Sequence[Workdir], metrics: Sequence[str], with_iqm: bool = True) -> dict[str, Any]:
  """Per-run final / best values and per-setting aggregates over seeds.

  Args:
    workdirs: of one experiment (:func:`check_same_experiment`).
    metrics: the metrics to report.
    with_iqm: add the IQM (rliable) for RL returns; False, or rliable missing: left out.

  Returns:
    ``{"metrics", "runs": [...], "settings": [...], "notes": [...]}`` (JSON-ready; NaN where a
    value is missing). A run of the same setting and seed as an earlier one (found in two
    workdirs) is listed with ``"duplicate_of"`` and left out of the aggregates, with a note.
  """
  notes = []
  if with_iqm and any(is_return(m) for m in metrics):
    try:
      import rliable  # noqa: F401, PLC0415
    except ImportError:
      with_iqm = False
      notes.append("IQM left out: rliable is not installed (pip install 'jaxlab[rl]')")
  runs = []
  for w, setting in zip(workdirs, settings(workdirs)):
    curves = {m: curve(w, m) for m in metrics}
    for i, label in enumerate(w.labels):
      swept = ", ".join(f"{k}={v:g}" for k, v in w.hparams[i].items())
      record = {"workdir": w.path, "run": i, "label": label,
                "setting": ", ".join(s for s in (setting, swept) if s) or "all runs", "final": {}, "best": {},
                "best_step": {}}
      for m, (steps, values) in curves.items():
        v = values[:, i]
        record["final"][m] = float(v[-1]) if v.size else float("nan")
        finite = np.flatnonzero(np.isfinite(v))
        if finite.size:
          j = finite[np.argmin(v[finite]) if lower_is_better(m) else np.argmax(v[finite])]
          record["best"][m], record["best_step"][m] = float(v[j]), int(steps[j])
        else:
          record["best"][m], record["best_step"][m] = float("nan"), None
      runs.append(record)
  notes += _mark_duplicates(runs)
  groups: dict[str, list[dict[str, Any]]] = {}
  for r in runs:
    groups.setdefault(r["setting"], [])
    if "duplicate_of" not in r:
      groups[r["setting"]].append(r)
  aggregates = []
  for setting, members in groups.items():
    agg = {"setting": setting, "runs": len(members), "final": {}, "iqm": {}}
    for m in metrics:
      finals = [r["final"][m] for r in members]
      agg["final"][m] = mean_ci(finals)
      if with_iqm and is_return(m):
        ok = np.asarray(finals, np.float64)
        ok = ok[np.isfinite(ok)]
        if ok.size:
          point, lo, hi = iqm_ci(ok[:, None])
          agg["iqm"][m] = {"iqm": point, "ci_low": lo, "ci_high": hi, "n": int(ok.size)}
    aggregates.append(agg)
  return {"workdirs": [w.path for w in workdirs], "task": next((w.task for w in workdirs if w.task), None),
          "metrics": list(metrics), "runs": runs, "settings": aggregates, "notes": notes}


# ---------------------------------------------------------------- output

def _num(x: float | None) -> str:
  return "nan" if x is None or not math.isfinite(x) else f"{x:.4g}"


def _mean_cell(s: dict[str, float]) -> str:
  """``mean ± CI (n=k)``; a single value has no interval: ``value (n=1)``."""
  if s["n"] < 2:
    return f"{_num(s['mean'])} (n={s['n']})"
  return f"{_num(s['mean'])} ± {_num(s['ci'])} (n={s['n']})"


def _iqm_cell(q: dict[str, float] | None) -> str:
  """``IQM [low, high]``; over a single run the bootstrap has nothing to resample: ``value (n=1)``."""
  if not q:
    return "-"
  if q["n"] < 2:
    return f"{_num(q['iqm'])} (n={q['n']})"
  return f"{_num(q['iqm'])} [{_num(q['ci_low'])}, {_num(q['ci_high'])}]"


def to_markdown(report: dict[str, Any]) -> str:
  """The report as markdown tables (runs, then aggregates over seeds)."""
  metrics = report["metrics"]
  lines = [f"# Report: {', '.join(report['workdirs'])}", "",
           f"Task: {report['task'] or 'unknown (no saved config)'}. Per run: final value / best value "
           "(lowest for losses and errors, highest otherwise) of each metric.", "",
           "| workdir | run | label | " + " | ".join(f"{m} final / best" for m in metrics) + " |",
           "|---|---|---|" + "---|" * len(metrics)]
  for r in report["runs"]:
    label = r["label"] + (f" (duplicate of {r['duplicate_of']}, counted once)" if "duplicate_of" in r else "")
    lines.append(f"| {r['workdir']} | {r['run']} | {label} | "
                 + " | ".join(f"{_num(r['final'][m])} / {_num(r['best'][m])}" for m in metrics) + " |")
  iqm_metrics = [m for m in metrics if any(m in a["iqm"] for a in report["settings"])]
  lines += ["", "Over seeds, per setting: mean of the final values ± the half-width of a 95% Student-t CI "
            "(n: the finite values it was taken over; one value has no interval)"
            + ("; IQM [95% stratified-bootstrap CI] (rliable, 2000 reps) for RL returns." if iqm_metrics else "."), "",
            "| setting | runs | " + " | ".join(f"{m} mean ± CI (n)" for m in metrics)
            + "".join(f" | {m} IQM [CI]" for m in iqm_metrics) + " |",
            "|---|---|" + "---|" * (len(metrics) + len(iqm_metrics))]
  for a in report["settings"]:
    cells = [_mean_cell(s) for s in (a["final"][m] for m in metrics)]
    cells += [_iqm_cell(q) for q in (a["iqm"].get(m) for m in iqm_metrics)]
    lines.append(f"| {a['setting']} | {a['runs']} | " + " | ".join(cells) + " |")
  lines += [""] + [f"Note: {n}" for n in report["notes"]]
  return "\n".join(lines).rstrip() + "\n"


def plot_curves(workdirs: Sequence[Workdir], report: dict[str, Any], path: str) -> None:
  """Learning curves to ``path`` (PNG): per-run lines, per-setting mean and 95% CI band."""
  with optional_imports(f"{__name__}.plot_curves"):
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

  metrics = report["metrics"]
  cols = min(3, len(metrics))
  rows = math.ceil(len(metrics) / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
  colors = {s["setting"]: f"C{i % 10}" for i, s in enumerate(report["settings"])}
  by_workdir = {w.path: w for w in workdirs}
  for ax, m in zip(axes.flat, metrics):
    per_setting: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for r in report["runs"]:
      if "duplicate_of" in r:  # counted once: its first occurrence is drawn
        continue
      steps, values = curve(by_workdir[r["workdir"]], m)
      ax.plot(steps, values[:, r["run"]], color=colors[r["setting"]], alpha=0.3, lw=0.8)
      per_setting.setdefault(r["setting"], []).append((steps, values[:, r["run"]]))
    for setting, lines in per_setting.items():
      grid = np.unique(np.concatenate([s for s, _ in lines]))
      stacked = np.stack([np.interp(grid, s, v, left=np.nan, right=np.nan) if s.size > 1 else
                          np.where(grid == s[0], v[0], np.nan) for s, v in lines])
      stats = [mean_ci(stacked[:, j]) for j in range(grid.size)]
      mean = np.array([s["mean"] for s in stats])
      half = np.nan_to_num(np.array([s["ci"] for s in stats]))
      ax.plot(grid, mean, color=colors[setting], lw=2, label=f"{setting} ({len(lines)} runs)")
      ax.fill_between(grid, mean - half, mean + half, color=colors[setting], alpha=0.2)
    ax.set(xlabel="step", title=m)
    ax.grid(alpha=0.3)
  for ax in list(axes.flat)[len(metrics):]:
    ax.axis("off")
  axes.flat[0].legend(fontsize=7)
  fig.suptitle("per-run lines; mean over seeds with its 95% CI band", fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


def _strict(tree: Any) -> Any:
  if isinstance(tree, float):
    return tree if math.isfinite(tree) else None
  if isinstance(tree, dict):
    return {k: _strict(v) for k, v in tree.items()}
  if isinstance(tree, list):
    return [_strict(v) for v in tree]
  return tree


#: The files :func:`write_report` writes into its ``out`` folder.
REPORT_FILES = ("report.md", "report.json", "curves.png")


def _check_out(out: str) -> list[str]:
  """Refuses an ``out`` that is not a folder path; the notes on files of the old file-prefix form."""
  if not out:
    raise InputError("--out='' must name a folder (e.g. reports/mlp): report.md, report.json and curves.png go in it")
  stem, ext = os.path.splitext(out.rstrip(os.sep))
  if ext in (".md", ".json", ".png"):
    raise InputError(f"--out={out!r} names a file; --out is a folder (it was a file prefix before): use "
                     f"--out={stem} to write {os.path.join(stem, REPORT_FILES[0])}, {REPORT_FILES[1]} and {REPORT_FILES[2]}")
  if os.path.exists(out) and not os.path.isdir(out):
    raise InputError(f"--out={out!r} is a file; --out is a folder for {', '.join(REPORT_FILES)}: name another path")
  old = [f"{stem}{e}" for e in (".md", ".json", ".png") if os.path.isfile(f"{stem}{e}")]
  return [f"--out is a folder: wrote {os.path.join(stem, REPORT_FILES[0])} and its siblings; "
          f"{', '.join(old)} {'is' if len(old) == 1 else 'are'} from an earlier report (when --out was a file prefix), "
          "left as found"] if old else []


def write_report(workdir_paths: Sequence[str], out: str = "report", metrics: Sequence[str] | None = None,
                 plot: bool = True) -> dict[str, Any]:
  """Reads the workdirs and writes ``report.md``, ``report.json`` (strict JSON) and ``curves.png`` into ``out``.

  Everything is checked before anything is written; nothing is written into a workdir (unless
  ``out`` points into one).

  Args:
    workdir_paths: training workdirs of one experiment.
    out: the folder to write into (made if missing; files of an earlier report there are replaced).
      A path ending in ``.md`` / ``.json`` / ``.png`` (the file-prefix form of earlier versions) or
      an existing file is refused.
    metrics: the metrics to report (None: every result metric the workdirs share).
    plot: write the PNG.

  Returns:
    The report (:func:`build_report`) with ``"files"``: the paths written, and ``"out_notes"``: what
    the command line prints about files of an earlier, file-prefix report beside ``out``.
  """
  if not workdir_paths:
    raise InputError("no WORKDIR given: python -m jaxlab.report WORKDIR [WORKDIR ...]")
  out_notes = _check_out(out)
  seen: dict[str, str] = {}
  for p in workdir_paths:
    if os.path.realpath(p) in seen:
      raise InputError(f"workdir {p!r} is given twice (as {seen[os.path.realpath(p)]!r}); each run counts once")
    seen[os.path.realpath(p)] = p
  workdirs = [load_workdir(p) for p in workdir_paths]
  report = build_report(workdirs, check_same_experiment(workdirs, metrics))
  if plot:  # before anything is written
    with optional_imports("the report's plot (--no_plot skips it)"):
      import matplotlib  # noqa: F401, PLC0415
  os.makedirs(out, exist_ok=True)
  files = [os.path.join(out, name) for name in REPORT_FILES[:2]]
  with open(files[0], "w") as f:
    f.write(to_markdown(report))
  with open(files[1], "w") as f:
    json.dump(_strict(report), f, indent=1, allow_nan=False)
  if plot:
    files.append(os.path.join(out, REPORT_FILES[2]))
    plot_curves(workdirs, report, files[2])
  return {**report, "files": files, "out_notes": out_notes}


def main(argv: Sequence[str] | None = None) -> int:
  """``python -m jaxlab.report``: bad input is one line on stderr and exit status 2."""
  parser = argparse.ArgumentParser(prog="python -m jaxlab.report", description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("workdirs", nargs="+", metavar="WORKDIR", help="training workdirs of one experiment")
  parser.add_argument("--out", default="report",
                      help="output folder (made if missing): <out>/report.md, report.json, curves.png (default: ./report)")
  parser.add_argument("--metrics", default=None,
                      help="comma-separated metrics (default: every result metric the workdirs share)")
  parser.add_argument("--no_plot", action="store_true", help="skip the PNG")
  args = parser.parse_args(argv)
  metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
  try:
    report = write_report(args.workdirs, args.out, metrics, plot=not args.no_plot)
  except InputError as e:
    sys.stderr.write(f"jaxlab.report: error: {e}\n")
    return 2
  print(to_markdown(report))
  for note in report["out_notes"]:
    print(f"note: {note}")
  print("wrote " + ", ".join(report["files"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
