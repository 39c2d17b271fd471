r"""The accelerator check: one prepared script for a machine with a GPU (< 8 minutes).

Writes ONE JSON (``--out``; default ``benchmarks/results/accelerator/<device kind>.json``) with:

* ``tests``: a pytest selection that means something on a GPU (``GPU_TESTS``: the MoE, PDE, OT-CLIP,
  optimizer, train-step and compute-dtype tests) run in a subprocess with ``JAX_PLATFORMS=cuda`` and
  float32 matmuls at full precision (the suite's float32 tolerances assume float32 arithmetic, not
  TF32); pass / fail / error / skip counts and the failing test ids.
* ``dpot_ti``: DPOT-Ti (``jaxlab.pde.make_dpot("Ti")``, 128^2, the official relative-L2 loss, Adam)
  train-step samples/s and achieved FLOP/s (XLA's cost analysis of the compiled step / step time)
  vs the device's peak (``PEAK_TFLOPS``), in float32 and with ``compute_dtype="bfloat16"``.
* ``moe_vs_dense``: one DQN TD update (``configs/dqn_minatar.py``, batch 32, Adam) with the Soft-MoE
  head vs the dense head, same config otherwise: ms per update.
* ``dqn_seeds``: whole-DQN frames/s (acting, replay, update in one program;
  ``benchmarks/rl_throughput.py``'s ``Ours``) with 1, 8 and 64 vmapped seeds.
* ``rl_studies`` (not in the default ``--parts``; its own call, ``--parts=rl_studies``, under 9
  minutes): the MinAtar expert-scaling design (``configs/rl_expert_scaling.py:full``: 2 games x 8
  cells x 3 vmapped seeds x 1M frames, ``benchmarks/rl_study.py``) for the first half of its time
  box, then the Atari 100k DER study (``benchmarks/rl_der_study.py``: DER vs DER + Soft MoE on 2
  games x 3 vmapped seeds x 100k agent steps) for the rest. Each cell runs in a subprocess cut at
  the deadline: the JSON lists the cells that finished (their returns and speed), the one that
  was cut (the step its log reached) and those skipped.

Each part has a time box (``PARTS``) inside an overall budget (``--budget_s``); a part or unit that
finds no time left is recorded as skipped, never dropped silently. On a machine without a GPU the
script prints one line saying so and exits with status 2 before doing anything else: jax is pinned
to ``JAX_PLATFORMS=cuda``, so it cannot fall back to the CPU.

  python benchmarks/accelerator.py                       # on the GPU machine (or benchmarks/accelerator.sh)
  python benchmarks/accelerator.py --out <dir>/h200.json
  python benchmarks/accelerator.py --cpu-smoke --out <dir>/smoke.json   # every part at tiny size, on CPU
  python benchmarks/accelerator.py --parts=rl_studies --budget_s=520    # the two RL studies (< 9 minutes)

``--cpu-smoke`` runs each part's code at toy sizes on the CPU (what the test suite does, so the
script cannot rot); its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import pkgutil
import re
import selectors
import subprocess
import sys
import time
from typing import Any, Callable

REPO = pathlib.Path(__file__).resolve().parent.parent
NO_GPU_EXIT = 2

# The pytest selection of part (a): tests of jitted numerics that run on any backend. The two
# files that need the suite's 8 devices (expert and PDE sharding) are left out; other tests that
# compare 1 and 8 devices fail on one GPU, and show as such in the failing ids.
GPU_TESTS = ("tests/moe", "tests/pde", "tests/ot_clip", "tests/optim", "tests/train/test_step.py",
             "tests/train/test_step_options.py", "tests/train/test_compute_dtype.py",
             "--ignore=tests/moe/test_expert_parallel.py", "--ignore=tests/pde/test_sharding.py",
             "--ignore=tests/pde/data")
SMOKE_TESTS = ("tests/optim/test_config.py::test_schedule_goes_to_the_learning_rate",)

# Peak dense (no sparsity) TFLOP/s per chip: "fp32" on CUDA cores, "tf32" and "bf16" on tensor
# cores / MXUs. Matched against jax's device_kind (lower-cased) in this order; None: not published
# or not supported. Sources, the vendors' data sheets (their "with sparsity" figures halved):
#   H100 SXM / PCIe / NVL, H200 SXM / NVL: nvidia.com/en-us/data-center/h100/ and .../h200/
#     (H100 SXM and H200: FP32 67, TF32 989*, BF16 1,979*; H100 PCIe: 51, 756*, 1,513*;
#     NVL: 60, 835*, 1,671*; * = with sparsity).
#   A100 (40/80 GB, SXM and PCIe): nvidia.com/en-us/data-center/a100/ (FP32 19.5, TF32 156, BF16 312).
#   L4: nvidia.com/en-us/data-center/l4/ (FP32 30.3, TF32 120*, BF16 242*).
#   T4: nvidia.com/en-us/data-center/tesla-t4/ (FP32 8.1; FP16 65; no TF32 or BF16 tensor cores).
#   TPU v4 / v5e / v5p / v6e: cloud.google.com/tpu/docs/v4, .../v5e, .../v5p, .../v6e (bf16 per chip:
#     275, 197, 459, 918). TPUs publish no float32 peak: at jax's default precision a float32 matmul
#     is one bfloat16 pass on the MXU (docs.jax.dev, "Matmul precision"), so its peak is the bf16 one.
PEAK_TFLOPS: tuple[tuple[str, dict[str, float | None]], ...] = (
    (r"\bh200 nvl\b", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5}),
    (r"\bh200\b", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4}),
    (r"\bh100 nvl\b", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5}),
    (r"\bh100 pcie\b", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5}),
    (r"\bh100\b", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4}),
    (r"\ba100\b", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0}),
    (r"\bl4\b", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0}),
    (r"\bt4\b", {"fp32": 8.1, "tf32": None, "bf16": None}),
    (r"\btpu v4\b", {"fp32": None, "tf32": None, "bf16": 275.0}),
    (r"\btpu v5 ?(lite|e)\b", {"fp32": None, "tf32": None, "bf16": 197.0}),
    (r"\btpu v5p?\b", {"fp32": None, "tf32": None, "bf16": 459.0}),
    (r"\btpu v6 ?(lite|e)\b", {"fp32": None, "tf32": None, "bf16": 918.0}),
)


def peak_tflops(device_kind: str) -> dict[str, float | None] | None:
  """The ``PEAK_TFLOPS`` entry of a jax ``device_kind`` (e.g. "NVIDIA H200"), or None if not listed."""
  for pattern, peaks in PEAK_TFLOPS:
    if re.search(pattern, device_kind.lower()):
      return peaks
  return None


def default_f32_peak(peaks: dict[str, float | None] | None, platform: str) -> float | None:
  """TFLOP/s a float32 matmul at jax's default precision can reach: TF32 on GPUs that have it, one
  bfloat16 pass on TPUs, else plain FP32."""
  if peaks is None:
    return None
  if platform == "tpu":
    return peaks["bf16"]
  return peaks["tf32"] or peaks["fp32"]


# ------------------------------------------------------------------ time boxes

class Deadline:
  """A part's time box, cut at the end of the overall budget; ``left()``: seconds remaining."""

  def __init__(self, seconds: float, overall_end: float):
    self.end = min(time.monotonic() + seconds, overall_end)

  def left(self) -> float:
    return self.end - time.monotonic()


