r"""Train-step time (OT loss vs InfoNCE) and loss-only time / peak memory at large batch.

Side by side in one run, on whatever devices JAX sees (the numbers in docs/methods/ot_clip.md, "Performance": 2 CPU cores):
  * full train step through ``jaxlab.train.make_train_step`` (two-tower model, Adam), batch 256
    and 1024, for InfoNCE and entropic OT with 5 unrolled Sinkhorn iterations (plus the other
    OT losses for reference); the issue's target is OT / InfoNCE <= 1.2;
  * loss value-and-gradient time and XLA's peak buffer size at batch 4096 (should be O(B^2)).

  nice -n 5 python benchmarks/ot_clip_step_time.py --out=benchmarks/results/ot_clip
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.ot_clip.registry import get_loss
from jaxlab.ot_clip.train_loss import make_two_tower_loss
from jaxlab.ot_clip.two_tower import TwoTower
from jaxlab import train

_OUT = flags.DEFINE_string("out", "benchmarks/results/ot_clip", "results folder")
_BATCHES = flags.DEFINE_list("batches", ["256", "1024"], "train-step batch sizes")
_LOSSES = flags.DEFINE_list("losses", ["infonce", "entropic_ot", "unbalanced_ot", "dbot", "fgw", "siglip"],
                            "losses to time; the first is the baseline")
_WIDTHS = flags.DEFINE_list("widths", ["128", "1024"], "two-tower hidden widths (study model: 128)")
_BIG_BATCH = flags.DEFINE_integer("big_batch", 4096, "batch for loss-only time and memory")
_REPEATS = flags.DEFINE_integer("repeats", 20, "timed rounds per measurement (median reported)")

LOSS_KWARGS = {"entropic_ot": {"num_iterations": 5}, "unbalanced_ot": {"num_iterations": 5},
               "dbot": {"num_iterations": 5}, "fgw": {"num_iterations": 5, "num_outer": 3}}
VOCAB, SEQ, PIXELS = 41, 8, 64


def _interleaved_seconds(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, dict[str, float]]:
  """Median and min seconds per function, timed round-robin so that load from other processes
  on a shared machine hits every function alike."""
  for fn in fns.values():
    jax.block_until_ready(fn())  # compile + warm up
  times: dict[str, list[float]] = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      t0 = time.perf_counter()
      jax.block_until_ready(fn())
      times[name].append(time.perf_counter() - t0)
  return {name: {"median": float(np.median(t)), "min": float(np.min(t))} for name, t in times.items()}


def make_step(loss_name: str, batch_size: int, hidden: int) -> Callable[[], jax.Array]:
  """A closure running one full sharded train step (forward, loss, backward, Adam)."""
  mesh = train.make_mesh((("data", -1),))
  r = np.random.default_rng(0)
  batch = {"image": r.random((batch_size, PIXELS), np.float32),
           "tokens": r.integers(1, VOCAB, (batch_size, SEQ)).astype(np.int32)}
  model = TwoTower(vocab_size=VOCAB, hidden=hidden, embed_dim=32)
  loss_fn = make_two_tower_loss(model, loss_name, **LOSS_KWARGS.get(loss_name, {}))
  opt = optax.adam(1e-3)
  params = model.init(jax.random.key(0), batch["image"][:2], batch["tokens"][:2])["params"]
  state = train.TrainState.create(params, opt, jax.random.key(1))
  state_sharding = train.tree_shardings(state, mesh)
  step = train.make_train_step(loss_fn, opt, state_sharding=state_sharding,
                               batch_sharding=train.batch_sharding(mesh), donate=False)
  state = jax.device_put(state, state_sharding)
  batch = jax.device_put(batch, train.batch_sharding(mesh))
  return lambda: step(state, batch)[1]["loss"]


def loss_only(loss_names: list[str], batch_size: int, repeats: int) -> dict[str, dict[str, float]]:
  """Value-and-grad seconds (interleaved) and XLA's buffer sizes for each loss on [B, 32] embeddings."""
  k1, k2 = jax.random.split(jax.random.key(0))
  x = jax.random.normal(k1, (batch_size, 32))
  y = x + jax.random.normal(k2, (batch_size, 32))
  fns, out = {}, {}
  for name in loss_names:
    loss = get_loss(name, **LOSS_KWARGS.get(name, {}))
    fn = jax.jit(jax.value_and_grad(lambda x, y, s, loss=loss: loss(x, y, s, -10.0), argnums=(0, 1, 2)))
    mem = fn.lower(x, y, 14.0).compile().memory_analysis()
    peak = mem.temp_size_in_bytes + mem.argument_size_in_bytes + mem.output_size_in_bytes
    out[name] = {"peak_bytes": int(peak), "temp_bytes": int(mem.temp_size_in_bytes),
                 "peak_in_BxB_float32": peak / (4 * batch_size ** 2)}
    fns[name] = lambda fn=fn: fn(x, y, 14.0)
  for name, st in _interleaved_seconds(fns, repeats).items():
    out[name].update({"seconds": st["median"], "min_seconds": st["min"]})
  return out


def main(argv: list[str]) -> None:
  del argv
  out = {"devices": [str(d) for d in jax.devices()], "load_average_at_start": os.getloadavg(),
         "step_seconds": {}, "ratio_to_baseline": {}, "ratio_of_min_to_baseline": {}, "loss_only": {}}
  base = _LOSSES.value[0]
  for width in map(int, _WIDTHS.value):
    for batch in map(int, _BATCHES.value):
      key = f"hidden{width}/B{batch}"
      stats = _interleaved_seconds({name: make_step(name, batch, width) for name in _LOSSES.value},
                                   _REPEATS.value)
      times = {name: st["median"] for name, st in stats.items()}
      out["step_seconds"][key] = stats
      out["ratio_to_baseline"][key] = {name: t / times[base] for name, t in times.items()}
      out["ratio_of_min_to_baseline"][key] = {name: st["min"] / stats[base]["min"] for name, st in stats.items()}
      print(key, {n: f"{1e3 * t:.1f}ms ({t / times[base]:.2f}x)" for n, t in times.items()}, flush=True)
  big = loss_only(["infonce", "entropic_ot"], _BIG_BATCH.value, 5)
  for name, stats in big.items():
    out["loss_only"][f"{name}/B{_BIG_BATCH.value}"] = stats
    print(name, stats, flush=True)
  os.makedirs(_OUT.value, exist_ok=True)
  with open(os.path.join(_OUT.value, "step_time.json"), "w") as f:
    json.dump(out, f, indent=1)


if __name__ == "__main__":
  app.run(main)
