"""benchmarks/accelerator.py: without a GPU one line and a non-zero exit before any work; with
``--cpu-smoke`` every part runs at toy size on the CPU and lands in the one JSON."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "accelerator.py"
PARTS = ("tests", "dpot_ti", "moe_vs_dense", "dqn_seeds")


def _script(cli, *args, env=None):
  return cli.run([sys.executable, str(SCRIPT), *args], env=env, timeout=600)


def test_without_a_gpu_it_says_so_in_one_line_and_runs_nothing(cli, tmp_path):
  import jax  # pylint: disable=import-outside-toplevel
  assert jax.default_backend() == "cpu"  # the suite's machine: no GPU (JAX_PLATFORMS=cpu in conftest)
  out = tmp_path / "never.json"
  # the script pins cuda itself
  run = _script(cli, "--out", str(out), env={"JAX_PLATFORMS": None})
  assert run.returncode == 2, run.stdout + run.stderr
  lines = [line for line in run.stdout.splitlines() if line.strip()]
  assert len(lines) == 1 and "no GPU" in lines[0] and "nothing was run" in lines[0], run.stdout
  assert "Traceback" not in run.stderr, run.stderr
  assert not out.exists()  # nothing ran, nothing was written


@pytest.mark.slow  # every part of the GPU script at toy size on CPU: ~30 s, a benchmark's run (make test-slow)
def test_cpu_smoke_runs_every_part_into_one_json(cli, tmp_path):
  out = tmp_path / "smoke.json"
  run = _script(cli, "--cpu-smoke", "--out", str(out))
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
  result = json.loads(out.read_text())
  assert result["cpu_smoke"] is True and result["platform"] == "cpu"
  parts = result["parts"]
  assert tuple(parts) == PARTS and all(p["status"] == "ok" for p in parts.values()), parts
  tests = parts["tests"]
  assert tests["passed"] == 1 and tests["failed"] == tests["error"] == 0 and not tests["timed_out"], tests
  for dtype in ("float32", "bfloat16"):
    d = parts["dpot_ti"][dtype]
    assert d["samples_per_s"] > 0 and d["flops_per_step"] > 0 and d["achieved_tflops"] > 0, d
  assert parts["moe_vs_dense"]["softmoe_over_dense"] > 0
  assert parts["dqn_seeds"]["2"]["frames_per_s"] > 0


@pytest.mark.slow  # the two RL studies' code paths at toy size on CPU, one subprocess per cell: minutes
def test_cpu_smoke_of_the_rl_studies_part_records_what_ran(cli, tmp_path):
  out = tmp_path / "rl.json"
  run = _script(cli, "--cpu-smoke", "--parts=rl_studies", "--out", str(out))
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
  part = json.loads(out.read_text())["parts"]["rl_studies"]
  assert part["status"] == "ok", part
  minatar, der = part["minatar_expert_scaling"], part["atari100k_der"]
  assert minatar["config"] == "configs/rl_expert_scaling.py:full_smoke"
  # every unit is accounted for: finished, cut at the deadline, skipped or failed (none here)
  assert not minatar["failed"] and not der["failed"], (minatar["failed"], der["failed"])
  assert len(minatar["ran"]) + len(minatar["cut"]) + len(minatar["skipped"]) == 2 and minatar["ran"]
  assert len(der["ran"]) + len(der["cut"]) + len(der["skipped"]) == 2 and der["ran"]
  first = next(iter(der["ran"].values()))
  assert first["eval_episodes"] == [2.0, 2.0] and len(first["human_normalized"]) == 2
  assert all(r["wall_time_s"] > 0 for r in minatar["ran"].values())


def test_the_rl_studies_part_is_not_in_the_default_run():
  sys.path.insert(0, str(SCRIPT.parent))
  import accelerator  # pylint: disable=import-outside-toplevel
  assert tuple(accelerator.PARTS) == PARTS and "rl_studies" in accelerator.OPTIONAL_PARTS
  assert accelerator.OPTIONAL_PARTS["rl_studies"] < 9 * 60  # one call of the script, start-up included, < 9 min


def test_peak_table_matches_device_kinds():
  sys.path.insert(0, str(SCRIPT.parent))
  import accelerator  # pylint: disable=import-outside-toplevel
  assert accelerator.peak_tflops("NVIDIA H200")["bf16"] == 989.4
  assert accelerator.peak_tflops("NVIDIA H100 PCIe")["fp32"] == 51.0
  assert accelerator.peak_tflops("NVIDIA L40S") is None  # not the L4
  assert accelerator.peak_tflops("TPU v5 lite")["bf16"] == 197.0 and accelerator.peak_tflops("TPU v5")["bf16"] == 459.0
  assert accelerator.default_f32_peak(accelerator.peak_tflops("NVIDIA A100-SXM4-80GB"), "gpu") == 156.0  # TF32
  assert accelerator.default_f32_peak(accelerator.peak_tflops("Tesla T4"), "gpu") == 8.1
  assert accelerator.default_f32_peak(accelerator.peak_tflops("TPU v4"), "tpu") == 275.0


def test_bad_arguments_are_one_line_each(cli):
  for args, words in ((("--parts=tests,gpu",), "--parts='tests,gpu': unknown ['gpu']"),
                      (("--seeds=1,eight",), "--seeds='1,eight': must be comma-separated integers >= 1")):
    run = _script(cli, *args)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"benchmarks/accelerator.py: {words}"), run.stderr