SMOKE_TIMING: dict[str, Any] = {}  # --cpu-smoke: time each thing twice, whatever the arguments


def _timed(fn: Callable[[], Any], deadline: Deadline, min_reps: int = 3, max_reps: int = 20,
           min_seconds: float = 0.0) -> list[float]:
  """Seconds per call of ``fn`` (which blocks until done): at least ``min_reps`` calls (time
  permitting), at most ``max_reps``, until ``min_seconds`` have passed; stops early when the
  deadline is near."""
  if SMOKE_TIMING:
    min_reps, max_reps, min_seconds = SMOKE_TIMING["min_reps"], SMOKE_TIMING["max_reps"], 0.0
  times: list[float] = []
  while len(times) < max_reps:
    if len(times) >= min_reps and (deadline.left() < 2 * max(times) or sum(times) >= min_seconds):
      break
    if times and deadline.left() < max(times):
      break
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return times


def _median(values: list[float]) -> float:
  v = sorted(values)
  n = len(v)
  return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


# ------------------------------------------------------------------ part (a): the GPU test subset

_RESULT = re.compile(r"^(\S+::\S+(?: \S+)*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def run_tests(selection: tuple[str, ...], deadline: Deadline, platform: str) -> dict[str, Any]:
  """pytest ``selection`` in a subprocess pinned to ``platform``, float32 matmuls at full precision;
  counts per outcome and the failing ids, from pytest's verbose lines as they come (so a run cut by
  the time box still reports what it did)."""
  env = dict(os.environ, JAX_PLATFORMS=platform, JAX_DEFAULT_MATMUL_PRECISION="highest",
             PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])))
  cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *selection]
  counts = {k: 0 for k in ("passed", "failed", "error", "skipped", "xfail", "xpass")}
  failing: list[str] = []
  start = time.monotonic()
  proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
  timed_out = False
  tail: list[str] = []
  sel = selectors.DefaultSelector()
  sel.register(proc.stdout, selectors.EVENT_READ)
  while True:
    if deadline.left() <= 0:
      timed_out = True
      os.killpg(proc.pid, 9)  # the pytest process group this function started
      break
    if not sel.select(timeout=min(1.0, max(deadline.left(), 0.01))):
      if proc.poll() is not None:
        break
      continue
    line = proc.stdout.readline()
    if not line:
      break
    tail = (tail + [line.rstrip()])[-5:]
    m = _RESULT.match(line)
    if m:
      counts[m.group(2).lower()] += 1
      if m.group(2) in ("FAILED", "ERROR"):
        failing.append(m.group(1))
  proc.wait()
  return {"selection": list(selection), "platform": platform, "matmul_precision": "highest", **counts,
          "failing": failing, "returncode": proc.returncode, "timed_out": timed_out,
          "wall_s": round(time.monotonic() - start, 1), "last_lines": tail}


