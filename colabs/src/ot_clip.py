# %% [markdown]
# # OT-CLIP: CLIP's loss as optimal transport, and OT inference
#
# Shi, Fan & Yan (ICML 2024): InfoNCE equals KL(I/n ‖ P) for the one-sided entropic OT plan
# P = softmax(S/ε)/n; two-sided, unbalanced and fused Gromov-Wasserstein plans generalise it, and
# at test time an OT plan between test images and class prompts can impose a known class prior.

# %%
# this notebook's jaxlab extras (setup.cfg) and the modules it imports, itself or via jaxlab
EXTRAS = "data,notebooks"
MODULES = ["jaxlab", "matplotlib", "sklearn"]
# Where jaxlab is installed from on Colab or a fresh machine: EDIT THIS LINE to your copy of the
# repository, any pip source: git+https://<host>/<owner>/jaxlab (git+...@<commit> pins it), a local
# folder or a wheel. On Colab it is also the form field at the right. $JAXLAB_SOURCE, when set,
# wins over this line (colabs/README.md).
JAXLAB_SOURCE = ""  # @param {type:"string"}
# Nothing is installed when every module in MODULES is importable (locally and in the tests this
# does nothing); else jaxlab is installed with the extras this notebook needs. find_spec looks a
# module up without importing it. On a GPU/TPU runtime the preinstalled jax is pinned, so its
# accelerator backend stays. If an extra cannot go beside it (the rl extra's gymnax 1.0.1 declares
# jax<0.12), the extras go in with the jax they allow and the runtime's jax is put back after them.
# SystemExit: IPython shows its message alone, with no traceback, and the cell fails, so "run all"
# stops there.
import importlib.util, os, subprocess, sys
missing = [m for m in MODULES if importlib.util.find_spec(m) is None]
if missing:
  source = os.environ.get("JAXLAB_SOURCE", "").strip() or JAXLAB_SOURCE.strip()
  if not source:
    raise SystemExit(
        f"jaxlab install: {', '.join(missing)} not importable and JAXLAB_SOURCE is not set: set it "
        f"(this cell's form field or first line, or the environment variable) to your copy of jaxlab, "
        f"e.g. \"git+https://github.com/<you>/jaxlab\", a local folder or a .whl (jaxlab installs "
        f"from a checkout today; `pip install 'jaxlab[{EXTRAS}]'` from a package index works once it "
        f"is published there)")
  if "://" not in source and not os.path.exists(source):
    raise SystemExit(f"jaxlab install: JAXLAB_SOURCE = {source!r} is neither a URL "
                     f"(git+https://...) nor an existing folder or .whl")
  package = f"{source}[{EXTRAS}]" if os.path.exists(source) else f"jaxlab[{EXTRAS}] @ {source}"
  pins = []
  if importlib.util.find_spec("jax") is not None:
    from importlib.metadata import version
    pins = [f"jax=={version('jax')}"]
  print(f"jaxlab install: {', '.join(missing)} not importable; pip install {package} {' '.join(pins)}")
  pinned = subprocess.run([sys.executable, "-m", "pip", "install", "-q", package, *pins],
                          capture_output=True, text=True)
  if pinned.returncode != 0 and not pins:
    raise SystemExit(f"jaxlab install: pip install {package} failed:\n{pinned.stderr}")
  if pinned.returncode != 0:
    print(f"jaxlab install: pip cannot keep {pins[0]} with these extras (one caps jax, as gymnax 1.0.1 "
          f"declares jax<0.12); pip install {package}, then pip install {' '.join(pins)} again")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *pins], check=True)
  importlib.invalidate_caches()  # the modules pip just wrote are found by the next cells
import jax
print(jax.devices())

# %% tags=["parameters"]
TINY = False  # the tests set True: every cell runs in seconds

# %%
import tempfile

import jax, jax.numpy as jnp, numpy as np

from jaxlab import ot_clip
from jaxlab.config_files import load_config
from jaxlab.data.digits import load_digits_split
from jaxlab.ot_clip import digits_pairs
from jaxlab.ot_clip.two_tower import TwoTower
from jaxlab.experiment import train

# %% [markdown]
# ## InfoNCE is one-sided entropic OT

# %%
x = jax.random.normal(jax.random.key(0), (16, 8)); y = x + 0.5 * jax.random.normal(jax.random.key(1), (16, 8))
scale = 1 / 0.07
print(ot_clip.clip_loss(x, y, scale), ot_clip.one_sided_ot_loss(x, y, scale))
np.testing.assert_allclose(ot_clip.clip_loss(x, y, scale), ot_clip.one_sided_ot_loss(x, y, scale), rtol=1e-5)

# %% [markdown]
# ## Train a two-tower model with the entropic-OT loss through the one step
# Digit images and generated captions; zero-shot prompts come from held-out templates.

# %%
config = load_config("digits_clip:tiny")
config.num_steps = 40 if TINY else 300
workdir = tempfile.mkdtemp()
result = train(config, workdir, progress=False)
{k: result.summary[k] for k in ("final_loss", "zero_shot_accuracy", "ot_zero_shot_accuracy")}

