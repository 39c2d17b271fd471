r"""Learning-rate sensitivity of MoMo / MoMo-Adam vs. SGD-M, Adam and other adaptive methods.

For each problem and method, trains ``len(lrs) x seeds`` models in one jit (vmap over both),
then reports the best test accuracy (mean over seeds) and how many decades of learning rate
stay within ``tolerance`` points of it. A learning rate where any seed ends non-finite counts
as a failure. Results go to ``<out_dir>/lr_sweep_<problem>.json`` as each method finishes; a
rerun skips methods already there with the same settings. ``--report_only`` redraws the
table (``lr_sweep.md``) and plot (``lr_sweep.png``) from the JSON files.

  nice -n 5 python benchmarks/momo_lr_sweep.py --config=configs/momo_lr_sweep.py

Schaipp et al., "MoMo: Momentum Models for Adaptive Learning Rates", ICML 2024, Sec. 6 runs
the same kind of sweep (their Fig. 1/5: accuracy vs. learning rate).
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import app, flags
from ml_collections import config_flags

from jaxlab.data.digits import load_digits_split
from jaxlab.models.registry import make_model
from jaxlab.optim import OPTIMIZERS, set_hyperparams
from jaxlab.train import TrainState, make_train_step

_CONFIG = config_flags.DEFINE_config_file("config", "configs/momo_lr_sweep.py", "Sweep config.")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "Only rebuild table and plot from JSON.")


def load_problem(cfg: ml_collections.ConfigDict, prob: ml_collections.ConfigDict) -> dict:
  data = load_digits_split(cfg.test_fraction, cfg.split_seed, images=True)
  if prob.label_noise > 0:  # fixed noise, shared by all runs
    r = np.random.default_rng(1234)
    y = data["y_train"].copy()
    flip = r.random(len(y)) < prob.label_noise
    y[flip] = r.integers(0, 10, flip.sum())
    data["y_train"] = y
  return {k: jnp.asarray(v) for k, v in data.items()}


def build_optimizer(method: ml_collections.ConfigDict) -> optax.GradientTransformationExtraArgs:
  """The method with its learning-rate argument injected, so each run holds its own rate."""
  factory = OPTIMIZERS.get(method.optimizer)
  kwargs = {method.lr_arg: 1.0, **method.kwargs.to_dict()}
  return optax.inject_hyperparams(factory, static_args=[k for k in kwargs if k != method.lr_arg])(**kwargs)


def _scalar_fields(state: Any, name: str) -> list[jax.Array]:
  return [leaf for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]
          if path and getattr(path[-1], "name", None) == name and jnp.ndim(leaf) == 0]


def make_sweep(model, method: ml_collections.ConfigDict, data: dict, steps: int, batch_size: int,
               vmap_runs: bool = True):
  """``(lrs[L], seeds[S]) -> metrics[L, S]`` for all ``L x S`` training runs.

  Every run trains through the shared step (``jaxlab.train.make_train_step``), the runs vmapped
  together (``vmap_runs``) or, for CNNs, one after another (vmapping a conv over its weights
  makes a grouped conv, ~3x slower per run on CPU). Minibatches are drawn on the device by the
  step's ``collect`` from the run's seed and step. One jitted call per step from a Python loop:
  XLA:CPU runs these convs ~20x slower inside ``lax.scan``. The learning rate lives in the
  optimizer state (``inject_hyperparams``), so each method compiles once. No non-finite guard:
  a sweep must see divergence.
  """
  x, y, n = data["x_train"], data["y_train"], data["x_train"].shape[0]
  opt = build_optimizer(method)
  lr_arg = method.lr_arg

  def xent(params, xb, yb):
    logits = model.apply({"params": params}, xb)
    return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

  def loss_fn(params, batch, rng, extra):
    del rng, extra
    return xent(params, batch["x"], batch["y"]), {}

  def collect(state, rng):
    del rng  # the study's own stream: batch i of a run is drawn from fold_in(key(seed), i + 1)
    key = jax.random.fold_in(jax.random.wrap_key_data(state.data_state), state.step + 1)
    idx = jax.random.randint(key, (batch_size,), 0, n)
    return state, {"x": x[idx], "y": y[idx]}, {}

  def init(lr, seed):
    key = jax.random.key(seed)
    params = model.init(jax.random.fold_in(key, 0), x[:1])["params"]
    state = TrainState.create(params, opt, key, data_state=jax.random.key_data(key))
    return state.replace(opt_state=set_hyperparams(state.opt_state, {lr_arg: lr}))

  def evaluate(state, recent_loss):
    params = state.params
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(p)) for p in jax.tree.leaves(params)]))
    logits = model.apply({"params": params}, data["x_test"])
    lbs, taus = _scalar_fields(state.opt_state, "lb"), _scalar_fields(state.opt_state, "step_size")
    return {
        "test_acc": 100.0 * jnp.mean(jnp.argmax(logits, -1) == data["y_test"]),
        "train_loss": xent(params, x, y),  # on the (possibly noisy) training labels
        "last_loss": recent_loss,
        "finite": finite & jnp.isfinite(recent_loss),
        "lb": lbs[0] if lbs else jnp.nan,
        "step_size": taus[0] if taus else jnp.nan,
    }

  batch = (lambda f: jax.vmap(f)) if vmap_runs else (lambda f: f)
  init_j = jax.jit(batch(init))
  step = make_train_step(loss_fn, opt, collect=collect, skip_nonfinite=False, vmap_runs=vmap_runs)
  eval_j = jax.jit(batch(evaluate))

  def train(lr, seed):
    state = init_j(lr, seed)
    recent = []
    for i in range(steps):
      state, metrics = step(state)
      if i >= steps - 20:
        recent.append(metrics["loss"])
    return eval_j(state, jnp.mean(jnp.stack(recent), axis=0))

  def sweep(lrs, seeds):
    lr_grid = jnp.repeat(lrs, seeds.size)
    seed_grid = jnp.tile(seeds, lrs.size)
    if vmap_runs:
      out = train(lr_grid, seed_grid)
    else:
      runs = [train(lr, seed) for lr, seed in zip(lr_grid, seed_grid)]
      out = jax.tree.map(lambda *v: jnp.stack(v), *runs)
    return jax.tree.map(lambda v: v.reshape(lrs.size, seeds.size), out)

  return sweep


def summarize(lrs: list[float], acc: np.ndarray, finite: np.ndarray, tol: float) -> dict:
  """Best mean accuracy and the learning rates (decades) within ``tol`` points of it."""
  ok = finite.all(axis=1)
  mean = np.where(ok, acc.mean(axis=1), -np.inf)
  best = float(mean.max())
  good = ok & (mean >= best - tol)
  # Longest run of consecutive good decades, which is what "robust to the lr" means in practice.
  run, longest = 0, 0
  for g in good:
    run = run + 1 if g else 0
    longest = max(longest, run)
  return {"best_acc": best, "best_lr": lrs[int(mean.argmax())], "decades_within": int(good.sum()),
          "longest_run": longest, "good_lrs": [lr for lr, g in zip(lrs, good) if g],
          "failures": int((~ok).sum())}


def run_problem(cfg: ml_collections.ConfigDict, name: str, out: pathlib.Path) -> None:
  prob = cfg.problems[name]
  path = out / f"lr_sweep_{name}.json"
  results = json.loads(path.read_text()) if path.exists() else {}
  settings = {"lrs": list(cfg.lrs), "seeds": cfg.seeds, "steps": prob.steps,
              "batch_size": prob.batch_size, "model": prob.model, "vmap_runs": prob.vmap_runs,
              "model_kwargs": prob.model_kwargs.to_dict(), "label_noise": prob.label_noise}
  settings = json.loads(json.dumps(settings))  # tuples -> lists, as they come back from disk
  data = load_problem(cfg, prob)
  model = make_model(prob.model, **prob.model_kwargs.to_dict())
  lrs, seeds = jnp.asarray(cfg.lrs, jnp.float32), jnp.arange(cfg.seeds)
  for m in prob.methods:
    if m in results and results[m]["settings"] == settings:
      print(f"[{name}] {m}: done already, skipping")
      continue
    t0 = time.time()
    sweep = make_sweep(model, cfg.methods[m], data, prob.steps, prob.batch_size, prob.vmap_runs)
    metrics = jax.device_get(sweep(lrs, seeds))
    seconds = time.time() - t0
    acc, finite = np.asarray(metrics["test_acc"]), np.asarray(metrics["finite"])
    results[m] = {
        "settings": settings, "method": cfg.methods[m].to_dict(), "seconds": seconds,
        **{k: np.asarray(v, np.float64).round(5).tolist() for k, v in metrics.items()},
        "summary": summarize(list(cfg.lrs), acc, finite, cfg.tolerance),
    }
    path.write_text(json.dumps(results, indent=1))
    s = results[m]["summary"]
    print(f"[{name}] {m:16s} best {s['best_acc']:6.2f} @ {s['best_lr']:.0e}  "
          f"within {cfg.tolerance:g}pt: {s['decades_within']} decades  ({seconds:.0f}s)")


# Fixed colours, so a method looks the same in every panel; references are dashed.
_COLORS = {"sgdm": "tab:blue", "momo": "tab:orange", "momo_adapt": "tab:brown", "adam": "tab:green",
           "momo_adam": "tab:red", "momo_adam_adapt": "tab:pink", "polyak_sgd": "tab:purple",
           "prodigy": "tab:gray", "dadapt_adamw": "tab:olive"}
_REFERENCES = ("polyak_sgd", "prodigy", "dadapt_adamw")


def report(cfg: ml_collections.ConfigDict, out: pathlib.Path) -> None:
  """Writes lr_sweep.md (tables) and lr_sweep.png (accuracy vs. learning rate)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  names = [p for p in cfg.problems if (out / f"lr_sweep_{p}.json").exists()]
  fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
  lines, total = [], 0.0
  for ax, name in zip(axes[0], names):
    results = json.loads((out / f"lr_sweep_{name}.json").read_text())
    lines += [f"\n### {name}\n", "| method | best acc (%) | best lr | decades within "
              f"{cfg.tolerance:g} pt | longest run | failed lrs | final train loss @ best | lb @ best |",
              "|---|---|---|---|---|---|---|---|"]
    for m, r in results.items():
      s, lrs = r["summary"], r["settings"]["lrs"]
      total += r["seconds"]
      i = lrs.index(s["best_lr"])
      acc = np.asarray(r["test_acc"])
      ok = np.asarray(r["finite"]).all(axis=1)
      lb = np.nanmean(r["lb"][i]) if not np.all(np.isnan(r["lb"][i])) else float("nan")
      lines.append(f"| {m} | {s['best_acc']:.2f} | {s['best_lr']:.0e} | {s['decades_within']} | "
                   f"{s['longest_run']} | {s['failures']} | {np.mean(r['train_loss'][i]):.3f} | "
                   f"{'-' if np.isnan(lb) else f'{lb:.3f}'} |")
      mean = np.where(ok, acc.mean(axis=1), np.nan)
      ax.errorbar(lrs, mean, yerr=np.where(ok, acc.std(axis=1), np.nan), marker="o", ms=4,
                  capsize=2, label=m, color=_COLORS.get(m), ls="--" if m in _REFERENCES else "-")
    ax.set(xscale="log", xlabel="learning rate", ylabel="test accuracy (%)", title=name,
           ylim=(0, 100))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(out / "lr_sweep.png", dpi=90)
  lines.append(f"\nCompute: {total:.0f} s of wall-clock for all sweeps (sum over methods).")
  (out / "lr_sweep.md").write_text("\n".join(lines).lstrip() + "\n")
  print("\n".join(lines))


def main(argv: list[str]) -> None:
  del argv
  cfg = _CONFIG.value
  out = pathlib.Path(cfg.out_dir)
  out.mkdir(parents=True, exist_ok=True)
  if not _REPORT_ONLY.value:
    for name in cfg.problems:
      run_problem(cfg, name, out)
  report(cfg, out)


if __name__ == "__main__":
  app.run(main)