# ------------------------------------------------------------------ part (b): DPOT-Ti step speed

def dpot_speed(deadline: Deadline, smoke: bool, batch_size: int, peaks: dict | None, platform: str) -> dict[str, Any]:
  """DPOT-Ti train steps in float32 and bfloat16: samples/s, XLA-counted FLOPs, FLOP/s vs peak."""
  import jax  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.dpot import count_params, init_params  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.losses import make_loss_fn  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.sizes import make_dpot  # pylint: disable=import-outside-toplevel
  from jaxlab.train import TrainState, make_train_step  # pylint: disable=import-outside-toplevel

  model = make_dpot("tiny", depth=1) if smoke else make_dpot("Ti")
  params = init_params(model, jax.random.key(0))
  kx, ky = jax.random.split(jax.random.key(1))
  shape = (batch_size, model.img_size, model.img_size)
  batch = {"x": jax.random.normal(kx, shape + (model.in_timesteps, model.in_channels)),
           "y": jax.random.normal(ky, shape + (model.out_timesteps, model.out_channels))}
  opt = optax.adam(1e-3, b1=0.9, b2=0.9)
  out: dict[str, Any] = {"model": "tiny (smoke)" if smoke else "Ti", "params": count_params(params),
                         "img_size": model.img_size, "batch": batch_size}
  for dtype, peak in (("float32", default_f32_peak(peaks, platform)), ("bfloat16", (peaks or {}).get("bf16"))):
    if deadline.left() <= 0:
      out[dtype] = {"skipped": "no time left in the part's time box"}
      continue
    step = make_train_step(make_loss_fn(model.apply), opt, compute_dtype=None if dtype == "float32" else dtype)
    holder = [TrainState.create(params, opt, jax.random.key(2))]
    start = time.perf_counter()
    compiled = step.jitted.lower(holder[0], batch).compile()
    compile_s = time.perf_counter() - start
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    flops = float(cost["flops"])

    def once():
      holder[0], metrics = compiled(holder[0], batch)
      jax.block_until_ready(metrics["loss"])
    once()  # warm-up
    times = _timed(once, deadline, min_reps=3, max_reps=30, min_seconds=5.0)
    t = _median(times)
    achieved = flops / t / 1e12
    out[dtype] = {"compile_s": round(compile_s, 2), "step_ms": 1e3 * t, "steps_timed": len(times),
                  "samples_per_s": batch_size / t, "flops_per_step": flops, "achieved_tflops": achieved,
                  "peak_tflops": peak, "fraction_of_peak": achieved / peak if peak else None,
                  "loss": float(jax.device_get(compiled(holder[0], batch)[1]["loss"]))}
  return out


# ------------------------------------------------------------------ part (c): Soft-MoE vs dense TD update

