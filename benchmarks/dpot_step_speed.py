r"""DPOT-Ti training-step speed: jaxlab (``jaxlab.train.make_train_step``) vs the official PyTorch code.

Same configuration on both sides (DPOT-Ti: embed 512, depth 4, 4 AFNO blocks, patch 8, 4 channels,
10 input steps, modes 32; batch 4; the official relative-L2 loss; Adam lr 1e-3, betas (0.9, 0.9),
weight decay 1e-6 added to the gradient as the official ``utils/optimizer.Adam``), at 64^2 and
128^2. Every contestant runs in its own worker process (torch with 2 threads, XLA on the
machine's 2 cores), started once and compiled/warmed up; then rounds run the contestants one
after another in a rotating order, a few steps each, so that background load (the machine is
shared) hits all of them alike. We report per-contestant medians, the median of the per-round
JAX/torch ratios, the JAX step's FLOP/s from XLA's cost analysis, and that as a fraction of
this machine's fp32 matmul peak (a 2048^3 ``jnp.dot`` timed in the same rounds).

The official code is read from ``--dpot_code`` (a checkout of thu-ml/DPOT, e.g. $EXT/DPOT;
env DPOT_OFFICIAL_CODE) and run with ``--torch_python`` (a Python with torch and einops, e.g.
$EXT/torchvenv/bin/python; env DPOT_TORCH_PYTHON). Neither is part of jaxlab; without them
the comparison is skipped with a message (``--jax_only`` still times the JAX side).

  nice -n 5 .venv/bin/python benchmarks/dpot_step_speed.py --out=benchmarks/results/dpot/step_speed.json

JAX variants are ``name=embedding[:XLA_FLAGS]`` with embedding ``fused`` (the default model) or
``literal`` (``fuse_embedding=False``: the official order of operations).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

BATCH, THREADS = 4, 2
TI = dict(patch_size=8, in_channels=4, out_channels=4, in_timesteps=10, out_timesteps=1, embed_dim=512, depth=4,
          n_blocks=4, mlp_ratio=1.0, out_layer_dim=32, modes=32)
PROTO = "@@"


# ------------------------------------------------------------------ workers (run in subprocesses)

def _serve(step_once, info: dict) -> None:
  """Protocol: print READY <info>; then for each "RUN n" line run n steps and print their times."""
  print(PROTO, "READY", json.dumps(info), flush=True)
  for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "QUIT":
      break
    times, cpu = [], []
    for _ in range(int(cmd[1])):
      start, start_cpu = time.perf_counter(), time.process_time()
      step_once()
      times.append(time.perf_counter() - start)
      cpu.append(time.process_time() - start_cpu)
    print(PROTO, "TIMES", json.dumps({"wall": times, "cpu": cpu}), flush=True)


def torch_worker(res: int, code: str) -> None:
  import torch  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(THREADS)
  sys.path.insert(0, code)
  from models.dpot import DPOTNet  # the official model  # pylint: disable=import-outside-toplevel
  from utils.criterion import SimpleLpLoss  # the official loss  # pylint: disable=import-outside-toplevel
  from utils.optimizer import Adam  # the official optimiser  # pylint: disable=import-outside-toplevel
  torch.manual_seed(0)
  model = DPOTNet(img_size=res, **{k: v for k, v in TI.items()}, n_cls=12)
  model.train()
  opt = Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.9), weight_decay=1e-6)
  loss_fn = SimpleLpLoss(size_average=False)
  x = torch.randn(BATCH, res, res, TI["in_timesteps"], TI["in_channels"])
  y = torch.randn(BATCH, res, res, TI["out_timesteps"], TI["out_channels"])

  def step_once():
    pred, _ = model(x)
    loss = loss_fn(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
  for _ in range(3):
    step_once()
  _serve(step_once, {"torch": torch.__version__, "threads": torch.get_num_threads(),
                     "params": sum(p.numel() for p in model.parameters())})


def jax_worker(res: int, embedding: str) -> None:
  import jax  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.dpot import DPOT, count_params, init_params  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.losses import make_loss_fn  # pylint: disable=import-outside-toplevel
  from jaxlab.train import TrainState, make_train_step  # pylint: disable=import-outside-toplevel
  model = DPOT(img_size=res, **TI, fuse_embedding=(embedding == "fused"))
  # the official Adam adds weight_decay * param to the gradient before the moments (L2, not AdamW)
  opt = optax.chain(optax.add_decayed_weights(1e-6), optax.adam(1e-3, b1=0.9, b2=0.9, eps=1e-8))
  params = init_params(model, jax.random.key(0))
  kx, ky = jax.random.split(jax.random.key(1))
  batch = {"x": jax.random.normal(kx, (BATCH, res, res, TI["in_timesteps"], TI["in_channels"])),
           "y": jax.random.normal(ky, (BATCH, res, res, TI["out_timesteps"], TI["out_channels"]))}
  step = make_train_step(make_loss_fn(model.apply), opt)
  state = TrainState.create(params, opt, jax.random.key(2))
  start = time.perf_counter()
  compiled = step.jitted.lower(state, batch).compile()
  compile_s = time.perf_counter() - start
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list) else cost
  holder = [state]

  def step_once():
    holder[0], metrics = step(holder[0], batch)
    jax.block_until_ready(metrics["loss"])
  for _ in range(3):
    step_once()
  _serve(step_once, {"jax": jax.__version__, "flops": float(cost["flops"]), "compile_s": compile_s,
                     "params": count_params(params), "xla_flags": os.environ.get("XLA_FLAGS", "")})


def peak_worker(n: int) -> None:
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  a = jax.random.normal(jax.random.key(0), (n, n))
  b = jax.random.normal(jax.random.key(1), (n, n))
  dot = jax.jit(jnp.dot)
  dot(a, b).block_until_ready()
  _serve(lambda: dot(a, b).block_until_ready(), {"flops": 2.0 * n ** 3})


# ------------------------------------------------------------------ driver

class Worker:
  def __init__(self, name: str, argv: list[str], env: dict[str, str]):
    self.name = name
    self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    self.info = json.loads(self._expect("READY"))

  def _expect(self, tag: str) -> str:
    for line in self.proc.stdout:
      if line.startswith(PROTO):
        _, got, payload = line.rstrip("\n").split(" ", 2)
        assert got == tag, (self.name, got)
        return payload
    raise RuntimeError(f"worker {self.name} exited (code {self.proc.wait()}); see its stderr above")

  def run(self, steps: int) -> dict[str, list[float]]:
    """{"wall": seconds per step, "cpu": process CPU seconds per step (all threads)}."""
    self.proc.stdin.write(f"RUN {steps}\n")
    self.proc.stdin.flush()
    return json.loads(self._expect("TIMES"))

  def close(self) -> None:
    if self.proc.poll() is None:
      self.proc.stdin.write("QUIT\n")
      self.proc.stdin.flush()
      self.proc.wait(timeout=60)


def _median(v):
  v = sorted(v)
  n = len(v)
  return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def _torch_missing(torch_python: str, code: str) -> str | None:
  if not pathlib.Path(code, "models", "dpot.py").is_file():
    return f"official DPOT code not found at {code!r} (expected models/dpot.py; set --dpot_code or DPOT_OFFICIAL_CODE)"
  if not pathlib.Path(torch_python).exists():
    return f"torch python {torch_python!r} not found (set --torch_python or DPOT_TORCH_PYTHON)"
  probe = subprocess.run([torch_python, "-c", "import torch, einops"], capture_output=True, text=True)
  if probe.returncode:
    return f"{torch_python} cannot import torch and einops: {probe.stderr.strip().splitlines()[-1:]}"
  return None


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--worker", choices=["torch", "jax", "peak"], help=argparse.SUPPRESS)
  parser.add_argument("--res", type=int, default=64, help=argparse.SUPPRESS)
  parser.add_argument("--embedding", default="fused", help=argparse.SUPPRESS)
  parser.add_argument("--resolutions", default="64,128")
  parser.add_argument("--jax_variants", default="jax_fused=fused,jax_literal=literal",
                      help="comma-separated name=fused|literal[:XLA_FLAGS]")
  parser.add_argument("--rounds", type=int, default=12)
  parser.add_argument("--steps", default="64:4,128:2", help="steps per contestant per round, by resolution")
  parser.add_argument("--torch_python", default=os.environ.get("DPOT_TORCH_PYTHON", ""))
  parser.add_argument("--dpot_code", default=os.environ.get("DPOT_OFFICIAL_CODE", ""))
  parser.add_argument("--jax_only", action="store_true", help="time the JAX side even without torch")
  parser.add_argument("--omp_wait_policy", default="PASSIVE",
                      help="OMP_WAIT_POLICY for torch: PASSIVE (default) keeps its 2 OpenMP threads from spinning, "
                           "which on a shared, oversubscribed machine makes a step 10-30x slower; '' leaves "
                           "libgomp's default (spin, then sleep)")
  parser.add_argument("--peak_n", type=int, default=2048)
  parser.add_argument("--out", default="")
  args = parser.parse_args()

  if args.worker == "torch":
    return torch_worker(args.res, args.dpot_code)
  if args.worker == "jax":
    return jax_worker(args.res, args.embedding)
  if args.worker == "peak":
    return peak_worker(args.peak_n)

  missing = _torch_missing(args.torch_python, args.dpot_code)
  if missing and not args.jax_only:
    print(f"SKIPPED: {missing}. (Use --jax_only to time the JAX side alone.)")
    return
  resolutions = [int(r) for r in args.resolutions.split(",")]
  steps = {int(k): int(v) for k, v in (kv.split(":") for kv in args.steps.split(","))}
  me = [sys.executable, os.path.abspath(__file__)]
  base_env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS),
              "JAX_PLATFORMS": "cpu"}
  base_env.pop("XLA_FLAGS", None)   # no virtual devices from a test harness

  workers: dict[tuple[str, int], Worker] = {}
  try:
    print("starting workers (compile + warm-up) ...", flush=True)
    workers[("peak", 0)] = Worker("peak", me + ["--worker=peak", f"--peak_n={args.peak_n}"], base_env)
    torch_env = dict(base_env, OMP_WAIT_POLICY=args.omp_wait_policy) if args.omp_wait_policy else base_env
    for res in resolutions:
      if not missing:
        workers[("torch", res)] = Worker(f"torch@{res}", [args.torch_python, os.path.abspath(__file__),
                                                          "--worker=torch", f"--res={res}",
                                                          f"--dpot_code={args.dpot_code}"], torch_env)
      for spec in args.jax_variants.split(","):
        name, _, rest = spec.partition("=")
        embedding, _, flags = rest.partition(":")
        env = dict(base_env, XLA_FLAGS=flags) if flags else base_env
        workers[(name, res)] = Worker(f"{name}@{res}", me + ["--worker=jax", f"--res={res}",
                                                             f"--embedding={embedding}"], env)
    times: dict[str, list[float]] = {f"{n}@{r}": [] for n, r in workers}
    cpu_times: dict[str, list[float]] = {f"{n}@{r}": [] for n, r in workers}
    rounds = []
    for rnd in range(args.rounds):
      record = {"load_before": os.getloadavg()[0], "median_s": {}}
      keys = list(workers)
      keys = keys[rnd % len(keys):] + keys[:rnd % len(keys)]   # rotate who goes first
      for name, res in keys:
        t = workers[(name, res)].run(steps.get(res, 3) if name != "peak" else 3)
        times[f"{name}@{res}"] += t["wall"]
        cpu_times[f"{name}@{res}"] += t["cpu"]
        record["median_s"][f"{name}@{res}"] = _median(t["wall"])
        time.sleep(0.2)   # let spinning OpenMP / Eigen threads settle before the next contestant
      record["load_after"] = os.getloadavg()[0]
      rounds.append(record)
      print(f"round {rnd + 1}/{args.rounds} load {record['load_before']:.1f}: " + ", ".join(
          f"{k} {v * 1e3:.0f}ms" for k, v in record["median_s"].items()), flush=True)
  finally:
    for w in workers.values():
      w.close()

  peak_flops = workers[("peak", 0)].info["flops"] / _median(times["peak@0"])
  summary = {"peak_matmul_gflops": peak_flops / 1e9, "by_resolution": {}}
  for res in resolutions:
    entry = {}
    for (name, r), w in workers.items():
      if r != res:
        continue
      med = _median(times[f"{name}@{res}"])
      row = {"median_s_per_step": med, "samples_per_s": BATCH / med,
             "median_cpu_s_per_step": _median(cpu_times[f"{name}@{res}"]), **w.info}
      if "flops" in w.info:
        row["gflop_per_step"] = w.info["flops"] / 1e9
        row["achieved_gflops"] = w.info["flops"] / med / 1e9
        row["fraction_of_peak"] = w.info["flops"] / med / peak_flops
      entry[name] = row
    if ("torch", res) in workers:
      for name, r in workers:
        if r == res and name not in ("torch", "peak"):
          per_round = [rd["median_s"][f"torch@{res}"] / rd["median_s"][f"{name}@{res}"] for rd in rounds]
          entry[name]["speedup_vs_torch_median_of_rounds"] = _median(per_round)
          entry[name]["speedup_vs_torch_rounds"] = per_round
    summary["by_resolution"][str(res)] = entry

  loads = [rd["load_before"] for rd in rounds]
  result = {"config": {"model": "DPOT-Ti", **TI, "batch": BATCH, "threads": THREADS, "rounds": args.rounds,
                       "torch_omp_wait_policy": args.omp_wait_policy or "default",
                       "steps_per_round": steps, "machine": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "load_avg_min_median_max": [min(loads), _median(loads), max(loads)]},
            "summary": summary, "rounds": rounds}
  print(json.dumps(summary, indent=1, default=lambda o: round(o, 4) if isinstance(o, float) else str(o)))
  for res in resolutions:
    for name, row in summary["by_resolution"][str(res)].items():
      extra = ""
      if "speedup_vs_torch_median_of_rounds" in row:
        extra += f"  speed-up vs torch {row['speedup_vs_torch_median_of_rounds']:.2f}x"
      if "fraction_of_peak" in row:
        extra += f"  {row['achieved_gflops']:.0f} GFLOP/s = {row['fraction_of_peak']:.0%} of peak"
      print(f"{res:4d}^2 {name:12s} {row['samples_per_s']:6.1f} samples/s{extra}")
  print(f"peak fp32 matmul {peak_flops / 1e9:.0f} GFLOP/s; load average during rounds min/median/max "
        f"{min(loads):.1f}/{_median(loads):.1f}/{max(loads):.1f}")
  if args.out:
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print("wrote", out)


if __name__ == "__main__":
  main()
