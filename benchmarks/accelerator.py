r"""The accelerator plan: ONE call on a machine with a GPU does everything (< 8.5 minutes on an H200).

  benchmarks/accelerator.sh                  # on the GPU machine: wheels, then every part below

``accelerator.sh`` (no arguments) runs this script, which pins jax to CUDA, installs the wheels of
``.whl/`` offline (``make device-wheels`` fills it here; ``benchmarks/device_wheels.py``: only what
the machine lacks, into a folder of its own, nothing it has replaced), then runs the parts in
order, each in its time box (seconds; their sum is the ``--budget_s`` of 480):

==================  ===  ============================================================================
part                box  what it measures
==================  ===  ============================================================================
``tests``           100  the GPU test subset (``GPU_TESTS``: MoE, PDE, OT-CLIP, optimizers, the train
                         step and compute dtypes) in a pytest subprocess (``-n 4`` where pytest-xdist
                         is there) with ``JAX_PLATFORMS=cuda`` and float32 matmuls at full precision
                         (the suite's float32 tolerances assume float32, not TF32): outcome counts
                         and the failing ids
``dpot_ti``          50  DPOT-Ti (128^2, the official relative-L2 loss, Adam) train-step samples/s
                         and XLA-counted FLOP/s vs the device's peak (``PEAK_TFLOPS``), float32 and
                         bfloat16 compute
``moe_vs_dense``     30  one DQN TD update (``configs/dqn_minatar.py``, batch 32, Adam), Soft-MoE
                         vs dense head: ms per update
``dqn_seeds``        60  whole-DQN frames/s (acting, replay, update in one program;
                         ``benchmarks/rl_throughput.py``'s ``Ours``) at 1, 8 and 64 vmapped seeds
``minatar_scaling``  90  the MinAtar expert-scaling design (``configs/rl_expert_scaling.py:full``:
                         Breakout then SpaceInvaders, 8 cells, 3 vmapped seeds) run as the first
                         ``--minatar_frames`` frames of each run (the whole design: 1M), cells in
                         order, ``PARALLEL_UNITS`` processes at once, until the box ends
``atari_der``       150  Atari 100k DER on ale-py's emulator (``env.backend = "ale_py"``): which
                         stepping route works here (``env.step_via`` "xla" vs "callback", compared
                         step by step), the real-size cost (``benchmarks/rl_der_study.py --measure``:
                         s per 1k agent steps of DER and DER + Soft MoE, 3 vmapped seeds, the two
                         heads side by side: what the study costs on this device), then the study's
                         cells that can finish in what is left of the box
==================  ===  ============================================================================

Expected on an H200 (no run yet): ~20 s of wheels and jax start-up, the 480 s of boxes (a part
that runs past its box, in a compilation that cannot be cut, shortens the later ones; the last
ones are subprocesses, killed on time): about 8.5 minutes for the call; with the machine's start
and the tree's transfer, 10 of a session's 15 minutes of device time. A watchdog ends the run at
the budget plus ``WATCHDOG_GRACE_S`` in any case.

The result is ONE JSON (``--out``; default ``benchmarks/results/accelerator/<device kind>.json``),
rewritten after the wheels and after every part, so a run killed from outside still leaves what
it measured: per part its numbers, ``status`` and wall time, and for the studies the cells that
finished (their returns and speed), those the box cut (the step their logs reached) and those
skipped; a part or unit that finds no time left says so, nothing is dropped silently. On a
machine without a GPU the script prints one line saying so and exits with status 2 before doing
anything else: jax is pinned to ``JAX_PLATFORMS=cuda``, so it cannot fall back to the CPU.

  python benchmarks/accelerator.py --out <dir>/h200.json            # the same, with this interpreter
  python benchmarks/accelerator.py --cpu-smoke --out <dir>/smoke.json  # every part at toy size, on CPU
  python benchmarks/accelerator.py --parts=dpot_ti,dqn_seeds         # a subset

``--cpu-smoke`` runs each part's code at toy sizes on the CPU (what the test suite does, so the
script cannot rot); its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import pkgutil
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from typing import Any, Callable

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]  # this tree's jaxlab; rl_throughput's own imports
from benchmarks import device_wheels  # noqa: E402

NO_GPU_EXIT = 2
WATCHDOG_EXIT = 3

# name -> time box in seconds on the GPU, in the order they run (the tests first: their pytest
# subprocess finds the GPU's memory untouched). Sum: the default --budget_s.
PARTS = {"tests": 100, "dpot_ti": 50, "moe_vs_dense": 30, "dqn_seeds": 60, "minatar_scaling": 90, "atari_der": 150}
BUDGET_S = float(sum(PARTS.values()))
WATCHDOG_GRACE_S = 40.0  # past the budget: a compilation a box could not cut; then the watchdog ends the run
SMOKE_BOX_S = 900.0      # --cpu-smoke: every unit must run (on a loaded CPU too: ~600 s seen for atari_der at load 15)

# The pytest selection of part "tests": tests of jitted numerics that run on any backend. The two
# files that need the suite's 8 devices (expert and PDE sharding) and the data readers (host code,
# with packages of their own) are left out; other tests that compare 1 and 8 devices fail on one
# GPU, and show as such in the failing ids.
GPU_TESTS = ("tests/moe", "tests/pde", "tests/ot_clip", "tests/optim", "tests/train/test_step.py",
             "tests/train/test_step_options.py", "tests/train/test_compute_dtype.py",
             "--ignore=tests/moe/test_expert_parallel.py", "--ignore=tests/pde/test_sharding.py",
             "--ignore=tests/pde/data", "--ignore=tests/ot_clip/data")
SMOKE_TESTS = ("tests/optim/test_config.py::test_schedule_goes_to_the_learning_rate",)
TEST_WORKERS = 4  # pytest-xdist processes on the GPU (compilation is the tests' cost, and it is per CPU core)

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


# ------------------------------------------------------------------ the library's entry points

def _api() -> types.SimpleNamespace:
  """The jaxlab entry points the parts call, imported after jax is pinned to its backend. The one
  place that names them: a function that moves is followed here."""
  # pylint: disable=import-outside-toplevel
  from jaxlab.config_files import load_config
  from jaxlab.experiment import make_task, task_context
  from jaxlab.experiment.optimizer import optimizer_of
  from jaxlab.pde.dpot import count_params as dpot_params, init_params as dpot_init
  from jaxlab.pde.losses import make_loss_fn as pde_loss_fn
  from jaxlab.pde.sizes import make_dpot
  from jaxlab.rl.atari import make_atari
  from jaxlab.rl.networks import count_params as rl_params
  from jaxlab.rl.replay import Transition
  from jaxlab.train import TrainState, make_train_step
  from jaxlab.train.state import make_init_fn
  return types.SimpleNamespace(**locals())


# ------------------------------------------------------------------ time boxes

class Deadline:
  """A part's time box, cut at the end of the overall budget; ``left()``: seconds remaining."""

  def __init__(self, seconds: float, overall_end: float):
    self.end = min(time.monotonic() + seconds, overall_end)

  def left(self) -> float:
    return self.end - time.monotonic()


