# %% [markdown]
# # DPOT: an auto-regressive denoising operator transformer, on CPU
#
# Hao et al., *DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
# Pre-Training* (ICML 2024). DPOT predicts the next frame of a PDE trajectory from the previous
# `t_in` frames; its token mixer is Fourier attention (AFNO); it is pre-trained on a mixture of
# PDE data sets with noise on the inputs. This notebook shows the AFNO block, generates
# Navier-Stokes data locally (nothing is downloaded), pre-trains a small DPOT through jaxlab's
# one train step, and rolls it out auto-regressively.

# %%
# this notebook's jaxlab extras (setup.cfg) and the modules it imports, itself or via jaxlab
EXTRAS = "data,pde,notebooks"
MODULES = ["jaxlab", "matplotlib", "exponax"]
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

# %% [markdown]
# ## The Fourier-attention (AFNO) block
#
# The input frames are cut into p × p patches and embedded as tokens h ∈ R^{X×Y×D} (X, Y: the
# patch grid, D: channels). Instead of self-attention over the X·Y tokens, DPOT mixes them in
# Fourier space (Guibas et al., AFNO, ICLR 2022; DPOT Sec. 3.2). With 𝓕 the orthonormal 2-D real
# FFT over the token grid and z = 𝓕(h):
#
# $$\tilde z_k = W_2\,\sigma\!\left(W_1 z_k + b_1\right) + b_2 \quad \text{for the kept modes } k = (k_x, k_y),\ 0 \le k_x, k_y < m,\qquad \tilde z_k = 0 \ \text{otherwise},$$
#
# $$\mathrm{AFNO}(h) = h + \mathcal F^{-1}(\tilde z).$$
#
# W₁, W₂ are complex and block-diagonal over `n_blocks` groups of channels (one small MLP per
# group, shared by all modes), σ (GELU) acts on real and imaginary parts separately. Mixing all
# tokens costs O(XY log XY) for the FFTs instead of attention's O((XY)²). A DPOT block is
#
# $$h \leftarrow h + \mathrm{MLP}\big(\mathrm{GN}(\mathrm{AFNO}(\mathrm{GN}(h)))\big),$$
#
# with GroupNorm (8 groups). Before the blocks, the `t_in` embedded frames are aggregated in time,
# $h = \sum_t W_t\,(h_t \odot \cos(t\gamma))$ with learned frequencies γ; after them, a transposed
# convolution maps each token back to a p × p patch of the next frame.
#
# Below: one AFNO layer with random weights. Its update AFNO(h) − h lives only on the kept
# corner of the spectrum (here m = 4 of a 16 × 16 token grid; as in the official code, the
# corner of the `rfft2` output, so only k_x ≥ 0 are mixed, and the output being real mirrors the
# k_y = 0 column to k_x < 0).

# %%
import tempfile

import jax, jax.numpy as jnp, numpy as np
import matplotlib.pyplot as plt

from jaxlab.config_files import load_config
from jaxlab.pde import AFNO2D
from jaxlab.pde.data import rollout_eval_data
from jaxlab.tasks.pde_data import channels_of, load_datasets
from jaxlab.tasks.pde_model import build_model
from jaxlab.pde.rollout import rollout
from jaxlab.experiment import train

h = jax.random.normal(jax.random.key(0), (1, 16, 16, 32))          # (batch, X, Y, D) tokens
layer = AFNO2D(width=32, n_blocks=4, modes=4)
out = layer.apply(layer.init(jax.random.key(1), h), h)
update = np.abs(np.fft.rfft2(np.asarray(out - h), axes=(1, 2))).sum(axis=(0, 3))   # |spectrum| per mode, (k_x, k_y)
kept = np.zeros_like(update, bool)
kept[:4, :4] = True
kept[-3:, 0] = True  # a real output: the k_y = 0 column is Hermitian, so k_x = -1..-3 mirror k_x = 1..3
assert update[~kept].max() < 1e-4 * update.max()
fig, ax = plt.subplots(figsize=(3.4, 3.4))
ax.imshow(np.fft.fftshift(update, axes=0), cmap="viridis", origin="lower", extent=(-0.5, 8.5, -8.5, 7.5))
ax.set(xlabel="k_y (half spectrum)", ylabel="k_x", title="|FFT(AFNO(h) - h)|")
plt.show()