def td_update_speed(deadline: Deadline, smoke: bool, updates_per_call: int) -> dict[str, Any]:
  """ms per DQN TD update (loss, gradient, Adam) on a replay-shaped batch, by network head."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from jaxlab.config_files import load_config  # pylint: disable=import-outside-toplevel
  from jaxlab.optim import optimizer_from_config  # pylint: disable=import-outside-toplevel
  from jaxlab.rl.networks import count_params  # pylint: disable=import-outside-toplevel
  from jaxlab.rl.replay import Transition  # pylint: disable=import-outside-toplevel
  from jaxlab.train import make_train_step  # pylint: disable=import-outside-toplevel
  from jaxlab.train.state import make_init_fn  # pylint: disable=import-outside-toplevel
  from jaxlab.experiment import task_context  # pylint: disable=import-outside-toplevel
  from jaxlab.tasks import make_task  # pylint: disable=import-outside-toplevel

  out: dict[str, Any] = {"config": "dqn_minatar:tiny" if smoke else "dqn_minatar", "updates_per_call": updates_per_call}
  for head in ("softmoe", "dense"):
    if deadline.left() <= 0:
      out[head] = {"skipped": "no time left in the part's time box"}
      continue
    c = load_config("dqn_minatar:tiny" if smoke else "dqn_minatar")
    c.network.head = head
    task = make_task(c, task_context(c))
    inference = task.inference
    opt = optimizer_from_config(c.optimizer, c.num_steps)
    state = jax.jit(make_init_fn(task.init_params, opt, task.init_extra))(jax.random.key(0))
    k = jax.random.split(jax.random.key(1), 3)
    lead = (updates_per_call, c.batch_size)
    obs = jax.random.bernoulli(k[0], 0.1, lead + inference.data["obs_shape"])
    num_actions = inference.data["num_actions"]
    batch = Transition(obs=obs, action=jax.random.randint(k[1], lead, 0, num_actions).astype(jnp.int32),
                       reward=jax.random.uniform(k[2], lead), discount=jnp.ones(lead),
                       next_obs=jnp.roll(obs, 1, axis=1))
    step = make_train_step(task.loss_fn, opt, update_extra=task.update_extra, steps_per_call=updates_per_call)
    holder = [state]

    def once():
      holder[0], metrics = step(holder[0], batch)
      jax.block_until_ready(metrics["loss"])
    start = time.perf_counter()
    once()  # compile
    compile_s = time.perf_counter() - start
    times = _timed(once, deadline, min_reps=3, max_reps=20, min_seconds=3.0)
    out[head] = {"ms_per_update": 1e3 * _median(times) / updates_per_call, "calls_timed": len(times),
                 "compile_s": round(compile_s, 2), "params": count_params(state.params)}
  if "ms_per_update" in out.get("softmoe", {}) and "ms_per_update" in out.get("dense", {}):
    out["softmoe_over_dense"] = out["softmoe"]["ms_per_update"] / out["dense"]["ms_per_update"]
  return out


# ------------------------------------------------------------------ part (d): DQN frames/s vs seeds

def dqn_seeds(deadline: Deadline, smoke: bool, seed_counts: tuple[int, ...], updates_per_call: int) -> dict[str, Any]:
  """Whole-DQN frames/s with vmapped seeds, through ``benchmarks/rl_throughput.py``'s ``Ours``."""
  sys.path.insert(0, str(REPO / "benchmarks"))
  from rl_throughput import Ours  # pylint: disable=import-outside-toplevel

  out: dict[str, Any] = {"config": "dqn_minatar:tiny" if smoke else "dqn_minatar", "head": "softmoe",
                         "updates_per_call": updates_per_call}
  for seeds in seed_counts:
    if deadline.left() <= 0:
      out[str(seeds)] = {"skipped": "no time left in the part's time box"}
      continue
    start = time.perf_counter()
    ours = Ours("softmoe", seeds=seeds, config_arg="tiny" if smoke else "", updates_per_call=updates_per_call)
    setup_s = time.perf_counter() - start  # init, prefill and the compiling first call
    times = _timed(ours.run, deadline, min_reps=3, max_reps=10, min_seconds=3.0)
    t = _median(times)
    out[str(seeds)] = {"frames_per_s": ours.frames_per_call / t, "frames_per_s_per_seed": ours.frames_per_call / t / seeds,
                       "ms_per_update": 1e3 * t / updates_per_call, "calls_timed": len(times),
                       "setup_s": round(setup_s, 2)}
  return out