SMOKE_TIMING: dict[str, Any] = {}  # --cpu-smoke: time each thing twice, whatever the arguments
CHILDREN: set[int] = set()          # process groups this script started and has not reaped (the watchdog ends them)


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


def _child_env(**extra: str) -> dict[str, str]:
  """This process's environment for a subprocess, with the repository (and the wheels' folder,
  already in ``PYTHONPATH``) importable."""
  path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
  return dict(os.environ, PYTHONPATH=path, **extra)


def _start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
  proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
  CHILDREN.add(proc.pid)
  return proc


def _kill(proc: subprocess.Popen) -> None:
  """Ends the process group ``proc`` leads (one this script started)."""
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass


# ------------------------------------------------------------------ part: the GPU test subset

_RESULT = re.compile(r"^(?:(\S+::\S+(?: \S+)*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"
                     r"|\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+::\S+))")


def run_tests(selection: tuple[str, ...], deadline: Deadline, platform: str, workers: int) -> dict[str, Any]:
  """pytest ``selection`` in a subprocess pinned to ``platform``, float32 matmuls at full precision
  (``workers`` > 1: pytest-xdist processes); counts per outcome and the failing ids, from pytest's
  verbose lines as they come (so a run cut by the time box still reports what it did)."""
  env = _child_env(JAX_PLATFORMS=platform, JAX_DEFAULT_MATMUL_PRECISION="highest")
  parallel = ["-n", str(workers)] if workers > 1 else []
  cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *parallel, *selection]
  counts = {k: 0 for k in ("passed", "failed", "error", "skipped", "xfail", "xpass")}
  failing: list[str] = []
  start = time.monotonic()
  proc = _start(cmd, env)
  timed_out = False
  tail: list[str] = []
  sel = selectors.DefaultSelector()
  sel.register(proc.stdout, selectors.EVENT_READ)
  while True:
    if deadline.left() <= 0:
      timed_out = True
      _kill(proc)
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
      test, outcome = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
      counts[outcome.lower()] += 1
      if outcome in ("FAILED", "ERROR"):
        failing.append(test)
  proc.wait()
  CHILDREN.discard(proc.pid)
  return {"selection": list(selection), "platform": platform, "matmul_precision": "highest", "workers": workers,
          **counts, "failing": failing, "returncode": proc.returncode, "timed_out": timed_out,
          "wall_s": round(time.monotonic() - start, 1), "last_lines": tail}