# %% [markdown]
# ## Data: forced Navier-Stokes (FNO's ν = 1e-3 set), generated and cached locally
#
# `configs/dpot_pde.py` trains DPOT on vorticity trajectories of FNO's Navier-Stokes problem,
# generated with exponax on first use and cached under `$JAXLAB_DATA_DIR` (default
# `~/.cache/jaxlab`). Full size here: 40 trajectories on 64², 50 frames each (FNO's t = 1..50;
# the stored initial state w0 is not served, as in DPOT's data; ~1 min to generate on a CPU);
# `TINY`: 12 trajectories on 32².

# %%
config = load_config("dpot_pde:tiny" if TINY else "dpot_pde")
if TINY:
  config.data.cache_dir = tempfile.mkdtemp()     # the tests: a throwaway cache
else:
  config.data.sets = ({"family": "ns_fno", "viscosity": 1e-3, "trajectories": 40},)
  config.data.num_test = 8
  config.num_steps, config.log_every, config.eval_every, config.checkpoint_every = 600, 100, 600, 600
datasets = load_datasets(config)
ns = datasets[0]
frames = np.asarray(ns.trajectories[0, ..., 0])                     # (frames, X, Y)
shown = np.linspace(0, len(frames) - 1, 6).astype(int)
fig, axes = plt.subplots(1, len(shown), figsize=(2 * len(shown), 2.2))
for ax, t in zip(axes, shown):
  ax.imshow(frames[t].T, origin="lower", cmap="RdBu_r"); ax.set_title(f"t = {t}", fontsize=9); ax.axis("off")
fig.suptitle(f"{ns.name}: vorticity of training trajectory 0 ({ns.num_train} train / {ns.num_test} test)")
plt.show()

# %% [markdown]
# ## Pre-training through the one train step
#
# The `pde_operator` task feeds windows of `t_in` frames and the next frame, drawn as a pure
# function of (seed, step), to `jaxlab.train.make_train_step`; the loss is DPOT's relative L2
# error with denoising noise on the inputs, x + 5·10⁻⁴ ‖x‖ ε. Evaluation rolls the model out
# on the test trajectories and reports the L2 relative error (L2RE) of the first predicted frame
# and of the whole rollout. On a CPU this takes a couple of minutes at full size (a 233k-parameter
# DPOT, 600 steps of batch 16); the paper's DPOT-Ti has 7.5M parameters and trains for days.

# %%
workdir = tempfile.mkdtemp()
result = train(config, workdir, progress=False)
{k: v for k, v in result.summary.items() if k in ("task", "parameters", "steps", "final_loss", "steps_per_sec")
 or k.startswith("l2re")}

# %% [markdown]
# ## Auto-regressive rollout: prediction vs truth vs error over time
#
# From the first `t_in` true frames of a test trajectory, the model predicts one frame, appends
# it to its input window and repeats. Errors compound along the rollout.

# %%
channels = channels_of(config)
model = build_model(config, channels)
test = rollout_eval_data(datasets, config.t_in, num_channels=channels)[ns.name]
truth = test["y"][:1]
pred = jax.jit(rollout, static_argnums=(0, 3, 4))(model.apply, result.state.params, test["x"][:1],
                                                   truth.shape[3], config.t_out)
pred, truth = np.asarray(pred)[0, ..., 0], truth[0, ..., 0]
steps = truth.shape[-1]
shown = sorted({0, steps // 4, steps // 2, 3 * steps // 4, steps - 1})
lim, err_lim = np.abs(truth).max(), np.abs(pred - truth).max()
fig, axes = plt.subplots(3, len(shown), figsize=(2 * len(shown), 6.2))
for j, t in enumerate(shown):
  for row, (field, cmap, lo, hi) in enumerate([(truth, "RdBu_r", -lim, lim), (pred, "RdBu_r", -lim, lim),
                                               (np.abs(pred - truth), "magma", 0, err_lim)]):
    axes[row, j].imshow(field[..., t].T, origin="lower", cmap=cmap, vmin=lo, vmax=hi)
    axes[row, j].set_xticks([]); axes[row, j].set_yticks([])
  axes[0, j].set_title(f"step {t + 1}", fontsize=9)
for row, label in enumerate(["truth", "DPOT", "|error|"]):
  axes[row, 0].set_ylabel(label)
plt.show()

err = np.sqrt(((pred - truth) ** 2).sum(axis=(0, 1)) / (truth ** 2).sum(axis=(0, 1)))
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(np.arange(1, steps + 1), err, marker=".")
ax.set(xlabel="rollout step", ylabel="relative L2 error of the frame", yscale="log", title="error growth")
plt.show()
print(f"1-step L2RE {err[0]:.4f}; whole rollout (this trajectory) "
      f"{np.linalg.norm(pred - truth) / np.linalg.norm(truth):.4f}")
