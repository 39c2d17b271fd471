"""``python -m jaxlab.report``: per-run final / best values, aggregates over seeds, refusals.

Synthetic workdirs (a ``metrics.jsonl`` and the config a checkpoint saves beside it) keep these
tests to milliseconds; one test trains ``configs/digits_mlp.py:tiny`` with two seeds and reports it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np
import pytest

from jaxlab import report
from jaxlab.errors import InputError
from tests.support.tolerances import gamma

U64 = float(np.finfo(np.float64).eps) / 2


def make_workdir(path, rows, config=None, step=20):
  """A workdir as the trainer leaves it: metrics.jsonl (strict JSON) and checkpoints/<step>/config."""
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    for r in rows:
      f.write(json.dumps(r) + "\n")
  if config is not None:
    os.makedirs(os.path.join(path, "checkpoints", str(step), "config"))
    with open(os.path.join(path, "checkpoints", str(step), "config", "metadata"), "w") as f:
      json.dump(config, f)
  return str(path)


def config(task="dqn_minatar", seeds=3, sweep=(), **extra):
  return {"task": task, "seed": 0, "runs": {"seeds": seeds, "sweep": [list(s) for s in sweep]}, "name": "x", **extra}


def tree_digest(path):
  h = hashlib.sha256()
  for root, dirs, files in sorted(os.walk(path)):
    dirs.sort()
    for name in sorted(files):
      p = os.path.join(root, name)
      h.update(p.encode() + open(p, "rb").read())
  return h.hexdigest()


@pytest.fixture
def rl_workdir(tmp_path):
  # 3 seeds; eval_return: run 2 has no finished episode at the end (null), its best is at step 10.
  rows = [{"step": 10, "loss": [0.5, 0.4, 0.6], "eval_return": [1.0, 2.0, 9.0], "nonfinite_skipped": [0, 0, 0]},
          {"step": 20, "loss": [0.2, 0.3, 0.1], "eval_return": [1.0, 2.0, None], "nonfinite_skipped": [0, 0, 0]},
          {"step": 30, "loss": [0.3, 0.1, 0.2], "eval_return": [3.0, 5.0, None], "nonfinite_skipped": [0, 0, 0]}]
  return make_workdir(tmp_path / "rl", rows, config())


def test_runs_final_best_and_mean_over_finite_seeds(rl_workdir, tmp_path):
  w = report.load_workdir(rl_workdir)
  assert w.labels == ["seed=0", "seed=1", "seed=2"]
  metrics = report.check_same_experiment([w])
  assert metrics == ["eval_return", "loss"]  # counters (nonfinite_skipped) are not results
  rep = report.build_report([w], metrics, with_iqm=False)
  runs = rep["runs"]
  # The numbers are copies of the logged ones: exact.
  assert [r["final"]["loss"] for r in runs] == [0.3, 0.1, 0.2]
  assert [r["best"]["loss"] for r in runs] == [0.2, 0.1, 0.1]          # lowest for a loss
  assert [r["best_step"]["loss"] for r in runs] == [20, 30, 20]
  assert [r["best"]["eval_return"] for r in runs] == [3.0, 5.0, 9.0]   # highest for a return
  assert math.isnan(runs[2]["final"]["eval_return"])
  (agg,) = rep["settings"]
  assert agg["setting"] == "all runs" and agg["runs"] == 3
  ev = agg["final"]["eval_return"]
  assert ev["n"] == 2 and ev["mean"] == 4.0  # (3 + 5) / 2 is exact
  # 95% t interval with 1 degree of freedom (Cauchy: t = tan(0.475 pi)); std sqrt(2) over sqrt(2) leaves t.
  # scipy's quantile solver and the closed form are a few roundings apart.
  np.testing.assert_allclose(ev["ci"], math.tan(0.475 * math.pi), rtol=gamma(16, U64))


def test_mean_ci_counts_only_finite_values():
  s = report.mean_ci([1.0, 2.0, 6.0, float("nan"), float("inf")])
  assert s["n"] == 3 and s["mean"] == 3.0  # exact in float64
  # 2 degrees of freedom: t = sqrt(2 a^2 / (1 - a^2)), a = 0.95 (closed form); std = sqrt(7).
  t = math.sqrt(2 * 0.95**2 / (1 - 0.95**2))
  np.testing.assert_allclose(s["ci"], t * math.sqrt(7) / math.sqrt(3), rtol=gamma(16, U64))
  assert report.mean_ci([float("nan")])["n"] == 0
  assert math.isnan(report.mean_ci([2.0])["ci"])


def test_iqm_through_rliable_for_returns(rl_workdir):
  pytest.importorskip("rliable")
  from scipy import stats
  scores = np.array([[0.0], [1.0], [2.0], [3.0], [10.0], [4.0], [5.0], [6.0]])
  point, lo, hi = report.iqm_ci(scores, reps=200)
  # rliable's IQM is scipy's 25% trimmed mean of the same array: the same computation, bit-equal.
  assert point == stats.trim_mean(scores, 0.25, axis=None)
  assert lo <= point <= hi
  state = np.random.get_state()[1].copy()
  report.iqm_ci(scores, reps=50)
  np.testing.assert_array_equal(np.random.get_state()[1], state)  # numpy's global generator left as it was
  rep = report.build_report([report.load_workdir(rl_workdir)], ["eval_return", "loss"])
  assert set(rep["settings"][0]["iqm"]) == {"eval_return"} and rep["settings"][0]["iqm"]["eval_return"]["n"] == 2


def test_sweep_groups_by_swept_value_and_by_config_difference(tmp_path):
  rows = [{"step": 5, "loss": [4.0, 2.0, 1.0, 3.0]}]
  a = make_workdir(tmp_path / "a", rows, config("digits_classification", 2, [("learning_rate", (0.1, 0.01))],
                                                 optimizer={"name": "sgd"}))
  b = make_workdir(tmp_path / "b", [{"step": 5, "loss": [7.0, 9.0]}],
                   config("digits_classification", 2, optimizer={"name": "adam"}))
  ws = [report.load_workdir(p) for p in (a, b)]
  assert ws[0].labels == ["seed=0,learning_rate=0.1", "seed=1,learning_rate=0.1",
                          "seed=0,learning_rate=0.01", "seed=1,learning_rate=0.01"]
  rep = report.build_report(ws, report.check_same_experiment(ws))
  got = {s["setting"]: (s["runs"], s["final"]["loss"]["mean"]) for s in rep["settings"]}
  assert got == {"optimizer.name=sgd, learning_rate=0.1": (2, 3.0), "optimizer.name=sgd, learning_rate=0.01": (2, 2.0),
                 "optimizer.name=adam": (2, 8.0)}


def test_cli_writes_only_its_outputs(rl_workdir, tmp_path, capsys):
  before = tree_digest(rl_workdir)
  out = tmp_path / "reports" / "rl"
  assert report.main([rl_workdir, f"--out={out}"]) == 0
  assert tree_digest(rl_workdir) == before  # nothing written into the workdir
  assert "| seed=2 |" in capsys.readouterr().out
  assert sorted(os.listdir(out)) == ["curves.png", "report.json", "report.md"]  # --out is a folder
  for name in os.listdir(out):
    assert os.path.getsize(out / name) > 0
  data = json.loads(open(out / "report.json").read(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
  assert data["runs"][2]["final"]["eval_return"] is None


def test_out_is_a_folder_and_the_old_file_prefix_form_is_read_clearly(rl_workdir, tmp_path, capsys):
  out = tmp_path / "reports" / "rl"
  out.parent.mkdir()
  (tmp_path / "reports" / "rl.md").write_text("an earlier report")  # what --out=reports/rl wrote before
  assert report.main([rl_workdir, f"--out={out}", "--no_plot"]) == 0
  printed = capsys.readouterr().out
  assert os.path.isfile(out / "report.md") and (tmp_path / "reports" / "rl.md").read_text() == "an earlier report"
  assert f"note: --out is a folder: wrote {out / 'report.md'} and its siblings; {out}.md is from an earlier report" \
      in printed, printed
  for bad, words in ((f"{out}.md", ["names a file", f"use --out={out} to write {out / 'report.md'}"]),
                     (str(tmp_path / "reports" / "rl.md"), ["names a file"])):
    assert report.main([rl_workdir, f"--out={bad}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and all(w in err for w in words), err
  (tmp_path / "afile").write_text("")
  assert report.main([rl_workdir, f"--out={tmp_path / 'afile'}"]) == 2
  assert "is a file; --out is a folder" in capsys.readouterr().err


def test_one_seed_shows_n_1_not_a_nan_interval(tmp_path):
  workdir = make_workdir(tmp_path / "one", [{"step": 5, "loss": 2.0}, {"step": 10, "loss": 1.5}],
                         config("digits_classification", 1))
  rep = report.build_report([report.load_workdir(workdir)], ["loss"])
  text = report.to_markdown(rep)
  assert "| 1.5 (n=1) |" in text, text
  assert "nan" not in text
  assert report._mean_cell({"mean": 1.0, "ci": 0.25, "n": 3}) == "1 ± 0.25 (n=3)"
  assert report._iqm_cell({"iqm": 1.0, "ci_low": 1.0, "ci_high": 1.0, "n": 1}) == "1 (n=1)"


@pytest.mark.parametrize("case", ["different_task", "no_common_metric", "missing", "no_metrics_file", "suite",
                                  "unknown_metric", "empty", "twice", "no_step", "not_an_object"])
def test_bad_input_is_one_line_and_writes_nothing(case, rl_workdir, tmp_path, capsys):
  other = tmp_path / "other"
  cases = {
      "different_task": lambda: ([rl_workdir, make_workdir(other, [{"step": 1, "loss": 1.0}],
                                                           config("digits_classification", 1))],
                                 ["different experiments", "dqn_minatar", "digits_classification", str(other)]),
      "no_common_metric": lambda: ([rl_workdir, make_workdir(other, [{"step": 1, "test_accuracy": 1.0}])],
                                   ["no metric in common", str(other)]),
      "missing": lambda: ([str(tmp_path / "nope")], ["does not exist", "nope"]),
      "no_metrics_file": lambda: ([str(tmp_path)], ["has no metrics.jsonl"]),
      "suite": lambda: ([str(tmp_path)], ["has no metrics.jsonl", "experiments rl"]),
      "unknown_metric": lambda: ([rl_workdir, "--metrics=eval_return,acc"], ["--metrics", "acc not logged in"]),
      "empty": lambda: ([make_workdir(other, [])], ["holds no logged step"]),
      "twice": lambda: ([rl_workdir, rl_workdir + "/"], ["given twice"]),
      "no_step": lambda: ([make_workdir(other, [{"step": 1, "loss": 1.0}, {"loss": 2.0}])],
                          [os.path.join(str(other), "metrics.jsonl"), "line 2", "has no 'step'"]),
      "not_an_object": lambda: ([make_workdir(other, [{"step": 1, "loss": 1.0}, [2.0]])],
                                ["metrics.jsonl", "line 2", "it has a list"]),
  }
  args, expect = cases[case]()
  if case == "no_metrics_file":
    os.rename(rl_workdir, tmp_path.parent / f"{tmp_path.name}_moved")  # tmp_path: a directory with no run inside
  out = tmp_path.parent / f"{tmp_path.name}_out" / "r"
  assert report.main([*args, f"--out={out}"]) == 2
  err = capsys.readouterr().err.strip()
  assert "\n" not in err and err.startswith("jaxlab.report: error:"), err
  for word in expect:
    assert word in err, (word, err)
  assert not os.path.exists(out.parent)  # a refused report writes nothing
  with pytest.raises(InputError):  # the library call refuses alike
    report.write_report([a for a in args if not a.startswith("--")], str(out),
                        metrics=["eval_return", "acc"] if case == "unknown_metric" else None)
  assert not os.path.exists(out.parent)

def test_trained_seeds_reported(cli, tmp_path):
  """digits_mlp:tiny with runs.seeds=2 (a few seconds), then `python -m jaxlab.report` on it."""
  import jax
  from configs.digits_mlp import get_config
  from jaxlab.experiment import train
  c = get_config("tiny")
  c.runs.seeds = 2
  workdir = str(tmp_path / "mlp")
  train(c, workdir, devices=jax.devices()[:2], progress=False)  # the 2 runs over 2 of the 8 test devices
  before = tree_digest(workdir)
  out = tmp_path / "rep"
  proc = cli.module("jaxlab.report", workdir, f"--out={out}", cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr
  assert tree_digest(workdir) == before
  data = json.load(open(out / "report.json"))
  assert [r["label"] for r in data["runs"]] == ["seed=0", "seed=1"]
  assert data["task"] == "digits_classification"
  assert {"loss", "test_accuracy", "test_loss"} <= set(data["metrics"])
  (agg,) = data["settings"]
  assert agg["final"]["test_accuracy"]["n"] == 2


def test_lower_is_better_is_decided_by_the_metric_name_not_the_data_set():
  for name in ("l2re_1step/ns", "l2re_rollout/ns_fno_nu1e-03", "loss", "test_loss", "nrmse/cfd"):
    assert report.lower_is_better(name), name
  for name in ("test_accuracy", "eval_return", "accuracy/loss_set", "zero_shot_accuracy"):
    assert not report.lower_is_better(name), name


def test_a_namespace_before_the_metric_does_not_decide_its_direction():
  for name in ("train/loss", "eval/loss", "eval/l2re_1step/ns", "valid/test_error"):
    assert report.lower_is_better(name), name
  for name in ("eval/accuracy", "train/episode_return", "opt/lr"):
    assert not report.lower_is_better(name), name


def test_best_of_a_namespaced_loss_is_its_lowest(tmp_path):
  rows = [{"step": 1, "train/loss": 2.0}, {"step": 2, "train/loss": 0.5}, {"step": 3, "train/loss": 0.9}]
  w = report.load_workdir(make_workdir(tmp_path / "ns", rows, config("digits_classification", 1)))
  (run,) = report.build_report([w], ["train/loss"])["runs"]
  assert (run["best"]["train/loss"], run["best_step"]["train/loss"]) == (0.5, 2)


def test_iqm_ci_of_one_run_has_no_interval_and_reps_must_be_positive():
  pytest.importorskip("rliable")
  point, lo, hi = report.iqm_ci(np.array([[3.0]]), reps=20)
  assert point == 3.0 and math.isnan(lo) and math.isnan(hi)  # not a zero-width "95% CI"
  for reps in (0, -5):
    with pytest.raises(InputError, match=rf"iqm_ci: reps={reps}; must be an int >= 1 \(bootstrap replicates\)"):
      report.iqm_ci(np.zeros((4, 1)), reps=reps)


def test_best_of_a_per_data_set_error_is_its_lowest(tmp_path):
  rows = [{"step": 1, "l2re_1step/ns": 0.9}, {"step": 2, "l2re_1step/ns": 0.2}, {"step": 3, "l2re_1step/ns": 0.4}]
  w = report.load_workdir(make_workdir(tmp_path / "pde", rows, config("pde_operator", 1)))
  (run,) = report.build_report([w], ["l2re_1step/ns"])["runs"]
  assert run["best"]["l2re_1step/ns"] == 0.2 and run["best_step"]["l2re_1step/ns"] == 2


def test_the_same_seed_in_two_workdirs_counts_once(rl_workdir, tmp_path):
  import shutil
  copy = str(tmp_path / "rl_copy")
  shutil.copytree(rl_workdir, copy)  # the same 3 seeds of the same setting, found twice
  ws = [report.load_workdir(p) for p in (rl_workdir, copy)]
  rep = report.build_report(ws, ["loss"], with_iqm=False)
  (agg,) = rep["settings"]
  assert agg["runs"] == 3 and agg["final"]["loss"]["n"] == 3  # not 6 "independent" seeds
  assert [r.get("duplicate_of") for r in rep["runs"]][3:] == [f"{rl_workdir} run {i}" for i in range(3)]
  assert len(rep["notes"]) == 3 and "counted once" in rep["notes"][0] and copy in rep["notes"][0]
  md = report.to_markdown(rep)
  assert "counted once" in md and md.count("Note: seed=") == 3
