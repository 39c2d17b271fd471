"""benchmarks/rl_rejax_throughput.py at tiny size, our loop only (rejax lives in its own venv)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from benchmarks import rl_rejax_throughput as bench


def test_our_rows_run_and_the_rejax_rows_are_skipped_in_one_line(tmp_path, capsys):
  out = tmp_path / "rejax.json"
  result = bench.main(["--frames=20", "--updates_per_call=5", "--repeats=1", "--heads=dense", "--seeds=1", "--config_arg=tiny",
                       "--loops=ours1,rejax", "--no_floor", f"--out={out}"])
  printed = capsys.readouterr().out
  has_rejax = importlib.util.find_spec("rejax") is not None
  assert ("rejax is not installed: rejax rows skipped" in printed) == (not has_rejax)
  loops = [r["loop"] for r in result["rows"]]
  assert loops[0] == "jaxlab num_envs=1"
  assert ("rejax num_envs=4" in loops) == has_rejax
  ours = result["rows"][0]
  assert ours["frames_per_seed"] == 20 and ours["frames_per_sec"] > 0 and ours["compile_s"] >= 0
  assert ours["cpu_ms_per_update_all_seeds"] > 0
  assert ours["floor_fraction"] is None and not any(r["loop"].startswith("floor") for r in result["rows"])
  assert result["ratios"] == [] or has_rejax
  assert result["summary"]["dense_1"]["ours1_frames_per_sec"] == ours["frames_per_sec"]
  saved = json.loads(out.read_text())
  assert saved["rows"] == json.loads(json.dumps(result["rows"]))
  assert {"command", "date", "machine", "versions", "method", "like_for_like"} <= set(saved)
  assert saved["versions"]["jax"]


def test_frames_count_per_seed_or_of_all_seeds_in_whole_calls():
  assert bench.calls_per_row(100_000, 8) == 100
  assert bench.calls_per_row(100_000, 8, all_seeds=True) == 13  # 104k frames: 13 calls of 8 x 1000
  assert bench.calls_per_row(100_000, 1, all_seeds=True) == 100


@pytest.mark.parametrize("argv,message", [(["--frames=1500"], "multiple of 1000"), (["--updates_per_call=5", "--frames=30"], "multiple of 20"),
                                          (["--loops=rejax"], "at least one of ours"), (["--chunk=0"], "--chunk=0")])
def test_bad_arguments_are_one_line(argv, message, capsys):
  with pytest.raises(SystemExit):
    bench.main(argv)
  assert message in capsys.readouterr().err
