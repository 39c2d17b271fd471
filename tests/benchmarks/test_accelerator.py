"""benchmarks/accelerator.py: without a GPU one line and a non-zero exit before any work; with
``--cpu-smoke`` the parts run at toy size on the CPU and land in the one JSON, written after each
part; the studies' units are cut at their box's end and recorded; the boxes fit one call."""

from __future__ import annotations

import json
import pathlib
import sys
import time

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "accelerator.py"
PARTS = ("tests", "dpot_ti", "moe_vs_dense", "dqn_seeds", "minatar_scaling", "atari_der")


def _accelerator():
  from benchmarks import accelerator  # pylint: disable=import-outside-toplevel
  return accelerator


def _run(cli, *args, env=None, timeout=600):
  # no wheel folder: this machine has every package (an install would change nothing; tested in test_device_wheels.py)
  return cli.run([sys.executable, str(SCRIPT), "--wheels", "no-such-wheel-folder", *args], env=env, timeout=timeout)


def test_without_a_gpu_it_says_so_in_one_line_and_runs_nothing(cli, tmp_path):
  import jax  # pylint: disable=import-outside-toplevel
  assert jax.default_backend() == "cpu"  # the suite's machine: no GPU (JAX_PLATFORMS=cpu in conftest)
  out = tmp_path / "never.json"
  run = _run(cli, "--out", str(out), env={"JAX_PLATFORMS": None})  # the script pins cuda itself
  assert run.returncode == 2, run.stdout + run.stderr
  lines = [line for line in run.stdout.splitlines() if line.strip()]
  assert len(lines) == 1 and "no GPU" in lines[0] and "nothing was run" in lines[0], run.stdout
  assert "Traceback" not in run.stderr, run.stderr
  assert not out.exists()  # nothing ran, nothing was written


def test_cpu_smoke_of_two_parts_writes_one_json_with_the_wheels_record(cli, tmp_path):
  """The fast part of the smoke run (every part: the slow test below): the header, the wheels'
  record, each part's numbers and status in the one JSON."""
  out = tmp_path / "smoke.json"
  run = _run(cli, "--cpu-smoke", "--parts=tests,moe_vs_dense", "--out", str(out))
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
  result = json.loads(out.read_text())
  assert result["cpu_smoke"] is True and result["platform"] == "cpu" and result["status"] == "done"
  assert result["wheels"]["status"].startswith("no wheel folder") and result["boxes_s"]["tests"] == 100
  parts = result["parts"]
  assert tuple(parts) == ("tests", "moe_vs_dense") and all(p["status"] == "ok" for p in parts.values()), parts
  tests = parts["tests"]
  assert tests["passed"] == 1 and tests["failed"] == tests["error"] == 0 and not tests["timed_out"], tests
  assert parts["moe_vs_dense"]["softmoe_over_dense"] > 0


def test_the_watchdog_ends_a_run_past_its_limit_and_leaves_the_json(cli, tmp_path):
  out = tmp_path / "cut.json"
  # the three parts take longer than 4 s together (how far the first ones get depends on the compile cache
  # and the machine): the watchdog ends the one that is running, the ones before it are kept, the rest skipped
  run = _run(cli, "--cpu-smoke", "--parts=moe_vs_dense,dqn_seeds,minatar_scaling", "--watchdog_s=4", "--out", str(out))
  assert run.returncode == 3 and "watchdog" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
  result = json.loads(out.read_text())
  assert result["status"] == "killed by the watchdog" and 4 <= result["wall_s"] < 30, result
  statuses = [result["parts"].get(name, {}).get("status", "") for name in ("moe_vs_dense", "dqn_seeds", "minatar_scaling")]
  killed = [i for i, status in enumerate(statuses) if status.startswith("killed by the watchdog at 4 s")]
  assert len(killed) == 1, statuses
  assert all(status == "ok" for status in statuses[:killed[0]]), statuses
  assert all(status == "skipped: the watchdog ended the run" for status in statuses[killed[0] + 1:]), statuses


