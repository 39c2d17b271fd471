r"""OT-CLIP study on the digits: train two-tower models with each loss, evaluate zero-shot inference.

Rows: losses (InfoNCE, SigLIP, entropic OT, unbalanced OT, FGW). Settings: clean, noisy
correspondences (captions swapped with p = 0.2, 0.4), low data (150 pairs); the clean models are
also evaluated on a long-tailed test set (imbalance 10, known prior) and for selective
classification (50% coverage, AURC). Seeds are trained together under ``jax.vmap``.

Resumable: each (setting, loss) cell is appended to ``<out>/study.json`` when done and skipped on
rerun; ``--report_only`` just rewrites the table and plots.

  nice -n 5 python benchmarks/ot_clip_study.py --config=configs/ot_clip_digits.py
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from absl import app, flags
import jax
import jax.numpy as jnp
from ml_collections import config_flags
import numpy as np
import optax

from jaxlab.data.digits import load_digits_split
from jaxlab.ot_clip import digits_pairs, inference, selective
from jaxlab.ot_clip.train_loss import make_two_tower_loss
from jaxlab.ot_clip.two_tower import LOG_INIT_SCALE_CLIP, TwoTower
from jaxlab.train import TrainState, make_train_step

_CONFIG = config_flags.DEFINE_config_file("config", "configs/ot_clip_digits.py", "study config")
_OUT = flags.DEFINE_string("out", "benchmarks/results/ot_clip", "results folder")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "only rebuild table and plots from study.json")

CURVE_POINTS = 50
# Inference entry points jitted once (ott's solver loops are slow op by op).
_ot_plan = jax.jit(inference.ot_zero_shot_plan)
_ot_predict = jax.jit(inference.ot_zero_shot)
_fgw_predict = jax.jit(inference.fgw_zero_shot, static_argnames=("alpha",))
_partial_ot = jax.jit(selective.partial_ot_confidence, static_argnums=(3,))


def _model(cfg: Any, loss_name: str, vocab_size: int) -> TwoTower:
  spec = cfg.losses[loss_name]
  return TwoTower(vocab_size=vocab_size, hidden=cfg.model.hidden, embed_dim=cfg.model.embed_dim,
                  init_log_logit_scale=spec.get("init_log_logit_scale", LOG_INIT_SCALE_CLIP),
                  init_logit_bias=spec.get("init_logit_bias", 0.0))


def _seed_data(cfg: Any, setting: Any, seed: int, data: dict[str, np.ndarray], vocab: dict[str, int]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Images, (possibly swapped) caption tokens and the [steps, batch] index schedule of one seed."""
  r = np.random.default_rng(1000 + seed)
  x, y = data["x_train"], data["y_train"]
  if setting.num_pairs:
    keep = r.choice(len(x), setting.num_pairs, replace=False)
    x, y = x[keep], y[keep]
  tokens = digits_pairs.caption_tokens(y, vocab, r)
  if setting.swap_p:
    tokens, _ = digits_pairs.swap_captions(tokens, setting.swap_p, r)
  batch = min(cfg.batch_size, len(x))
  idx = np.stack([r.permutation(len(x))[:batch] for _ in range(cfg.num_steps)])
  return x, tokens, idx


_CHUNK = 10  # steps per scanned call; each call's mean loss is one point of the loss curve