# ------------------------------------------------------------------ part: DPOT-Ti step speed

def dpot_speed(deadline: Deadline, smoke: bool, batch_size: int, peaks: dict | None, platform: str) -> dict[str, Any]:
  """DPOT-Ti train steps in float32 and bfloat16: samples/s, XLA-counted FLOPs, FLOP/s vs peak."""
  import jax  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  api = _api()

  model = api.make_dpot("tiny", depth=1) if smoke else api.make_dpot("Ti")
  params = api.dpot_init(model, jax.random.key(0))
  kx, ky = jax.random.split(jax.random.key(1))
  shape = (batch_size, model.img_size, model.img_size)
  batch = {"x": jax.random.normal(kx, shape + (model.in_timesteps, model.in_channels)),
           "y": jax.random.normal(ky, shape + (model.out_timesteps, model.out_channels))}
  opt = optax.adam(1e-3, b1=0.9, b2=0.9)
  out: dict[str, Any] = {"model": "tiny (smoke)" if smoke else "Ti", "params": api.dpot_params(params),
                         "img_size": model.img_size, "batch": batch_size}
  for dtype, peak in (("float32", default_f32_peak(peaks, platform)), ("bfloat16", (peaks or {}).get("bf16"))):
    if deadline.left() <= 0:
      out[dtype] = {"skipped": "no time left in the part's time box"}
      continue
    step = api.make_train_step(api.pde_loss_fn(model.apply), opt,
                               compute_dtype=None if dtype == "float32" else dtype)
    holder = [api.TrainState.create(params, opt, jax.random.key(2))]
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


# ------------------------------------------------------------------ part: Soft-MoE vs dense TD update

def td_update_speed(deadline: Deadline, smoke: bool, updates_per_call: int) -> dict[str, Any]:
  """ms per DQN TD update (loss, gradient, Adam) on a replay-shaped batch, by network head."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  api = _api()

  out: dict[str, Any] = {"config": "dqn_minatar:tiny" if smoke else "dqn_minatar", "updates_per_call": updates_per_call}
  for head in ("softmoe", "dense"):
    if deadline.left() <= 0:
      out[head] = {"skipped": "no time left in the part's time box"}
      continue
    c = api.load_config("dqn_minatar:tiny" if smoke else "dqn_minatar")
    c.network.head = head
    task = api.make_task(c, api.task_context(c))
    inference = task.inference
    opt = api.optimizer_of(c, None)
    state = jax.jit(api.make_init_fn(task.init_params, opt, task.init_extra))(jax.random.key(0))
    k = jax.random.split(jax.random.key(1), 3)
    lead = (updates_per_call, c.batch_size)
    obs = jax.random.bernoulli(k[0], 0.1, lead + inference.data["obs_shape"])
    num_actions = inference.data["num_actions"]
    batch = api.Transition(obs=obs, action=jax.random.randint(k[1], lead, 0, num_actions).astype(jnp.int32),
                           reward=jax.random.uniform(k[2], lead), discount=jnp.ones(lead),
                           next_obs=jnp.roll(obs, 1, axis=1))
    step = api.make_train_step(task.loss_fn, opt, update_extra=task.update_extra, steps_per_call=updates_per_call)
    holder = [state]

    def once():
      holder[0], metrics = step(holder[0], batch)
      jax.block_until_ready(metrics["loss"])
    start = time.perf_counter()
    once()  # compile
    compile_s = time.perf_counter() - start
    times = _timed(once, deadline, min_reps=3, max_reps=20, min_seconds=3.0)
    out[head] = {"ms_per_update": 1e3 * _median(times) / updates_per_call, "calls_timed": len(times),
                 "compile_s": round(compile_s, 2), "params": api.rl_params(state.params)}
  if "ms_per_update" in out.get("softmoe", {}) and "ms_per_update" in out.get("dense", {}):
    out["softmoe_over_dense"] = out["softmoe"]["ms_per_update"] / out["dense"]["ms_per_update"]
  return out


# ------------------------------------------------------------------ part: DQN frames/s vs seeds

def dqn_seeds(deadline: Deadline, smoke: bool, seed_counts: tuple[int, ...], updates_per_call: int) -> dict[str, Any]:
  """Whole-DQN frames/s with vmapped seeds, through ``benchmarks/rl_throughput.py``'s ``Ours``."""
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