# %% [markdown]
# ## Learning curves
# The training loss (the entropic-OT loss of each batch) and the test accuracies the trainer logged
# in `metrics.jsonl`: zero-shot by argmax and by an OT plan with a uniform class prior.

# %%
import matplotlib.pyplot as plt
from jaxlab.train.metrics_writer import read_metrics

rows = read_metrics(workdir)
train_rows = [r for r in rows if "loss" in r]
eval_rows = [r for r in rows if "zero_shot_accuracy" in r]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
axes[0].plot([r["step"] for r in train_rows], [r["loss"] for r in train_rows])
axes[0].set(xlabel="step", ylabel="training loss", title="entropic-OT loss")
for key, name in (("zero_shot_accuracy", "argmax"), ("ot_zero_shot_accuracy", "OT, uniform prior")):
  axes[1].plot([r["step"] for r in eval_rows], [r[key] for r in eval_rows], marker="o", label=name)
axes[1].set(xlabel="step", ylabel="test accuracy", title="zero-shot on held-out prompts"); axes[1].legend()
plt.tight_layout(); plt.show()

# %% [markdown]
# ## Long-tailed test set: OT inference with the known class prior

# %%
data = load_digits_split(test_fraction=config.data.test_fraction, seed=config.data.split_seed)
idx, prior = digits_pairs.long_tailed_indices(data["y_test"], 10.0, np.random.default_rng(0))
vocab = digits_pairs.build_vocab(); prompts = digits_pairs.class_prompt_tokens(vocab)
model = TwoTower(vocab_size=len(vocab) + 1, **dict(config.model))
params = {"params": result.state.params}
images = model.apply(params, data["x_test"][idx], method=TwoTower.encode_image)
text = model.apply(params, prompts.reshape(-1, prompts.shape[-1]), method=TwoTower.encode_text)
classes = text.reshape(prompts.shape[0], prompts.shape[1], -1).mean(1)
labels = data["y_test"][idx]
acc = lambda pred: float(np.mean(np.asarray(pred) == labels))
res = {"argmax": acc(ot_clip.zero_shot_predict(images, classes)),
       "OT, uniform prior": acc(ot_clip.ot_zero_shot(images, classes, epsilon=0.05)),
       "OT, known prior": acc(ot_clip.ot_zero_shot(images, classes, epsilon=0.05, class_prior=prior))}
print(res)
assert res["OT, known prior"] > res["OT, uniform prior"]

# %% [markdown]
# ## The transport plan of a batch
# Two test images per digit against the prompt embedding of their own class. InfoNCE's plan is
# one-sided (each row is a softmax: only the image marginal is fixed); the two-sided entropic plan
# (Sinkhorn) also fixes the text marginal, so no prompt can take more than its share. Both are
# scaled by n; each digit's prompt appears twice, so a perfect matching puts 1/2 in each cell of
# the 2 x 2 blocks on the diagonal.

# %%
from jaxlab.ot_clip import plans as ot_plans

all_images = model.apply(params, data["x_test"], method=TwoTower.encode_image)
pick = np.concatenate([np.flatnonzero(data["y_test"] == k)[:2] for k in range(10)])
cost = 1.0 - all_images[pick] @ classes[data["y_test"][pick]].T
n = len(pick)
plans = {"one-sided (InfoNCE)": jnp.exp(ot_plans.one_sided_log_plan(cost, 0.05)) * n,
         "two-sided (Sinkhorn)": jnp.exp(ot_plans.sinkhorn_log_plan(cost, 0.05, num_iterations=50)) * n}
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, (name, plan) in zip(axes, plans.items()):
  im = ax.imshow(np.asarray(plan), cmap="viridis", vmin=0, vmax=0.5)
  ax.set(title=name, xlabel="prompt of image j's class")
axes[0].set_ylabel("test image i (2 per digit)")
fig.colorbar(im, ax=axes, shrink=0.8); plt.show()

# %% [markdown]
# ## Accuracy as the test set becomes long-tailed
# Class k keeps a share imbalance^(-k/9) of the images. Argmax ignores the prior; OT inference with
# a uniform prior forces a balanced assignment (worse as the tail grows); OT with the known prior
# puts the right mass on each class.

# %%
imbalances = [1, 2, 5, 10, 20, 50]
curves = {name: [] for name in res}
for r in imbalances:
  idx_r, prior_r = digits_pairs.long_tailed_indices(data["y_test"], float(r), np.random.default_rng(0))
  emb, lab = all_images[idx_r], data["y_test"][idx_r]
  acc_r = lambda pred: float(np.mean(np.asarray(pred) == lab))
  curves["argmax"].append(acc_r(ot_clip.zero_shot_predict(emb, classes)))
  curves["OT, uniform prior"].append(acc_r(ot_clip.ot_zero_shot(emb, classes, epsilon=0.05)))
  curves["OT, known prior"].append(acc_r(ot_clip.ot_zero_shot(emb, classes, epsilon=0.05, class_prior=prior_r)))
for name, values in curves.items():
  plt.plot(imbalances, values, marker="o", label=name)
plt.xscale("log"); plt.xlabel("imbalance (largest / smallest class)"); plt.ylabel("test accuracy"); plt.legend()
plt.title("zero-shot accuracy vs class prior"); plt.show()
