"""Writes the notebooks in colabs/ from the cells below (tests/test_colabs.py runs each one).

  python scripts/make_colabs.py
"""

import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALL = "# On Colab, from a checkout of the repository: !pip install -q -e /content/jaxlab"

NOTEBOOKS = {
    "quickstart.ipynb": [
        ("markdown", """# jaxlab quickstart

Four ICML 2024 methods composing into one sharded train step. This notebook trains a config
through `jaxlab.train`, then plots its metrics. Nothing is downloaded."""),
        ("code", INSTALL + """
import tempfile

import jax
import matplotlib.pyplot as plt

from configs import digits_mlp
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.train.trainer import train

print(jax.devices())"""),
        ("markdown", """## Train through the one step
Digits classification with MoMo (`jaxlab.optim.momo`): the step passes `value=loss`, and MoMo's
adaptive step size shows up in the metrics as `opt/step_size`. `get_config("tiny")` is a
few-second variant; drop the argument for the full run."""),
        ("code", """config = digits_mlp.get_config("tiny")
workdir = tempfile.mkdtemp()
result = train(config, workdir, progress=False)
result.summary"""),
        ("markdown", "## Metrics from `metrics.jsonl`"),
        ("code", """rows = read_metrics(workdir)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3))
steps = [r["step"] for r in rows]
ax0.plot(steps, [r["loss"] for r in rows], marker="o")
ax0.set(xlabel="step", ylabel="train loss", title=result.summary["task"])
ax1.plot(steps, [r["opt/step_size"] for r in rows], marker="o")
ax1.set(xlabel="step", ylabel="MoMo step size", yscale="log")
assert rows[-1]["step"] == config.num_steps"""),
    ],
    "momo.ipynb": [
        ("markdown", """# MoMo: learning-rate robustness in a few lines

`jaxlab.optim.momo` is an optax transform that also takes the loss (`value=loss`). Its step is
the momentum step capped by a Polyak-type model step (Schaipp et al., ICML 2024), so very large
learning rates stop hurting. Here: SGD-M vs MoMo on scikit-learn's digits over 5 decades of
learning rate (the full study is `benchmarks/momo_lr_sweep.py`)."""),
        ("code", INSTALL + """
import jax, jax.numpy as jnp, numpy as np, optax
import matplotlib.pyplot as plt

from jaxlab.data.digits import load_digits_split
from jaxlab.models.mlp import MLP
from jaxlab.optim import momo, make_optimizer

data = load_digits_split()
model = MLP(hidden=(64,))
x, y = jnp.asarray(data["x_train"]), jnp.asarray(data["y_train"])

def loss_fn(params):
  logits = model.apply({"params": params}, x)
  return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

def train(opt, steps=150):
  params = model.init(jax.random.key(0), x[:1])["params"]
  state = opt.init(params)
  @jax.jit
  def step(params, state):
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, state = opt.update(grads, state, params, value=loss)  # plain optax ignores value
    return optax.apply_updates(params, updates), state
  for _ in range(steps):
    params, state = step(params, state)
  logits = model.apply({"params": params}, data["x_test"])
  return float((logits.argmax(-1) == data["y_test"]).mean()), state"""),
        ("code", """lrs = [1e-1, 1e0, 1e1, 1e2, 1e3]
acc = {"SGD-M": [], "MoMo": []}
for lr in lrs:
  acc["SGD-M"].append(train(optax.with_extra_args_support(make_optimizer("sgdm", learning_rate=lr)))[0])
  acc["MoMo"].append(train(momo(learning_rate=lr))[0])
fig, ax = plt.subplots(figsize=(5, 3))
for name, a in acc.items():
  ax.plot(lrs, a, marker="o", label=name)
ax.set(xscale="log", xlabel="learning rate", ylabel="test accuracy"); ax.legend()
print(acc)
assert min(acc["MoMo"][1:]) > 0.9      # MoMo stays good at every lr >= 1
assert acc["SGD-M"][-1] < 0.5          # SGD-M diverges at lr = 1000"""),
        ("markdown", """MoMo-Adam (`momo_adam`) does the same for Adam; `adapt_lower_bound=True` (MoMo*) estimates
the loss's lower bound online when 0 is far from the optimum."""),
    ],
    "ot_clip.ipynb": [
        ("markdown", """# OT-CLIP: CLIP's loss as optimal transport, and OT inference

Shi, Fan & Yan (ICML 2024): InfoNCE equals KL(I/n ‖ P) for the one-sided entropic OT plan
P = softmax(S/ε)/n; two-sided, unbalanced and fused Gromov-Wasserstein plans generalise it, and
at test time an OT plan between test images and class prompts can impose a known class prior."""),
        ("code", INSTALL + """
import tempfile

import jax, jax.numpy as jnp, numpy as np

from configs import digits_clip
from jaxlab import ot_clip
from jaxlab.ot_clip import digits_pairs
from jaxlab.ot_clip.two_tower import TwoTower
from jaxlab.train.trainer import train"""),
        ("markdown", "## InfoNCE is one-sided entropic OT"),
        ("code", """x = jax.random.normal(jax.random.key(0), (16, 8)); y = x + 0.5 * jax.random.normal(jax.random.key(1), (16, 8))
scale = 1 / 0.07
print(ot_clip.clip_loss(x, y, scale), ot_clip.one_sided_ot_loss(x, y, scale))
np.testing.assert_allclose(ot_clip.clip_loss(x, y, scale), ot_clip.one_sided_ot_loss(x, y, scale), rtol=1e-5)"""),
        ("markdown", """## Train a two-tower model with the entropic-OT loss through the one step
Digit images and generated captions; zero-shot prompts come from held-out templates."""),
        ("code", """config = digits_clip.get_config("tiny")
config.num_steps = 150
result = train(config, tempfile.mkdtemp(), progress=False)
print({k: result.summary[k] for k in ("final_loss", "zero_shot_accuracy", "ot_zero_shot_accuracy")})"""),
        ("markdown", """## Long-tailed test set: OT inference with the known class prior"""),
        ("code", """from jaxlab.data.digits import load_digits_split
data = load_digits_split(test_fraction=config.data.test_fraction, seed=config.data.split_seed)
idx, prior = digits_pairs.long_tailed_indices(data["y_test"], 10.0, np.random.default_rng(0))
model = TwoTower(vocab_size=len(digits_pairs.build_vocab()) + 1, **dict(config.model))
params = {"params": result.state.params}
vocab = digits_pairs.build_vocab(); prompts = digits_pairs.class_prompt_tokens(vocab)
images = model.apply(params, data["x_test"][idx], method=TwoTower.encode_image)
text = model.apply(params, prompts.reshape(-1, prompts.shape[-1]), method=TwoTower.encode_text)
classes = text.reshape(prompts.shape[0], prompts.shape[1], -1).mean(1)
labels = data["y_test"][idx]
acc = lambda pred: float(np.mean(np.asarray(pred) == labels))
res = {"argmax": acc(ot_clip.zero_shot_predict(images, classes)),
       "OT, uniform prior": acc(ot_clip.ot_zero_shot(images, classes, 0.05)),
       "OT, known prior": acc(ot_clip.ot_zero_shot(images, classes, 0.05, class_prior=prior))}
print(res)
assert res["OT, known prior"] > res["OT, uniform prior"]"""),
    ],
}


def write(name, cells):
  nb = {"cells": [], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                 "name": "python3"}, "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5}
  for i, (kind, src) in enumerate(cells):
    cell = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": src.splitlines(keepends=True)}
    if kind == "code":
      cell.update(execution_count=None, outputs=[])
    nb["cells"].append(cell)
  with open(os.path.join(REPO, "colabs", name), "w") as f:
    json.dump(nb, f, indent=1)


if __name__ == "__main__":
  for name, cells in NOTEBOOKS.items():
    write(name, cells)