# ------------------------------------------------------------------ the studies: a subprocess per unit, cut at the end

MIN_UNIT_S = 20.0  # a unit is not started with less time than this left (start-up and compilation alone)
PARALLEL_UNITS = 3  # study units at once on the GPU: small programs leave it mostly idle, compilation is per CPU core


def _unit_env() -> dict[str, str]:
  """A unit sees one device, as on a one-GPU machine: a CPU device count forced in ``XLA_FLAGS``
  (the test suite's 8) is left out, since a cell's vmapped seeds are sharded over all devices."""
  flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", "")).strip()
  return _child_env(XLA_FLAGS=flags)


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


def run_units(units: list[tuple[str, list[str]]], end: float, parallel: int = 1) -> dict[str, dict[str, Any]]:
  """Runs ``(key, command)`` units in order, up to ``parallel`` at once, each in its own process group
  with its output in a file, until ``end`` (``time.monotonic()``), where the running ones are killed.

  Returns:
    Per key: ``returncode`` (None: killed), ``cut``, ``wall_s``, its output ``lines``; or
    ``{"skipped": True}`` for a unit not started (after a cut, or with less than ``MIN_UNIT_S`` left).
  """
  logs = pathlib.Path(tempfile.mkdtemp(prefix="accelerator_units_"))
  pending, running, done = list(units), {}, {}
  while pending or running:
    while pending and len(running) < parallel:
      if any(r.get("cut") for r in done.values()) or end - time.monotonic() < MIN_UNIT_S:
        done.update({key: {"skipped": True} for key, _ in pending})
        pending = []
        break
      key, cmd = pending.pop(0)
      log = logs / f"{len(done) + len(running)}.log"
      with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=_unit_env(), stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
      CHILDREN.add(proc.pid)
      running[key] = (proc, time.monotonic(), log)
    time.sleep(0.2)
    for key, (proc, start, log) in list(running.items()):
      over = time.monotonic() >= end
      if proc.poll() is None and not over:
        continue
      if proc.poll() is None:
        _kill(proc)
      proc.wait()
      CHILDREN.discard(proc.pid)
      del running[key]
      lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
      done[key] = {"returncode": None if over and proc.returncode < 0 else proc.returncode,
                   "cut": over and proc.returncode < 0, "wall_s": round(time.monotonic() - start, 1), "lines": lines}
  return {key: done[key] for key, _ in units}


def study_units(units: list[tuple[str, list[str], pathlib.Path]], end: float,
                read: Callable[[str], dict[str, Any] | None], parallel: int = 1) -> dict[str, Any]:
  """Runs ``(key, command, workdir)`` units (:func:`run_units`) and sorts them.

  ``read(key)``: a finished unit's record, or None. A unit whose record exists ran (also when its
  process then failed, e.g. on a report it could not make: ``returncode`` says so); one killed at
  ``end`` was cut (how far it got: :func:`_reached`); units not started are skipped; a unit that
  ended without a record failed (its last lines kept).
  """
  runs = run_units([(key, cmd) for key, cmd, _ in units], end, parallel)
  ran, cut, skipped, failed = {}, {}, [], {}
  for key, _, workdir in units:
    run = runs[key]
    record = None if run.get("skipped") else read(key)
    if run.get("skipped"):
      skipped.append(key)
    elif record is not None:
      ran[key] = {**record, "unit_wall_s": run["wall_s"], "returncode": run["returncode"]}
    elif run["cut"]:
      cut[key] = {**_reached(workdir), "wall_s": run["wall_s"]}
    else:
      failed[key] = {"returncode": run["returncode"], "wall_s": run["wall_s"], "last_lines": run["lines"][-3:]}
  return {"ran": ran, "cut": cut, "skipped": skipped, "failed": failed, "parallel": parallel}