# ------------------------------------------------------------------ part (e): the RL studies, time-boxed

MIN_CELL_S = 20.0  # a cell is not started with less time than this left (start-up and compilation alone)


def _run_until(cmd: list[str], seconds: float) -> dict[str, Any]:
  """Runs ``cmd`` (a study's one-cell command) in its own process group, killed after ``seconds``.

  The cell sees one device, as on a one-GPU machine: a CPU device count forced in ``XLA_FLAGS``
  (the test suite's 8) is left out, since a cell's vmapped seeds are sharded over all devices.
  """
  flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", "")).strip()
  env = dict(os.environ, XLA_FLAGS=flags,
             PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])))
  start = time.monotonic()
  proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
  try:
    out, _ = proc.communicate(timeout=max(seconds, 0.1))
    cut = False
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, 9)  # the process group this function started
    out, _ = proc.communicate()
    cut = True
  return {"returncode": None if cut else proc.returncode, "cut": cut, "wall_s": round(time.monotonic() - start, 1),
          "last_lines": [line for line in (out or "").splitlines() if line.strip()][-3:]}


def _reached(workdir: pathlib.Path) -> dict[str, Any]:
  """How far a cut cell got: its last logged step and training return (from its ``metrics.jsonl``)."""
  path = workdir / "metrics.jsonl"
  rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
  rows = [r for r in rows if "episode_return" in r]
  if not rows:
    return {"logged_step": None}
  last = rows[-1]
  return {"logged_step": last.get("step"), "episode_return": last.get("episode_return"),
          **{k: last[k] for k in ("frames", "agent_steps") if k in last}}


def _study_cells(units: list[tuple[str, list[str], pathlib.Path]], end: float,
                 read: Callable[[str], dict[str, Any] | None]) -> dict[str, Any]:
  """Runs ``(key, command, workdir)`` units in order until ``end``; ``read(key)``: a finished cell's record."""
  ran, cut, skipped, failed = {}, {}, [], {}
  for key, cmd, workdir in units:
    left = end - time.monotonic()
    if cut or left < MIN_CELL_S:
      skipped.append(key)
      continue
    run = _run_until(cmd, left)
    record = read(key)
    if record is not None:
      ran[key] = record
    elif run["cut"]:
      cut[key] = {**_reached(workdir), "wall_s": run["wall_s"]}
    else:
      failed[key] = run
  return {"ran": ran, "cut": cut, "skipped": skipped, "failed": failed}