def train(cfg: Any, loss_name: str, setting: Any, data: dict[str, np.ndarray], vocab: dict[str, int]
          ) -> tuple[Any, np.ndarray]:
  """Params stacked over seeds, and the loss curves [seeds, steps / 10] (means over 10 steps).

  The seeds train as vmapped runs of the shared step (``jaxlab.train.make_train_step`` with
  ``vmap_runs``), 10 steps per scanned call; each seed's batches (its own captions, swaps and
  order) are stacked ``[steps, seeds, batch, ...]``. No non-finite guard, as in a plain loop:
  a collapsed seed must show.
  """
  if cfg.num_steps % _CHUNK:
    raise ValueError(f"num_steps must be a multiple of {_CHUNK}, got {cfg.num_steps}")
  model = _model(cfg, loss_name, len(vocab) + 1)
  loss_fn = make_two_tower_loss(model, loss_name, **cfg.losses[loss_name].kwargs.to_dict())
  opt = optax.adam(optax.cosine_decay_schedule(cfg.learning_rate, cfg.num_steps))
  per_seed = [_seed_data(cfg, setting, s, data, vocab) for s in range(cfg.seeds)]
  batches = {  # [steps, seeds, batch, ...]
      "image": np.stack([x[idx] for x, _, idx in per_seed], axis=1),
      "tokens": np.stack([t[idx] for _, t, idx in per_seed], axis=1),
  }

  def init(key, image, tokens):
    return TrainState.create(model.init(key, image[:2], tokens[:2])["params"], opt, key)

  keys = jax.random.split(jax.random.key(0), cfg.seeds)
  state = jax.jit(jax.vmap(init))(keys, batches["image"][0], batches["tokens"][0])
  step = make_train_step(loss_fn, opt, skip_nonfinite=False, vmap_runs=True, steps_per_call=_CHUNK)
  curve = []
  for c in range(0, cfg.num_steps, _CHUNK):
    state, metrics = step(state, {k: v[c:c + _CHUNK] for k, v in batches.items()})
    curve.append(metrics["loss"])
  return state.params, np.stack(jax.device_get(curve), axis=1)


def _curve(conf: jax.Array, correct: jax.Array) -> list[float]:
  cov, risk = selective.risk_coverage_curve(conf, correct)
  pick = np.linspace(0, len(cov) - 1, CURVE_POINTS).astype(int)
  return [float(v) for v in np.asarray(risk)[pick]]


def evaluate(cfg: Any, model: TwoTower, params: Any, data: dict[str, np.ndarray],
             vocab: dict[str, int], seed: int) -> dict[str, Any]:
  """Zero-shot metrics of one trained model (one seed)."""
  apply = lambda method, *a: model.apply({"params": params}, *a, method=method)
  prompts = digits_pairs.class_prompt_tokens(vocab)                      # [K, T, L]
  t = apply(TwoTower.encode_text, prompts.reshape(-1, prompts.shape[-1]))
  class_emb = t.reshape(prompts.shape[0], prompts.shape[1], -1).mean(1)  # prompt ensemble
  x = apply(TwoTower.encode_image, data["x_test"])
  y = jnp.asarray(data["y_test"])
  eps = 1.0 / float(model.apply({"params": params}, method=TwoTower.logit_scale))
  ev = cfg.eval
  acc = lambda pred, labels: float(jnp.mean(pred == labels))

  out: dict[str, Any] = {"epsilon": eps}
  logits = jnp.asarray(x) @ jnp.asarray(class_emb).T
  pred = inference.zero_shot_predict(x, class_emb)
  out["zs_argmax"] = acc(pred, y)
  # Share of the most predicted class (0.1 when balanced): shows per-class offsets of the cost,
  # which a two-sided plan absorbs into its potentials and so does not train away.
  out["argmax_max_class_share"] = float(np.bincount(np.asarray(pred), minlength=10).max() / len(pred))
  ot_plan = _ot_plan(x, class_emb, eps)
  out["zs_ot_uniform"] = acc(jnp.argmax(ot_plan, 1), y)
  out["zs_fgw"] = acc(_fgw_predict(x, class_emb, eps, alpha=ev.fgw_alpha), y)

  # Long-tailed test subset with its known prior.
  lt, prior = digits_pairs.long_tailed_indices(data["y_test"], ev.imbalance, np.random.default_rng(seed))
  xl, yl = x[lt], y[lt]
  out["lt_argmax"] = acc(inference.zero_shot_predict(xl, class_emb), yl)
  out["lt_ot_uniform"] = acc(_ot_predict(xl, class_emb, eps), yl)
  out["lt_ot_prior"] = acc(_ot_predict(xl, class_emb, eps, class_prior=prior), yl)
  out["lt_fgw_prior"] = acc(_fgw_predict(xl, class_emb, eps, class_prior=prior,
                                                    alpha=ev.fgw_alpha), yl)

  # Selective classification on the balanced test set.
  soft = jax.nn.softmax(logits / eps, axis=1)
  conf_soft, pred_soft = soft.max(1), soft.argmax(1)
  pred_plan, conf_plan = selective.plan_confidence(ot_plan)
  pred_part, conf_part = _partial_ot(x, class_emb, eps, ev.coverage)
  for name, pred, conf in [("softmax", pred_soft, conf_soft), ("plan", pred_plan, conf_plan),
                           ("partial_ot", pred_part, conf_part)]:
    correct = pred == y
    out[f"risk50_{name}"] = float(selective.selective_risk(conf, correct, ev.coverage))
    out[f"aurc_{name}"] = float(selective.aurc(conf, correct))
    out[f"curve_{name}"] = _curve(conf, correct)
  return out