def minatar_scaling(deadline: Deadline, smoke: bool, frames: int, parallel: int) -> dict[str, Any]:
  """The MinAtar expert-scaling design (``configs/rl_expert_scaling.py:full``), its runs cut to their
  first ``frames`` frames (0: whole), game by game, cell by cell, ``parallel`` at once, until the deadline."""
  from benchmarks.rl_study_cells import cell_config  # pylint: disable=import-outside-toplevel
  api = _api()
  spec = "rl_expert_scaling:" + ("full_smoke" if smoke else "full")
  study = api.load_config(spec)
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="accelerator_minatar_"))
  frames_per_update = cell_config(study, study.order[0], study.games[0]).dqn.update_period
  updates = frames // frames_per_update
  cut_args = ([] if smoke or not frames else
              [f"--config.base.{k}={updates}" for k in ("num_steps", "eval_every", "checkpoint_every")])
  config_path = f"configs/{spec.replace(':', '.py:')}"
  keys = [f"{game}/{cell}" for game in study.games for cell in study.order]  # game by game: whole comparisons first
  # each unit writes its own results file: rl_study.py rewrites the whole file after its cell
  units = [(key, [sys.executable, "benchmarks/rl_study.py", f"--config={config_path}",
                  f"--config.out_dir={tmp / 'out' / str(n)}", f"--config.workdir={tmp / 'runs'}", f"--cells={key}",
                  *cut_args], tmp / "runs" / key) for n, key in enumerate(keys)]
  keep = ("cell", "game", "what", "parameters", "frames", "runs", "eval_return", "eval_episodes", "eval_capped",
          "final_train_return", "frames_per_sec_all_runs", "wall_time_s")

  def read(key: str) -> dict[str, Any] | None:
    path = tmp / "out" / str(keys.index(key)) / f"{study.prefix}.json"
    records = json.loads(path.read_text()) if path.exists() else {}
    return {k: records[key][k] for k in keep if k in records[key]} if key in records else None
  return {"config": config_path, "seeds": study.seeds,
          "frames_per_run": updates * frames_per_update if cut_args else None,
          "design_frames_per_run": study.base.num_steps * frames_per_update, "order": keys,
          "note": f"{parallel} units at once share the device: frames_per_sec_all_runs is under that contention",
          **study_units(units, deadline.end, read, parallel)}


