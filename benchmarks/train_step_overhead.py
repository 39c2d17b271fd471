r"""What the shared train step costs over a hand-written jitted optax step.

Side by side in one run, same model, batch and optimizer; reports the median step time of each and
the ratio. Run::

  python benchmarks/train_step_overhead.py --out benchmarks/results/train/step_overhead.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.models.mlp import MLP
from jaxlab.train import TrainState, make_train_step


def interleaved_medians(fns, n: int) -> list[float]:
  """Median seconds per call of each fn, calls interleaved so that machine noise hits all alike."""
  times = [[] for _ in fns]
  for _ in range(n):
    for i, fn in enumerate(fns):
      t = time.perf_counter()
      jax.block_until_ready(fn())
      times[i].append(time.perf_counter() - t)
  return [float(np.median(ts)) for ts in times]


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--hidden", type=int, default=1024)
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--iters", type=int, default=200)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()

  model = MLP(hidden=(args.hidden, args.hidden), num_outputs=10)
  r = np.random.default_rng(0)
  batch = {"x": jnp.asarray(r.normal(size=(args.batch, 64)), jnp.float32),
           "y": jnp.asarray(r.integers(0, 10, args.batch), jnp.int32)}
  params = model.init(jax.random.key(0), batch["x"])["params"]
  opt = optax.adam(1e-3)

  def loss_fn(p, b, rng, extra):
    logits = model.apply({"params": p}, b["x"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b["y"]).mean(), {}

  @jax.jit
  def bare_step(p, o, b):
    loss, g = jax.value_and_grad(lambda p: loss_fn(p, b, None, None)[0])(p)
    u, o = opt.update(g, o, p)
    return optax.apply_updates(p, u), o, loss

  results = {}
  bare = [params, opt.init(params)]

  def run_bare():
    bare[0], bare[1], loss = bare_step(bare[0], bare[1], batch)
    return loss

  for guard in (False, True):
    step = make_train_step(loss_fn, opt, skip_nonfinite=guard)
    st = [TrainState.create(jax.tree.map(jnp.copy, params), opt, jax.random.key(0))]  # donated

    def run_shared():
      st[0], m = step(st[0], batch)
      return m["loss"]

    for f in (run_bare, run_shared):
      for _ in range(5):
        f()  # compile and warm up
    t_bare, t_shared = interleaved_medians([run_bare, run_shared], args.iters)
    results[f"skip_nonfinite={guard}"] = {"bare_ms": 1e3 * t_bare, "shared_ms": 1e3 * t_shared,
                                          "ratio": t_shared / t_bare}
  n_params = sum(x.size for x in jax.tree.leaves(params))
  out = {"params": int(n_params), "batch": args.batch, "device": jax.devices()[0].device_kind,
         "cpu": platform.processor() or platform.machine(), "results": results}
  print(json.dumps(out, indent=1))
  if args.out:
    with open(args.out, "w") as f:
      json.dump(out, f, indent=1)


if __name__ == "__main__":
  main()