def run_cell(cfg: Any, setting_name: str, loss_name: str, data: dict[str, np.ndarray],
             vocab: dict[str, int]) -> dict[str, Any]:
  t0 = time.perf_counter()
  params, losses = train(cfg, loss_name, cfg.settings[setting_name], data, vocab)
  t_train = time.perf_counter() - t0
  model = _model(cfg, loss_name, len(vocab) + 1)
  seeds = [evaluate(cfg, model, jax.tree.map(lambda p: p[s], params), data, vocab, s)
           for s in range(cfg.seeds)]
  cell = {k: [d[k] for d in seeds] for k in seeds[0]}
  cell["final_train_loss"] = [float(v) for v in losses[:, -1]]  # mean of the last 10 steps
  cell["train_seconds"] = t_train
  cell["total_seconds"] = time.perf_counter() - t0
  return cell


def _load(path: str) -> dict[str, Any]:
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  return {}


TABLE_COLUMNS = [("zs_argmax", "argmax"), ("argmax_max_class_share", "top class share"),
                 ("zs_ot_uniform", "OT (uniform)"), ("zs_fgw", "FGW inf."),
                 ("aurc_plan", "AURC (plan)"), ("risk50_plan", "risk@50% (plan)"),
                 ("risk50_partial_ot", "risk@50% (partial OT)"), ("aurc_softmax", "AURC (softmax)")]
LT_COLUMNS = [("lt_argmax", "argmax"), ("lt_ot_uniform", "OT (uniform)"),
              ("lt_ot_prior", "OT (known prior)"), ("lt_fgw_prior", "FGW (known prior)")]


def _fmt(values: list[float], pct: bool) -> str:
  v = np.asarray(values) * (100 if pct else 1)
  return f"{v.mean():.1f} ± {v.std():.1f}" if pct else f"{v.mean():.3f} ± {v.std():.3f}"


ROW_ORDER = ("infonce", "siglip", "entropic_ot", "unbalanced_ot", "fgw", "dbot", "ufgw")
SETTING_ORDER = ("clean", "noisy_p20", "noisy_p40", "low_data_150")


def _ordered(keys: Any, order: tuple[str, ...]) -> list[str]:
  """The issue's order first, anything else after, alphabetically (ConfigDict sorts keys)."""
  keys = [k for k in keys if not k.startswith("_")]
  return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def report(results: dict[str, Any], out: str) -> str:
  """Markdown tables (mean ± std over seeds) and plots; returns the markdown."""
  results = {s: {l: results[s][l] for l in _ordered(results[s], ROW_ORDER)}
             for s in _ordered(results, SETTING_ORDER)}
  lines = []
  for setting, cells in results.items():
    lines += [f"\n**{setting}** — accuracy % / risk % (AURC ×100)\n",
              "| loss | " + " | ".join(c for _, c in TABLE_COLUMNS) + " |",
              "|---" * (len(TABLE_COLUMNS) + 1) + "|"]
    for loss, cell in cells.items():
      lines.append(f"| {loss} | " + " | ".join(_fmt(cell[k], True) for k, _ in TABLE_COLUMNS) + " |")
  if "clean" in results:
    lines += ["\n**long-tailed test (imbalance 10), clean models** — accuracy %\n",
              "| loss | " + " | ".join(c for _, c in LT_COLUMNS) + " |", "|---" * (len(LT_COLUMNS) + 1) + "|"]
    for loss, cell in results["clean"].items():
      lines.append(f"| {loss} | " + " | ".join(_fmt(cell[k], True) for k, _ in LT_COLUMNS) + " |")
  md = "\n".join(lines) + "\n"
  with open(os.path.join(out, "study_table.md"), "w") as f:
    f.write(md)
  _plot(results, out)
  return md