def probe_step_via(backend: str) -> dict[str, Any]:
  """Whether ``env.step_via="xla"`` (the pool's FFI targets on this platform) works and equals
  "callback" (``io_callback``) here: 16 agent steps of 2 Pong environments each way."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  api = _api()
  actions = jnp.asarray(np.random.default_rng(0).integers(0, 6, (16, 2)), jnp.int32)
  got: dict[str, Any] = {}
  for via in ("callback", "xla"):
    try:
      env = api.make_atari("Pong", num_envs=2, seeds=(7,), step_via=via, backend=backend)
      got[via] = jax.device_get(jax.jit(lambda a, e=env: jax.lax.scan(lambda c, x: (c, e.step(x)), 0, a)[1])(actions))
    except Exception as e:  # pylint: disable=broad-except  # the answer is the point: recorded
      got[via] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
  works = {via: not isinstance(v, str) for via, v in got.items()}
  same = works["xla"] and works["callback"] and all(
      np.array_equal(a, b) for a, b in zip(jax.tree.leaves(got["xla"]), jax.tree.leaves(got["callback"])))
  return {"backend": backend, **{via: "ok" if works[via] else got[via] for via in got},
          "same_frames_rewards_flags": bool(same), "chosen": "xla" if same else "callback"}


def atari_der(deadline: Deadline, smoke: bool, parallel: int, backend: str = "ale_py") -> dict[str, Any]:
  """Atari 100k DER on ``backend``: the stepping route, the real-size cost of both heads
  (``rl_der_study.py --measure``, the heads side by side), then study cells until the deadline."""
  from benchmarks import rl_der_study  # pylint: disable=import-outside-toplevel
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="accelerator_der_"))
  out: dict[str, Any] = {"probe": probe_step_via(backend)}
  common = [f"--backend={backend}", f"--step_via={out['probe']['chosen']}"]
  measure_args = (["--size=tiny", "--seeds=2", "--measure_steps=4"] if smoke else
                  ["--size=real", "--seeds=3", "--measure_steps=200"]) + ["--games=Pong"]
  heads = rl_der_study.HEADS
  runs = run_units([(h, [sys.executable, "benchmarks/rl_der_study.py", "--measure", *measure_args, *common,
                         f"--heads={h}", f"--measure_out={tmp / f'der_cost_{h}.json'}"]) for h in heads],
                   deadline.end, parallel=len(heads))
  rows = [json.loads(line) for h in heads for line in runs[h].get("lines", ())
          if line.startswith("{") and '"s_per_1k_agent_steps"' in line]
  out["measure"] = {"command": " ".join(["benchmarks/rl_der_study.py", "--measure", *measure_args, *common]),
                    "heads_side_by_side": True, "rows": rows,
                    **{h: {k: v for k, v in runs[h].items() if k != "lines"} | (
                        {"last_lines": runs[h]["lines"][-3:]} if runs[h].get("returncode") else {}) for h in heads}}
  size = (["--size=tiny", "--agent_steps=150", "--eval_episodes=2", "--seeds=2", "--games=Pong"] if smoke else
          ["--size=real", "--agent_steps=100000", "--eval_episodes=100", "--seeds=3"])  # Atari 100k, as the study
  work, result = tmp / "cells", tmp / "der.json"
  args = rl_der_study.parse_args(size + common + [f"--workdir={work}", f"--out={result}"])
  per_cell = [a for a in size if not a.startswith("--games=")]
  units = [(f"{g}/{h}", [sys.executable, "benchmarks/rl_der_study.py", *per_cell, *common, f"--games={g}",
                         f"--heads={h}", f"--workdir={work}", f"--out={tmp / f'der_{g}_{h}.json'}"], work / g / h)
           for g in args.games for h in args.heads]

  def read(key: str) -> dict[str, Any] | None:
    path = work / "cells" / f"{key.replace('/', '__')}.json"
    if not path.exists():
      return None
    r = json.loads(path.read_text())
    return {k: r[k] for k in ("parameters", "agent_steps", "eval_return", "eval_episodes", "human_normalized",
                              "s_per_1k_agent_steps", "wall_time_s")}
  # a cell that cannot finish in the time left (its training alone, at the measured rate) is not started
  rate = {r["head"]: r["s_per_1k_agent_steps"] for r in rows}
  need = {h: round(rate[h] * args.agent_steps / 1000) for h in rate}
  hopeless = [u[0] for u in units if not smoke and need.get(u[0].split("/")[1], 0) > deadline.left()]
  cells = study_units([u for u in units if u[0] not in hopeless], deadline.end, read, parallel)
  cells["skipped"] += hopeless
  out["study"] = {"command": " ".join(["benchmarks/rl_der_study.py", *size, *common]), "games": list(args.games),
                  "heads": list(args.heads), "seeds": args.seeds, "agent_steps_per_run": args.agent_steps,
                  "training_s_per_cell_at_measured_rate": need, **cells,
                  "iqm_human_normalized": _der_iqm(rl_der_study, args, cells)}
  return out


def _der_iqm(rl_der_study: Any, args: argparse.Namespace, cells: dict[str, Any]) -> Any:
  """The study's IQMs of the finished cells, or why they are left out (rliable's arch needs
  statsmodels, which the wheels do not bring: rebuilt at home from the per-run scores above)."""
  if not cells["ran"]:
    return {}
  try:
    return rl_der_study.report(args, cells["skipped"])["iqm_human_normalized"]
  except ModuleNotFoundError as e:
    return f"left out: {e.name} is not installed here; the per-run human_normalized scores above rebuild it"


# ------------------------------------------------------------------ driver

def _check_backend(smoke: bool) -> tuple[Any, str | None]:
  """Imports jax pinned to the CUDA backend (CPU for ``--cpu-smoke``); returns (jax, why not) where
  ``why not`` is a one-line reason when there is no GPU."""
  os.environ["JAX_PLATFORMS"] = "cpu" if smoke else "cuda"  # no silent fallback to another backend
  # The subprocesses (tests, study units) need GPU memory of their own: no up-front reservation.
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


def install_wheels(wheel_dir: pathlib.Path) -> dict[str, Any]:
  """The wheels of ``wheel_dir`` this interpreter lacks, installed offline into a folder put on
  ``sys.path`` and ``PYTHONPATH`` (``benchmarks/device_wheels.py``); what was done."""
  if not wheel_dir.is_dir():
    return {"status": f"no wheel folder {wheel_dir.name}/ (make device-wheels fills it); nothing installed"}
  target = device_wheels.default_target()
  sys.path.insert(0, str(target))
  os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH", "")]))
  record = device_wheels.install(wheel_dir, target, device_wheels.read_manifest())
  record["status"] = "ok" if not record["pip_returncode"] and not record["missing"] else "incomplete"
  return record


def _slug(text: str) -> str:
  return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "device"


_WRITING = threading.Lock()  # the parts' loop and the watchdog both write the JSON


def _write(path: pathlib.Path, result: dict[str, Any]) -> None:
  """The JSON, whole or not at all (written beside, then renamed)."""
  with _WRITING:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)


def _parse(argv: list[str] | None) -> argparse.Namespace | str:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", default="", help="the JSON to write (default benchmarks/results/accelerator/<device>.json)")
  parser.add_argument("--cpu-smoke", dest="cpu_smoke", action="store_true",
                      help="every part at tiny size on the CPU (for the test suite; the numbers mean nothing)")
  parser.add_argument("--budget_s", type=float, default=BUDGET_S, help="the parts' overall time budget in seconds "
                      "(ignored by --cpu-smoke); the watchdog ends the run WATCHDOG_GRACE_S after it")
  parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
  parser.add_argument("--wheels", default=str(device_wheels.WHEELS), help="the wheel folder to install from")
  parser.add_argument("--dpot_batch", type=int, default=32)
  parser.add_argument("--seeds", default="1,8,64", help="vmapped seed counts of part dqn_seeds")
  parser.add_argument("--minatar_frames", type=int, default=100_000,
                      help="frames per run of the MinAtar design's cells (0: the design's 1M)")
  parser.add_argument("--watchdog_s", type=float, default=None,
                      help="end the run after this many seconds (default: --budget_s + WATCHDOG_GRACE_S; "
                      "none with --cpu-smoke)")
  args = parser.parse_args(argv)
  parts = [p for p in args.parts.split(",") if p]
  unknown = sorted(set(parts) - set(PARTS))
  seed_counts = args.seeds.split(",")
  problem = (f"--parts={args.parts!r}: unknown {unknown}; allowed: {', '.join(PARTS)}" if unknown or not parts else
             f"--seeds={args.seeds!r}: must be comma-separated integers >= 1" if not all(
                 s.strip().isdigit() and int(s) >= 1 for s in seed_counts) else
             f"--dpot_batch={args.dpot_batch}: must be >= 1" if args.dpot_batch < 1 else
             f"--minatar_frames={args.minatar_frames}: must be 0 or a multiple of 4 >= 4" if (
                 args.minatar_frames < 0 or args.minatar_frames % 4) else
             f"--budget_s={args.budget_s}: must be > 0" if not args.budget_s > 0 else None)
  if problem:
    return problem
  args.parts = parts
  return args


def main(argv: list[str] | None = None) -> int:
  args = _parse(argv)
  if isinstance(args, str):
    print(f"benchmarks/accelerator.py: {args}", file=sys.stderr)
    return 2
  smoke = args.cpu_smoke
  jax, no_gpu = _check_backend(smoke)  # jax is the node's own: the check needs no wheel
  if no_gpu:
    print(f"benchmarks/accelerator.py: no GPU: {no_gpu}; nothing was run", flush=True)
    return NO_GPU_EXIT
  wheels = install_wheels(pathlib.Path(args.wheels))  # before any part imports jaxlab

  start = time.monotonic()
  overall_end = start + (SMOKE_BOX_S * len(PARTS) if smoke else args.budget_s)
  device = jax.devices()[0]
  platform = device.platform
  peaks = peak_tflops(device.device_kind)
  if smoke:
    SMOKE_TIMING.update(min_reps=2, max_reps=2)
  out = pathlib.Path(args.out or REPO / "benchmarks" / "results" / "accelerator" / f"{_slug(device.device_kind)}.json")
  result: dict[str, Any] = {
      "command": " ".join(["benchmarks/accelerator.py", *(sys.argv[1:] if argv is None else argv)]),
      "date": time.strftime("%Y-%m-%d"), "device_kind": device.device_kind, "platform": platform,
      "devices": jax.device_count(), "jax": jax.__version__, "jaxlib": getattr(__import__("jaxlib"), "__version__", "?"),
      "python": sys.version.split()[0], "cpu_smoke": smoke, "budget_s": args.budget_s, "boxes_s": PARTS,
      "peak_tflops": peaks, "default_f32_peak_tflops": default_f32_peak(peaks, platform),
      "note": ("--cpu-smoke: every part at toy size on the CPU; the numbers mean nothing" if smoke
               else "float32 runs use jax's default matmul precision (TF32 on Ampere+ GPUs); the tests run at 'highest'"),
      "wheels": wheels, "parts": {}, "status": "running",
  }
  _write(out, result)
  current: dict[str, Any] = {}

  def watchdog() -> None:  # the budget and its grace are spent: record, end the children, leave
    name = current.get("name")
    if name:
      result["parts"][name] = {"status": f"killed by the watchdog at {round(time.monotonic() - start)} s",
                               "part_wall_s": round(time.monotonic() - current["start"], 1)}
    for later in args.parts:
      result["parts"].setdefault(later, {"status": "skipped: the watchdog ended the run"})
    result["status"], result["wall_s"] = "killed by the watchdog", round(time.monotonic() - start, 1)
    for pid in list(CHILDREN):
      try:
        os.killpg(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    _write(out, result)
    print(f"benchmarks/accelerator.py: watchdog: {result['wall_s']} s; wrote {out}", flush=True)
    os._exit(WATCHDOG_EXIT)  # pylint: disable=protected-access  # a part's compilation cannot be interrupted otherwise

  limit = args.watchdog_s if args.watchdog_s is not None else None if smoke else args.budget_s + WATCHDOG_GRACE_S
  timer = None if limit is None else threading.Timer(limit, watchdog)
  if timer:
    timer.daemon = True
    timer.start()
  seeds = (2,) if smoke else tuple(int(s) for s in args.seeds.split(","))
  units_at_once = 2 if smoke else PARALLEL_UNITS
  runners: dict[str, Callable[[Deadline], dict[str, Any]]] = {
      "tests": lambda d: run_tests(SMOKE_TESTS if smoke else GPU_TESTS, d, "cpu" if smoke else "cuda",
                                   1 if smoke or importlib.util.find_spec("xdist") is None else TEST_WORKERS),
      "dpot_ti": lambda d: dpot_speed(d, smoke, 2 if smoke else args.dpot_batch, peaks, platform),
      "moe_vs_dense": lambda d: td_update_speed(d, smoke, 2 if smoke else 100),
      "dqn_seeds": lambda d: dqn_seeds(d, smoke, seeds, 2 if smoke else 250),
      "minatar_scaling": lambda d: minatar_scaling(d, smoke, args.minatar_frames, units_at_once),
      "atari_der": lambda d: atari_der(d, smoke, units_at_once),
  }
  failed = False
  for name in args.parts:
    deadline = Deadline(SMOKE_BOX_S if smoke else PARTS[name], overall_end)
    if deadline.left() <= 0:
      result["parts"][name] = {"status": "skipped: the overall budget is spent"}
      continue
    t, cpu = time.monotonic(), time.process_time()
    current.update(name=name, start=t)
    try:
      part = runners[name](deadline)
      part["status"] = "ok" if deadline.left() > 0 else "ok (time box reached; later units skipped)"
    except Exception as e:  # pylint: disable=broad-except  # recorded in the JSON and the exit status
      part = {"status": f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
      failed = True
    part["part_wall_s"] = round(time.monotonic() - t, 1)
    part["part_cpu_s"] = round(time.process_time() - cpu, 1)  # this process's threads (not its subprocesses')
    current.clear()
    result["parts"][name] = part
    result["wall_s"] = round(time.monotonic() - start, 1)
    _write(out, result)
    print(f"{name}: {json.dumps(part)[:400]}", flush=True)
  if timer:
    timer.cancel()
  result["status"] = "done"
  result["wall_s"] = round(time.monotonic() - start, 1)
  _write(out, result)
  print(f"wrote {out} ({result['wall_s']} s)", flush=True)
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
