r"""What the shared train step costs over a hand-written jitted optax step.

Side by side in one run, same model, batch and optimizer (interleaved rounds, medians):

* one run: the bare step vs ``make_train_step`` without and with the non-finite guard;
* 8 vmapped runs (seeds): a bare ``vmap`` of the step vs ``make_train_step(vmap_runs=True)``
  without the guard, with the ``select`` guard (the default under vmap) and with ``cond``
  (which vmap turns into a select of both branches);
* a dispatch-bound tiny model: one step per call vs ``steps_per_call=20`` (``lax.scan``).

Run::

  python benchmarks/train_step_overhead.py --out benchmarks/results/train/step_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
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


def _problem(hidden: int, batch: int, runs: int | None):
  model = MLP(hidden=(hidden, hidden), num_outputs=10)
  r = np.random.default_rng(0)
  lead = (runs,) if runs else ()
  data = {"x": jnp.asarray(r.normal(size=lead + (batch, 64)), jnp.float32),
          "y": jnp.asarray(r.integers(0, 10, lead + (batch,)), jnp.int32)}
  keys = jax.random.split(jax.random.key(0), runs or 1)
  init = lambda k: model.init(k, jnp.zeros((1, 64)))["params"]
  params = jax.vmap(init)(keys) if runs else init(keys[0])

  def loss_fn(p, b, rng, extra):
    logits = model.apply({"params": p}, b["x"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b["y"]).mean(), {}

  return params, data, loss_fn


def _runner(step, state):
  box = [state]

  def run():
    box[0], m = step(box[0], data_box[0])
    return m["loss"]
  return run


data_box: list = [None]


def compare(hidden: int, batch: int, iters: int, runs: int | None) -> dict:
  params, data, loss_fn = _problem(hidden, batch, runs)
  data_box[0] = data
  opt = optax.adam(1e-3)

  def bare(p, o, b):
    loss, g = jax.value_and_grad(lambda p: loss_fn(p, b, None, None)[0])(p)
    u, o = opt.update(g, o, p)
    return optax.apply_updates(p, u), o, loss

  bare_j = jax.jit(jax.vmap(bare) if runs else bare, donate_argnums=(0, 1))
  init_opt = jax.vmap(opt.init) if runs else opt.init
  bare_box = [jax.tree.map(jnp.copy, params), init_opt(params)]

  def run_bare():
    bare_box[0], bare_box[1], loss = bare_j(bare_box[0], bare_box[1], data)
    return loss

  create = lambda p: TrainState.create(p, opt, jax.random.key(0))
  variants = {"bare": run_bare}
  guards = [("no_guard", False, "auto")]
  guards += [("guard_select", True, "select"), ("guard_cond", True, "cond")] if runs else [("guard_cond", True, "cond")]
  for name, skip, guard in guards:
    step = make_train_step(loss_fn, opt, skip_nonfinite=skip, guard=guard, vmap_runs=bool(runs))
    state = jax.jit(jax.vmap(create) if runs else create)(jax.tree.map(jnp.copy, params))
    variants[name] = _runner(step, state)
  for f in variants.values():
    for _ in range(5):
      f()  # compile and warm up
  times = dict(zip(variants, interleaved_medians(list(variants.values()), iters)))
  return {"ms": {k: 1e3 * v for k, v in times.items()},
          "ratio_to_bare": {k: v / times["bare"] for k, v in times.items() if k != "bare"}}


def dispatch_bound(iters: int) -> dict:
  """A 4.8k-parameter MLP: steps per second with 1 vs 20 steps per call."""
  model = MLP(hidden=(64,), num_outputs=10)
  r = np.random.default_rng(0)
  batch = {"x": jnp.asarray(r.normal(size=(128, 64)), jnp.float32), "y": jnp.asarray(r.integers(0, 10, 128), jnp.int32)}

  def loss_fn(p, b, rng, extra):
    return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, b["x"]), b["y"]).mean(), {}

  opt = optax.adam(1e-3)
  params = model.init(jax.random.key(0), batch["x"])["params"]
  out = {}
  for k in (1, 20):
    step = make_train_step(loss_fn, opt, steps_per_call=k)
    stacked = batch if k == 1 else jax.tree.map(lambda x: jnp.stack([x] * k), batch)
    box = [TrainState.create(params, opt, jax.random.key(0))]

    def run():
      box[0], m = step(box[0], stacked)
      return m["loss"]

    for _ in range(5):
      run()
    out[k] = interleaved_medians([run], max(iters // k, 20))[0] / k
  return {"us_per_step": {f"steps_per_call={k}": 1e6 * v for k, v in out.items()},
          "speedup": out[1] / out[20]}


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--hidden", type=int, default=1024)
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--iters", type=int, default=100)
  parser.add_argument("--runs", type=int, default=8)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  results = {
      "one_run": compare(args.hidden, args.batch, args.iters, None),
      f"{args.runs}_vmapped_runs": compare(args.hidden, args.batch, max(args.iters // 4, 20), args.runs),
      "dispatch_bound_4.8k_params": dispatch_bound(args.iters * 10),
  }
  params = 64 * args.hidden + args.hidden * args.hidden + args.hidden * 10 + 2 * args.hidden + 10
  out = {"params_per_run": params, "batch": args.batch, "device": jax.devices()[0].device_kind,
         "cpu": platform.processor() or platform.machine(), "load_avg_1m": os.getloadavg()[0],
         "results": results}
  print(json.dumps(out, indent=1))
  if args.out:
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(out, f, indent=1)


if __name__ == "__main__":
  main()