def _plot(results: dict[str, Any], out: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  settings = [s for s in results if not s.startswith("_")]
  if not settings:
    return
  losses = list(results[settings[0]])
  fig, axes = plt.subplots(1, 2, figsize=(12, 3.5), sharey=True)
  width = 0.8 / len(losses)
  panels = [("zs_argmax", "argmax zero-shot"), ("zs_ot_uniform", "OT inference (uniform prior)")]
  for ax, (key, title) in zip(axes, panels):
    for i, loss in enumerate(losses):
      vals = [100 * np.asarray(results[s][loss][key]) if loss in results[s] else np.full(1, np.nan)
              for s in settings]
      ax.bar(np.arange(len(settings)) + i * width, [v.mean() for v in vals], width,
             yerr=[v.std() for v in vals], label=loss)
    ax.set_xticks(np.arange(len(settings)) + 0.4 - width / 2, settings)
    ax.set_title(title)
    ax.set_ylim(50, 100)
  axes[0].set_ylabel("test accuracy % (mean ± std over seeds)")
  axes[1].legend(fontsize=7, ncol=2, loc="lower left")
  fig.tight_layout()
  fig.savefig(os.path.join(out, "study_accuracy.png"), dpi=110)
  plt.close(fig)
  curve_settings = [s for s in ("clean", "noisy_p40") if s in results]
  if curve_settings:
    fig, axes = plt.subplots(1, len(curve_settings), figsize=(5 * len(curve_settings), 3.5), squeeze=False)
    grid = np.linspace(0, 1, CURVE_POINTS)
    for ax, setting in zip(axes[0], curve_settings):
      for loss, cell in results[setting].items():
        line, = ax.plot(grid, 100 * np.mean(cell["curve_plan"], 0), label=f"{loss} (plan)")
        ax.plot(grid, 100 * np.mean(cell["curve_softmax"], 0), "--", color=line.get_color(), lw=0.8)
      ax.set_title(f"{setting}: solid = OT-plan confidence, dashed = softmax")
      ax.set_xlabel("coverage")
      ax.set_ylabel("selective risk %")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "risk_coverage.png"), dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> None:
  del argv
  cfg, out = _CONFIG.value, _OUT.value
  os.makedirs(out, exist_ok=True)
  path = os.path.join(out, "study.json")
  results = _load(path)
  if not _REPORT_ONLY.value:
    data = load_digits_split(cfg.eval.test_fraction)
    vocab = digits_pairs.build_vocab()
    for setting in cfg.settings:
      for loss in cfg.losses:
        if loss in results.get(setting, {}):
          print(f"skip {setting}/{loss} (done)")
          continue
        cell = run_cell(cfg, setting, loss, data, vocab)
        results.setdefault(setting, {})[loss] = cell
        meta = results.setdefault("_meta", {"cell_seconds": {}})
        meta["cell_seconds"][f"{setting}/{loss}"] = cell["total_seconds"]
        meta["total_seconds"] = sum(meta["cell_seconds"].values())
        meta["config"] = cfg.to_dict()
        with open(path, "w") as f:
          json.dump(results, f, indent=1)
        print(f"{setting}/{loss}: argmax {np.mean(cell['zs_argmax']):.3f} "
              f"OT {np.mean(cell['zs_ot_uniform']):.3f} ({cell['total_seconds']:.0f}s)", flush=True)
  print(report(results, out))


if __name__ == "__main__":
  app.run(main)