def rl_studies(deadline: Deadline, smoke: bool, minatar_share: float = 0.5) -> dict[str, Any]:
  """The MinAtar expert-scaling design, then the Atari 100k DER study, each cell until the deadline."""
  import tempfile  # pylint: disable=import-outside-toplevel
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="accelerator_rl_"))
  py = sys.executable
  out: dict[str, Any] = {}

  # MinAtar: configs/rl_expert_scaling.py:full, one benchmarks/rl_study.py call per (game, cell)
  sys.path.insert(0, str(REPO))
  from benchmarks.rl_study_cells import units  # pylint: disable=import-outside-toplevel
  from jaxlab.config_files import load_config  # pylint: disable=import-outside-toplevel
  spec = "rl_expert_scaling:" + ("full_smoke" if smoke else "full")
  study = load_config(spec)
  m_out, m_work = tmp / "minatar", tmp / "minatar_runs"
  m_json = m_out / f"{study.prefix}.json"
  m_units = [(key, [py, "benchmarks/rl_study.py", f"--config=configs/{spec.replace(':', '.py:')}",
                    f"--config.out_dir={m_out}", f"--config.workdir={m_work}", f"--cells={key}"], m_work / key)
             for key, _, _ in units(study)]
  keep = ("cell", "game", "what", "parameters", "frames", "runs", "eval_return", "eval_episodes", "eval_capped",
          "final_train_return", "frames_per_sec_all_runs", "wall_time_s")

  def read_minatar(key: str) -> dict[str, Any] | None:
    records = json.loads(m_json.read_text()) if m_json.exists() else {}
    return {k: records[key][k] for k in keep if k in records[key]} if key in records else None
  m_end = time.monotonic() + minatar_share * deadline.left()
  out["minatar_expert_scaling"] = {"config": f"configs/{spec.replace(':', '.py:')}", "seeds": study.seeds,
                                   "frames_per_run": study.base.num_steps * 4,
                                   **_study_cells(m_units, min(m_end, deadline.end), read_minatar)}

  # Atari 100k DER vs DER + Soft MoE: one benchmarks/rl_der_study.py call per (game, head)
  from benchmarks import rl_der_study  # pylint: disable=import-outside-toplevel
  d_work, d_json = tmp / "der", tmp / "der.json"
  size = (["--size=tiny", "--agent_steps=150", "--eval_episodes=2", "--seeds=2", "--games=Pong"] if smoke else
          ["--size=real", "--agent_steps=100000", "--eval_episodes=100", "--seeds=3"])  # Atari 100k, as the study
  args = rl_der_study.parse_args(size + [f"--workdir={d_work}", f"--out={d_json}"])
  d_units = [(f"{g}/{h}", [py, "benchmarks/rl_der_study.py", *(a for a in size if not a.startswith("--games=")),
                           f"--games={g}", f"--heads={h}",
                           f"--workdir={d_work}", f"--out={d_json}"], d_work / g / h)
             for g in args.games for h in args.heads]

  def read_der(key: str) -> dict[str, Any] | None:
    path = d_work / "cells" / f"{key.replace('/', '__')}.json"
    if not path.exists():
      return None
    r = json.loads(path.read_text())
    return {k: r[k] for k in ("parameters", "agent_steps", "eval_return", "eval_episodes", "human_normalized",
                              "s_per_1k_agent_steps", "wall_time_s")}
  der = _study_cells(d_units, deadline.end, read_der)
  iqm = rl_der_study.report(args, der["skipped"])["iqm_human_normalized"] if der["ran"] else {}
  out["atari100k_der"] = {"command": " ".join(d_units[0][1][1:2] + size) if d_units else "",
                          "games": list(args.games), "heads": list(args.heads), "seeds": args.seeds,
                          "agent_steps_per_run": args.agent_steps, **der, "iqm_human_normalized": iqm}
  return out


# ------------------------------------------------------------------ driver

# name -> time box in seconds on the GPU (their sum + start-up stays under 8 minutes)
PARTS = {"tests": 130, "dpot_ti": 120, "moe_vs_dense": 60, "dqn_seeds": 110}
# parts run only when --parts names them (each its own call of the script), with their time box
OPTIONAL_PARTS = {"rl_studies": 500}
SMOKE_BOX_S = 600.0  # --cpu-smoke: every unit must run (on a loaded CPU too); no time boxes to speak of


def _check_backend(smoke: bool) -> tuple[Any, str | None]:
  """Imports jax pinned to the CUDA backend (CPU for ``--cpu-smoke``); returns (jax, why not) where
  ``why not`` is a one-line reason when there is no GPU."""
  os.environ["JAX_PLATFORMS"] = "cpu" if smoke else "cuda"  # no silent fallback to another backend
  # The tests' pytest subprocess needs GPU memory of its own: no up-front reservation here or there.
  os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
  if smoke:  # toy programs run a few times: XLA:CPU's LLVM optimisation would cost more than it saves
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
  import jax  # pylint: disable=import-outside-toplevel
  try:
    devices = jax.devices()
  except Exception as e:  # pylint: disable=broad-except  # jax raises RuntimeError, or AssertionError without a CUDA plugin
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    plugins = [m.name for m in pkgutil.iter_modules() if m.name.startswith("jax_cuda")]
    return jax, (f"jax could not initialise a CUDA backend ({reason}; CUDA plugins installed: "
                 f"{', '.join(plugins) or 'none'})")
  if not smoke and devices[0].platform != "gpu":
    return jax, f"jax's devices are {devices[0].platform!r}, not a GPU"
  return jax, None


