"""The router study (configs/rl_router_diagnosis.py, benchmarks/rl_router_diagnosis.py): each variant is
the paper's Soft MoE but for its one setting, and the report reads the diagnostics back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import rl_router_diagnosis as study_lib
from benchmarks.rl_study_cells import cell_config, units
from configs import rl_router_diagnosis

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _flat(d, prefix=""):
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def test_each_variant_is_the_papers_soft_moe_but_for_its_own_settings():
  study = rl_router_diagnosis.get_config()
  assert tuple(study.games) == ("breakout", "space_invaders") and study.seeds == 3
  base = _flat(cell_config(study, "softmoe", "breakout").to_dict())
  assert base["network.head"] == "softmoe" and base["network.num_experts"] == 8 and base["network.expert_hidden"] == 128
  assert base["network.router_diagnostics"] is True and base["optimizer.eps"] == 3.125e-4  # Dopamine's MinAtar eps
  for name in study.order:
    c = _flat(cell_config(study, name, "breakout").to_dict())
    changed = {k: v for k, v in c.items() if base.get(k) != v and k != "name"}
    want = _flat(rl_router_diagnosis.VARIANTS[name]["set"])
    assert changed == {k: v for k, v in want.items() if base.get(k) != v}, name
  assert len(units(study)) == 2 * len(rl_router_diagnosis.VARIANTS)


def _record(runs, dispatch, combine, ret):
  r = {"runs": [{"seed": s} for s in range(runs)], "eval_return": list(ret), "final_train_return": list(ret),
       "wall_time_s": 1.0, "cpu_time_s": 2.0, "frames": 800, "curve_frames": [400, 800],
       "curve_return": [list(ret), list(ret)]}
  for name, value in (("dispatch_entropy", dispatch), ("combine_entropy", combine), ("combine_spread", 0.1),
                      ("router_grad_rms_over_eps", 0.05), ("router_step_fraction", 0.05), ("q_spread_states", 0.01),
                      ("q_spread_actions", 0.002)):
    r[f"curve_{name}_frames"] = [400, 800]
    r[f"curve_{name}"] = [[1.0] * runs, [value] * runs]
    r[f"final_{name}"] = [value] * runs
  return r


def test_summary_says_which_router_learns_and_the_report_reads_every_diagnostic(tmp_path):
  study = rl_router_diagnosis.get_config("small")  # softmoe, normalize on breakout
  cells = {"breakout/softmoe": _record(2, 0.999, 0.998, [1.0, 2.0]),
           "breakout/normalize": _record(2, 0.85, 0.95, [3.0, 4.0])}
  summary = study_lib.summarise(study, cells)
  assert not summary["softmoe"]["learns"] and summary["normalize"]["learns"]  # 0.85 <= 0.9 on every game
  assert summary["normalize"]["lowest_final_entropy"] == {"breakout": 0.85}
  assert summary["normalize"]["iqm_eval"]["iqm"] > summary["softmoe"]["iqm_eval"]["iqm"]
  text = study_lib.table(study, summary, cells)
  assert "| normalize | breakout | 0.8500 | 0.9500 |" in text and "router learns" in text and ": normalize." in text
  study_lib.plot(study, cells, str(tmp_path / "p.png"))
  assert os.path.getsize(tmp_path / "p.png") > 10_000


@pytest.mark.slow  # ~2-4 min on 2 shared cores (two tiny programs compile and train); the fast tests above cover the report
def test_the_small_study_runs_resumes_and_writes_its_json(tmp_path):
  cmd = [sys.executable, "benchmarks/rl_router_diagnosis.py", "--config=configs/rl_router_diagnosis.py:small",
         f"--config.out_dir={tmp_path}", f"--config.workdir={tmp_path / 'runs'}"]
  env = dict(os.environ, PYTHONPATH=REPO, XLA_FLAGS="")  # the machine's one CPU device, not the suite's 8
  first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
  assert first.returncode == 0, first.stderr[-3000:]
  result = json.loads((tmp_path / "router_diagnosis.json").read_text())
  assert set(result["cells"]) == {"breakout/softmoe", "breakout/normalize"} and result["date"]
  r = result["cells"]["breakout/normalize"]
  assert len(r["final_dispatch_entropy"]) == 2 and 0 < np.mean(r["final_dispatch_entropy"]) <= 1
  assert "softmoe" in result["summary"] and (tmp_path / "router_diagnosis.png").exists()
  # the router's parameters read back from the checkpoint: normalize's learned scale moved from 1
  assert len(r["final_router_scale"]) == 2 and r["final_router_phi_rms"][0] > 0 and r["router_phi_rms_init"] > 0
  again = subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True, text=True)
  assert again.stdout.count("done, skipped") == 2


def test_the_committed_result_names_each_variants_routing_entropy_and_its_date():
  """benchmarks/results/rl/router_diagnosis.json: dated, and every variant with a router reports its final
  routing entropies (keys with ``entropy``) per game, from which ``learns`` follows."""
  path = os.path.join(REPO, "benchmarks", "results", "rl", "router_diagnosis.json")
  with open(path) as f:
    result = json.load(f)
  assert len(result["date"]) == 10 and result["date"][:2] == "20"  # ISO yyyy-mm-dd
  study = rl_router_diagnosis.get_config()
  assert result["summary"] and set(result["summary"]) <= set(study.order)
  for name, s in result["summary"].items():
    if rl_router_diagnosis.VARIANTS[name]["set"]["network"].get("head") == "dense":
      continue  # the dense reference has no router
    for game, v in s["games"].items():
      assert 0 < v["dispatch_entropy"] <= 1 and 0 < v["combine_entropy"] <= 1, (name, game)
    lowest = s["lowest_final_entropy"]
    assert set(lowest) == set(s["games"])
    assert s["learns"] == all(e <= result["entropy_target"] for e in lowest.values()), name
