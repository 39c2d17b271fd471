r"""DPOT with a Soft-MoE MLP vs dense DPOT on NS nu=1e-3 (64^2, 10 input frames), MoMo-Adam, 3 seeds each.

Every cell is ``configs/dpot_moe.py`` (dense: ``:dense``) with the cell's MoE settings, trained by
``jaxlab.experiment.train`` in ``<workdir>/<cell>/seed<i>``, seeds one after another (faster than
vmapped seeds for DPOT on this CPU, benchmarks/results/dpot/seeds_vmap.json). Each finished seed is
appended to the results JSON at once and skipped on rerun (a killed seed resumes from its
checkpoint). Per cell: 1-step and rollout L2RE per seed and mean ± std, parameter count, the XLA
cost-analysis FLOPs of one train step (and one forward pass) at the study's batch, train time.

  export JAXLAB_DATA_DIR=/tmp/jaxlab_data    # the DPOT study's NS nu=1e-3 set is cached there
  nice -n 10 python benchmarks/dpot_moe_study.py --steps=200          # resumable; also writes dpot_moe.md
  python benchmarks/dpot_moe_study.py --flops_only                    # FLOP table, no training
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from absl import app, flags
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from configs import dpot_moe  # noqa: E402
from jaxlab.optim.config import optimizer_from_config  # noqa: E402
from jaxlab.pde.losses import make_loss_fn  # noqa: E402
from jaxlab.tasks.pde_data import channels_of  # noqa: E402
from jaxlab.tasks.pde_model import build_model  # noqa: E402
from jaxlab.train import TrainState, make_train_step  # noqa: E402
from jaxlab.experiment import train  # noqa: E402

_STEPS = flags.DEFINE_integer("steps", 200, "train steps per seed (200: the study fits ~11 min for 2 cells on the busy 2-core CPU)")
_SEEDS = flags.DEFINE_integer("seeds", 3, "seeds per cell")
_CELLS = flags.DEFINE_list("cells", None, "run only these cells (default: all)")
_OUT = flags.DEFINE_string("out", "benchmarks/results/compose/dpot_moe.json", "results JSON")
_WORKDIR = flags.DEFINE_string("workdir", "runs/dpot_moe_study", "checkpoints (not committed)")
_FLOPS_ONLY = flags.DEFINE_bool("flops_only", False, "only measure the FLOPs per step of each cell")

# (mlp, num_experts, capacity_factor). 64 latent pixels per sample: e4_c1 has 4 x 16 = 64 slots, so its
# experts do exactly the dense MLP's FLOPs (+ router); e8_c05 halves the slots (8 x 4 = 32), which
# brings the whole train step to within ~3% of the dense step's FLOPs.
CELLS = {
    "dense": ("dense", 4, 1.0),
    "softmoe_e4_c1": ("softmoe", 4, 1.0),
    "softmoe_e8_c05": ("softmoe", 8, 0.5),
}


def cell_config(name: str, seed: int, steps: int) -> ml_collections.ConfigDict:
  mlp, experts, capacity = CELLS[name]
  c = dpot_moe.get_config("dense" if mlp == "dense" else "")
  c.model.num_experts, c.model.capacity_factor = experts, capacity
  c.name, c.seed = name, seed
  c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = steps, max(1, steps // 5), steps, steps
  return c


def step_flops(c: ml_collections.ConfigDict) -> dict[str, float]:
  """XLA cost-analysis FLOPs of one train step and of one forward pass at ``c.batch_size`` (1 device)."""
  channels = channels_of(c)
  model = build_model(c, channels)
  opt = optimizer_from_config(c.optimizer, c.num_steps)
  n, b = c.data.resolution, c.batch_size
  x = jnp.zeros((1, n, n, c.t_in, channels))
  state = jax.eval_shape(lambda k: TrainState.create(model.init(k, x)["params"], opt, k), jax.random.key(0))
  spec = lambda t: jax.ShapeDtypeStruct((b, n, n, t, channels), jnp.float32)
  batch = {"x": spec(c.t_in), "y": spec(c.t_out), "mask": jax.ShapeDtypeStruct((b, 1, 1, 1, channels), jnp.float32)}
  step = make_train_step(make_loss_fn(model.apply, noise_scale=c.noise_scale), opt)
  train_flops = step.jitted.lower(state, batch).compile().cost_analysis()["flops"]
  forward = jax.jit(lambda p, x: model.apply({"params": p}, x)).lower(state.params, batch["x"]).compile()
  return {"train_step": float(train_flops), "forward": float(forward.cost_analysis()["flops"])}


def _load(path: str) -> dict[str, Any]:
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  return {"cells": {}}


def _save(path: str, results: dict[str, Any]) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(results, f, indent=1)
  os.replace(tmp, path)


def _summarise(results: dict[str, Any]) -> None:
  dense = results["cells"].get("dense", {}).get("flops", {}).get("train_step")
  for cell in results["cells"].values():
    seeds = cell.get("seeds", {})
    for key in ("l2re_1step", "l2re_rollout", "train_time_s"):
      v = np.asarray([s[key] for s in seeds.values()], np.float64)
      if v.size:
        cell[f"{key}_mean"], cell[f"{key}_std"] = float(v.mean()), float(v.std())
    if dense and "flops" in cell:
      cell["train_step_flops_vs_dense"] = cell["flops"]["train_step"] / dense


def table(results: dict[str, Any]) -> str:
  """Markdown table of the cells (mean ± std over seeds)."""
  pm = lambda c, k: f"{c[k + '_mean']:.4f} ± {c[k + '_std']:.4f}" if k + "_mean" in c else "-"
  lines = ["| cell | params | step GFLOP (vs dense) | seeds | 1-step L2RE | rollout L2RE | train s / seed |",
           "|---|---|---|---|---|---|---|"]
  for name, c in results["cells"].items():
    if not c.get("seeds"):
      continue
    flops = f"{c['flops']['train_step'] / 1e9:.3f} ({c.get('train_step_flops_vs_dense', float('nan')):.3f})"
    lines.append(f"| {name} | {c.get('parameters', 0):,} | {flops} | {len(c['seeds'])} | {pm(c, 'l2re_1step')} | "
                 f"{pm(c, 'l2re_rollout')} | {c.get('train_time_s_mean', float('nan')):.0f} |")
  return "\n".join(lines) + "\n"


def main(argv: Any) -> None:
  del argv
  if not os.environ.get("JAXLAB_DATA_DIR"):
    print("note: JAXLAB_DATA_DIR is unset; the NS set is generated (or read) under ~/.cache/jaxlab")
  results = _load(_OUT.value)
  results["setup"] = {"steps": _STEPS.value, "batch_size": 16, "data": dict(dpot_moe.NS3), "resolution": 64,
                      "t_in": 10, "optimizer": "momo_adam lr 1e-3 cosine, b2 0.999", "seeds_run": "sequentially",
                      "devices": f"1 x {jax.devices()[0].platform}"}
  for name in _CELLS.value or list(CELLS):
    cell = results["cells"].setdefault(name, {"seeds": {}})
    if cell.get("num_steps", _STEPS.value) != _STEPS.value:
      raise SystemExit(f"{_OUT.value} has cell {name} at {cell['num_steps']} steps; use --steps="
                       f"{cell['num_steps']} or another --out")
    c = cell_config(name, 0, _STEPS.value)
    if "flops" not in cell:
      cell["flops"] = step_flops(c)
      cell["model"] = c.model.to_dict()
      _save(_OUT.value, results)
    print(f"{name}: {cell['flops']['train_step'] / 1e9:.3f} GFLOP per train step")
    if _FLOPS_ONLY.value:
      continue
    cell["num_steps"] = _STEPS.value
    for seed in range(_SEEDS.value):
      if str(seed) in cell["seeds"]:
        continue
      t0 = time.perf_counter()
      s = train(cell_config(name, seed, _STEPS.value), os.path.join(_WORKDIR.value, name, f"seed{seed}"),
                progress=False).summary
      rate = float(np.mean(s["steps_per_sec"]))
      cell["parameters"] = s["parameters"]
      cell["seeds"][str(seed)] = {
          "l2re_1step": float(s["l2re_1step/ns_fno_nu1e-03"]), "l2re_rollout": float(s["l2re_rollout/ns_fno_nu1e-03"]),
          "final_loss": float(s["final_loss"]), "steps_per_sec": rate, "train_time_s": _STEPS.value / rate,
          "wall_time_s": time.perf_counter() - t0, "load_average": os.getloadavg()[0]}
      _summarise(results)
      _save(_OUT.value, results)
      print(name, seed, json.dumps(cell["seeds"][str(seed)]))
  _summarise(results)
  _save(_OUT.value, results)
  with open(os.path.splitext(_OUT.value)[0] + ".md", "w") as f:
    f.write(table(results))
  print(table(results))


if __name__ == "__main__":
  app.run(main)
