"""docs/guides/reproduce_the_paper.md: its cheap commands run as written, the others say why not,
and every cost it quotes is the one its result file holds."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.guide_blocks import guide_block

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = "reproduce_the_paper.md"
RESULTS = os.path.join(REPO, "benchmarks", "results", "rl")
RUN, NOT_RUN = "# run by the test suite", "# not run by the test suite: "


def _text() -> str:
  with open(os.path.join(REPO, "docs", "guides", PAGE), encoding="utf-8") as f:
    return f.read()


def _result(name: str):
  with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
    return json.load(f)


def _run_block(marker: str, workdir, timeout: int) -> subprocess.CompletedProcess:
  """The page's bash block holding ``marker``, as written, from the repository root, with
  ``$WORKDIR`` a fresh folder and the suite's Python first on the PATH."""
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}  # as a user runs it
  env.update(WORKDIR=str(workdir), PYTHONPATH=REPO,
             PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
  return subprocess.run(["bash", "-e", "-c", guide_block(PAGE, marker)], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=timeout)


def test_every_command_block_is_run_by_the_suite_or_says_why_not():
  blocks = re.findall(r"^```bash\n(.*?)^```", _text(), re.S | re.M)
  assert len(blocks) >= 7
  run = [b for b in blocks if b.startswith(RUN + "\n") or b.startswith(RUN + " (")]
  not_run = [b for b in blocks if b.startswith(NOT_RUN)]
  assert len(run) + len(not_run) == len(blocks), [b.splitlines()[0] for b in blocks]
  for b in not_run:  # each says what it costs
    assert re.search(r"\d+ (minutes|hours|days)", b.splitlines()[0]) or "needs" in b.splitlines()[0], b
  # the blocks the suite runs are those of the tests below (one marker each)
  assert sorted(b.splitlines()[1].split()[0] for b in run) == ["benchmarks/accelerator.sh", "python"]


def test_the_costs_quoted_are_the_result_files():
  text = " ".join(_text().split())  # one line: numbers may wrap
  two_games = _result("expert_scaling_two_games.json")
  minutes = sum(cell["wall_time_s"] for cell in two_games.values()) / 60
  frames = {cell["frames"] for cell in two_games.values()}
  assert frames == {60_000}
  assert f"**{minutes:.1f} minutes** of wall time for its {len(two_games)} programs" in text
  assert f"**{minutes * 1e6 / 60_000 / 60:.1f} hours** ({minutes:.1f} minutes × 1M / 60k frames)" in text
  one, three = _result("der_cost.json")["rows"], _result("der_cost_3_seeds.json")["rows"]
  for rows, seeds in ((one, "1"), (three, "3 (vmapped)")):
    assert [r["head"] for r in rows] == ["dense", "softmoe"] and {r["seeds"] for r in rows} == {int(seeds[0])}
    loads = sorted(r["load_average"] for r in rows)
    assert (f"| {seeds} | {rows[0]['s_per_1k_agent_steps']:,.0f} s | {rows[1]['s_per_1k_agent_steps']:,.0f} s | "
            f"{loads[0]:.1f}-{loads[-1]:.1f} |") in text
  assert " + ".join(f"{r['wall_s_incl_compile_and_warmup']:.0f}" for r in one) + " s of wall time" in text
  hours = [r["s_per_1k_agent_steps"] * 100 / 3600 for r in three]  # 100k agent steps
  assert f"**{hours[0]:.1f} hours** (dense) to **{hours[1]:.1f} hours** (Soft MoE)" in text
  atari = _result("atari_throughput.json")
  dense, moe = (atari["heads"][h]["frames_per_sec"] for h in ("dense", "softmoe"))
  assert f"**{dense:.1f} frames per second** on this CPU with the dense head and {moe:.1f}" in text
  assert f"load {atari['load_average_start']:.1f}" in text and atari["game"] == "Pong"
  assert f"about **{200e6 / dense / 86400:.1f} days**" in text
  smoke = _result("der_smoke_time.json")
  assert smoke["command"] in " ".join(guide_block(PAGE, "--size=tiny").replace("\\\n", " ").split())
  assert (f"**{smoke['wall_s']:.0f} seconds** of wall time ({smoke['cpu_s']:.0f} s of CPU) at load "
          f"{smoke['load_average']:.0f}") in text


def test_the_gpu_call_without_a_gpu_says_so_and_writes_nothing(tmp_path):
  p = _run_block("--wheels no-such-folder", tmp_path, timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  lines = [line for line in p.stdout.splitlines() if line.strip()]
  assert lines[0].startswith("benchmarks/accelerator.py: no GPU: jax could not initialise a CUDA backend (")
  assert lines[0].endswith("; nothing was run") and lines[1:] == ["exit status 2"], p.stdout
  assert "Traceback" not in p.stderr and not (tmp_path / "gpu.json").exists()


@pytest.mark.slow  # the DER smoke run (4 cells compiled; see der_smoke_time.json); fast: the tests above
def test_the_der_smoke_run_writes_the_study_json(tmp_path):
  p = _run_block("--size=tiny", tmp_path, timeout=2400)
  assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
  result = json.loads((tmp_path / "der.json").read_text())
  assert set(result["cells"]) == {f"{g}/{h}" for g in ("Boxing", "Breakout") for h in ("dense", "softmoe")}, \
      sorted(result["cells"])