def _slug(text: str) -> str:
  return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "device"


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", default="", help="the JSON to write (default benchmarks/results/accelerator/<device>.json)")
  parser.add_argument("--cpu-smoke", dest="cpu_smoke", action="store_true",
                      help="every part at tiny size on the CPU (for the test suite; the numbers mean nothing)")
  parser.add_argument("--budget_s", type=float, default=440.0,
                      help="overall time budget in seconds (ignored by --cpu-smoke)")
  parser.add_argument("--parts", default=",".join(PARTS),
                      help=f"comma-separated subset of {','.join(PARTS)} (default), or {','.join(OPTIONAL_PARTS)}")
  parser.add_argument("--dpot_batch", type=int, default=32)
  parser.add_argument("--seeds", default="1,8,64", help="vmapped seed counts of part dqn_seeds")
  args = parser.parse_args(argv)
  parts = [p for p in args.parts.split(",") if p]
  boxes = {**PARTS, **OPTIONAL_PARTS}
  unknown = sorted(set(parts) - set(boxes))
  seed_counts = args.seeds.split(",")
  problem = (f"--parts={args.parts!r}: unknown {unknown}; allowed: {', '.join(boxes)}" if unknown or not parts else
             f"--seeds={args.seeds!r}: must be comma-separated integers >= 1" if not all(
                 s.strip().isdigit() and int(s) >= 1 for s in seed_counts) else
             f"--dpot_batch={args.dpot_batch}: must be >= 1" if args.dpot_batch < 1 else
             f"--budget_s={args.budget_s}: must be > 0" if not args.budget_s > 0 else None)
  if problem:
    print(f"benchmarks/accelerator.py: {problem}", file=sys.stderr)
    return 2

  jax, no_gpu = _check_backend(args.cpu_smoke)
  if no_gpu:
    print(f"benchmarks/accelerator.py: no GPU: {no_gpu}; nothing was run", flush=True)
    return NO_GPU_EXIT

  start = time.monotonic()
  overall_end = start + (SMOKE_BOX_S * len(PARTS) if args.cpu_smoke else args.budget_s)
  device = jax.devices()[0]
  platform = device.platform
  peaks = peak_tflops(device.device_kind)
  smoke = args.cpu_smoke
  if smoke:
    SMOKE_TIMING.update(min_reps=2, max_reps=2)
  result: dict[str, Any] = {
      "device_kind": device.device_kind, "platform": platform, "devices": jax.device_count(),
      "jax": jax.__version__, "jaxlib": getattr(__import__("jaxlib"), "__version__", "?"),
      "cpu_smoke": smoke, "budget_s": args.budget_s, "peak_tflops": peaks,
      "default_f32_peak_tflops": default_f32_peak(peaks, platform),
      "note": ("--cpu-smoke: every part at toy size on the CPU; the numbers mean nothing" if smoke
               else "float32 runs use jax's default matmul precision (TF32 on Ampere+ GPUs); the tests run at 'highest'"),
      "parts": {},
  }
  seeds = (2,) if smoke else tuple(int(s) for s in seed_counts)
  runners: dict[str, Callable[[Deadline], dict[str, Any]]] = {
      "tests": lambda d: run_tests(SMOKE_TESTS if smoke else GPU_TESTS, d, "cpu" if smoke else "cuda"),
      "dpot_ti": lambda d: dpot_speed(d, smoke, 2 if smoke else args.dpot_batch, peaks, platform),
      "moe_vs_dense": lambda d: td_update_speed(d, smoke, 2 if smoke else 100),
      "dqn_seeds": lambda d: dqn_seeds(d, smoke, seeds, 2 if smoke else 250),
      "rl_studies": lambda d: rl_studies(d, smoke),
  }
  failed = False
  for name in parts:  # the tests first: their subprocess finds the GPU's memory untouched
    box = SMOKE_BOX_S if smoke else boxes[name]
    deadline = Deadline(box, overall_end)
    if deadline.left() <= 0:
      result["parts"][name] = {"status": "skipped: the overall budget is spent"}
      continue
    t, cpu = time.monotonic(), time.process_time()
    try:
      part = runners[name](deadline)
      part["status"] = "ok" if deadline.left() > 0 else "ok (time box reached; later units skipped)"
    except Exception as e:  # pylint: disable=broad-except  # recorded in the JSON and the exit status
      part = {"status": f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
      failed = True
    part["part_wall_s"] = round(time.monotonic() - t, 1)
    part["part_cpu_s"] = round(time.process_time() - cpu, 1)  # this process's threads (not the tests' pytest)
    result["parts"][name] = part
    print(f"{name}: {json.dumps(part)[:400]}", flush=True)
  result["wall_s"] = round(time.monotonic() - start, 1)
  out = pathlib.Path(args.out or REPO / "benchmarks" / "results" / "accelerator" / f"{_slug(device.device_kind)}.json")
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(json.dumps(result, indent=1) + "\n")
  print(f"wrote {out} ({result['wall_s']} s)", flush=True)
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