@pytest.mark.slow  # every part at toy size, the studies' units as subprocesses: 5 min of CPU (fast: the two-part test)
def test_cpu_smoke_runs_every_part_into_one_json(cli, tmp_path):
  out = tmp_path / "smoke.json"
  run = _run(cli, "--cpu-smoke", "--out", str(out), timeout=3600)  # 15 min wall at load 15
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
  parts = json.loads(out.read_text())["parts"]
  assert tuple(parts) == PARTS and all(p["status"] == "ok" for p in parts.values()), parts
  for dtype in ("float32", "bfloat16"):
    d = parts["dpot_ti"][dtype]
    assert d["samples_per_s"] > 0 and d["flops_per_step"] > 0 and d["achieved_tflops"] > 0, d
  assert parts["dqn_seeds"]["2"]["frames_per_s"] > 0
  minatar, der = parts["minatar_scaling"], parts["atari_der"]
  assert minatar["config"] == "configs/rl_expert_scaling.py:full_smoke"
  # every unit is accounted for: finished, cut at the deadline, skipped or failed (none here)
  assert not minatar["failed"] and len(minatar["ran"]) + len(minatar["cut"]) + len(minatar["skipped"]) == 2
  assert minatar["ran"] and all(r["wall_time_s"] > 0 for r in minatar["ran"].values())
  probe = der["probe"]
  assert probe["backend"] == "ale_py" and probe["same_frames_rewards_flags"] and probe["chosen"] == "xla", probe
  assert [r["head"] for r in der["measure"]["rows"]] == ["dense", "softmoe"]
  assert not der["measure"]["dense"]["cut"] and der["measure"]["softmoe"]["returncode"] == 0
  study = der["study"]
  assert not study["failed"] and len(study["ran"]) + len(study["cut"]) + len(study["skipped"]) == 2 and study["ran"]
  first = next(iter(study["ran"].values()))
  assert first["eval_episodes"] == [2.0, 2.0] and len(first["human_normalized"]) == 2


def test_study_units_are_cut_at_the_deadline_and_the_rest_skipped(tmp_path, monkeypatch):
  accelerator = _accelerator()
  monkeypatch.setattr(accelerator, "MIN_UNIT_S", 1.0)  # a unit needs 1 s left to start (the GPU plan's: 20 s)
  records = tmp_path / "records"
  records.mkdir()

  def unit(key, seconds, write):
    record = f"; pathlib.Path({str(records / key)!r}).write_text('{{}}')" if write else ""
    body = f"import time, pathlib; time.sleep({seconds})" + record
    return key, [sys.executable, "-c", body], tmp_path / key

  units = [unit("fast", 0, True), unit("broken", 0, False), unit("slow", 60, True), unit("never", 0, True)]
  start = time.monotonic()
  got = accelerator.study_units(units, start + 4, lambda key: json.loads((records / key).read_text())
                                if (records / key).exists() else None)
  assert time.monotonic() - start < 15  # the slow unit was killed at the deadline
  assert list(got["ran"]) == ["fast"] and got["ran"]["fast"]["returncode"] == 0
  assert list(got["failed"]) == ["broken"] and got["failed"]["broken"]["returncode"] == 0
  assert list(got["cut"]) == ["slow"] and got["cut"]["slow"]["logged_step"] is None
  assert got["skipped"] == ["never"] and not accelerator.CHILDREN  # every process group reaped


def test_units_run_side_by_side_up_to_the_limit():
  accelerator = _accelerator()
  units = [(f"u{i}", [sys.executable, "-c", f"import time; time.sleep(2); print({i})"]) for i in range(4)]
  start = time.monotonic()
  got = accelerator.run_units(units, start + 60, parallel=2)
  # two waves of two: ~4 s (one at a time: >= 8 s), each unit's own output kept
  assert time.monotonic() - start < 7 and [got[f"u{i}"]["lines"] for i in range(4)] == [["0"], ["1"], ["2"], ["3"]]
  assert all(r["returncode"] == 0 and not r["cut"] for r in got.values())


def test_the_boxes_fit_one_call_of_the_device_tool():
  accelerator = _accelerator()
  assert tuple(accelerator.PARTS) == PARTS and accelerator.BUDGET_S == sum(accelerator.PARTS.values()) <= 480
  # one command runs at most 10 minutes: boxes + the watchdog's grace + wheels and start-up (~30 s) stay well inside
  assert accelerator.BUDGET_S + accelerator.WATCHDOG_GRACE_S + 30 <= 560


def test_peak_table_matches_device_kinds():
  accelerator = _accelerator()
  assert accelerator.peak_tflops("NVIDIA H200")["bf16"] == 989.4
  assert accelerator.peak_tflops("NVIDIA H100 PCIe")["fp32"] == 51.0
  assert accelerator.peak_tflops("NVIDIA L40S") is None  # not the L4
  assert accelerator.peak_tflops("TPU v5 lite")["bf16"] == 197.0 and accelerator.peak_tflops("TPU v5")["bf16"] == 459.0
  assert accelerator.default_f32_peak(accelerator.peak_tflops("NVIDIA A100-SXM4-80GB"), "gpu") == 156.0  # TF32
  assert accelerator.default_f32_peak(accelerator.peak_tflops("Tesla T4"), "gpu") == 8.1
  assert accelerator.default_f32_peak(accelerator.peak_tflops("TPU v4"), "tpu") == 275.0


def test_bad_arguments_are_one_line_each(cli):
  for args, words in ((("--parts=tests,gpu",), "--parts='tests,gpu': unknown ['gpu']"),
                      (("--seeds=1,eight",), "--seeds='1,eight': must be comma-separated integers >= 1"),
                      (("--minatar_frames=10",), "--minatar_frames=10: must be 0 or a multiple of 4 >= 4")):
    run = _run(cli, *args)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith(f"benchmarks/accelerator.py: {words}"), run.stderr
