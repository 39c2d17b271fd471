r"""Step time of MoMo / MoMo-Adam vs. SGD-M / Adam and vs. optax.contrib's MoMo, side by side.

For each model, every optimizer trains through the shared ``make_train_step`` (forward,
backward, update, non-finite guard) on the same batch. Methods are timed round-robin, many
rounds, so background load hits all of them alike; we report the median time per step and the
ratios the issue asks for. ``update only`` times ``optimizer.update + apply_updates`` on fixed
gradients, i.e. the optimizer's own cost.

  nice -n 5 python benchmarks/momo_step_time.py --out benchmarks/results/momo/step_time.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.data.digits import load_digits_split
from jaxlab.models.mlp import MLP, SmallCNN
from jaxlab.optim import make_optimizer
from jaxlab.train import TrainState, make_train_step

MODELS = {
    "digits_mlp_64": lambda: MLP(hidden=(64,)),
    "mlp_1024x2": lambda: MLP(hidden=(1024, 1024)),  # 1.1M params
    "cnn_1m": lambda: SmallCNN(features=(32, 64), hidden=256),  # 1.1M params, conv-dominated
}
# name -> (registry name, kwargs); learning rates are typical, not tuned: speed only.
METHODS = {
    "sgdm": ("sgdm", dict(learning_rate=1.0)),
    "momo": ("momo", dict(learning_rate=1.0)),
    "optax_momo": ("optax_momo", dict(learning_rate=1.0)),
    "adam": ("adam", dict(learning_rate=1e-3)),
    "momo_adam": ("momo_adam", dict(learning_rate=1e-2)),
    "optax_momo_adam": ("optax_momo_adam", dict(learning_rate=1e-2)),
}
RATIOS = [("momo", "sgdm"), ("momo_adam", "adam"), ("momo", "optax_momo"),
          ("momo_adam", "optax_momo_adam")]


def _xent(model):
  def loss_fn(params, batch, rng, extra):
    del rng, extra
    logits = model.apply({"params": params}, batch["x"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean(), {}
  return loss_fn


def _timer(step_fn, carry, steps: int):
  """Returns ``time_once() -> seconds per step``, threading (donated) state through calls."""
  box = [carry]

  def once() -> float:
    t = time.perf_counter()
    c = box[0]
    for _ in range(steps):
      c = step_fn(c)
    jax.block_until_ready(c)
    box[0] = c
    return (time.perf_counter() - t) / steps

  once()  # compile + warm up
  return once


def bench_model(name: str, batch_size: int, steps: int, rounds: int) -> dict:
  model = MODELS[name]()
  data = load_digits_split(images=True)
  batch = {"x": jnp.asarray(data["x_train"][:batch_size]),
           "y": jnp.asarray(data["y_train"][:batch_size])}
  params = model.init(jax.random.key(0), batch["x"])["params"]
  loss_fn = _xent(model)
  grads = jax.grad(lambda p: loss_fn(p, batch, None, ())[0])(params)
  loss = loss_fn(params, batch, None, ())[0]
  timers = {}
  for m, (reg, kw) in METHODS.items():
    opt = optax.with_extra_args_support(make_optimizer(reg, **kw))
    train_step = make_train_step(loss_fn, opt)
    state = TrainState.create(jax.tree.map(jnp.copy, params), opt, jax.random.key(0))
    timers[(m, "train_step")] = _timer(lambda s, f=train_step: f(s, batch)[0], state, steps)

    @jax.jit
    def update(c, opt=opt):
      p, s = c
      u, s = opt.update(grads, s, p, value=loss)
      return optax.apply_updates(p, u), s

    p0 = jax.tree.map(jnp.copy, params)
    timers[(m, "update_only")] = _timer(update, (p0, opt.init(p0)), steps)
  samples = {k: [] for k in timers}
  for _ in range(rounds):  # round-robin: background load hits every method alike
    for k, once in timers.items():
      samples[k].append(once())
  med = {f"{m}/{kind}": float(np.median(v)) * 1e3 for (m, kind), v in samples.items()}
  # Spread of the samples (interquartile range over the median), to read the ratios against.
  spread = {f"{m}/{kind}": float(np.subtract(*np.percentile(v, [75, 25])) / np.median(v))
            for (m, kind), v in samples.items()}
  ratios = {f"{a}/{b} ({kind})": med[f"{a}/{kind}"] / med[f"{b}/{kind}"]
            for a, b in RATIOS for kind in ("train_step", "update_only")}
  n_params = sum(x.size for x in jax.tree.leaves(params))
  return {"params": int(n_params), "batch_size": batch_size, "median_ms": med,
          "relative_iqr": spread, "ratios": ratios}


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--models", default=",".join(MODELS))
  parser.add_argument("--batch", type=int, default=128)
  parser.add_argument("--steps", type=int, default=20, help="steps per timed sample")
  parser.add_argument("--rounds", type=int, default=30, help="round-robin samples per method")
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  t0 = time.time()
  results = {"devices": [str(d) for d in jax.devices()], "platform": platform.platform(),
             "jax": jax.__version__, "optax": optax.__version__, "models": {}}
  for name in args.models.split(","):
    r = results["models"][name] = bench_model(name, args.batch, args.steps, args.rounds)
    print(f"\n{name} ({r['params']:,} params, batch {args.batch})")
    for k, v in r["median_ms"].items():
      print(f"  {k:28s} {v:8.3f} ms  (IQR {100 * r['relative_iqr'][k]:4.1f}%)")
    for k, v in r["ratios"].items():
      print(f"  {k:40s} {v:6.3f}")
  results["seconds"] = time.time() - t0
  if args.out:
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
  main()
