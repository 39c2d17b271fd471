# %% [markdown]
# # MoMo: learning-rate robustness in a few lines
#
# `jaxlab.optim.momo` is an optax transform that also takes the loss (`value=loss`). Its step is
# the momentum step capped by a Polyak-type model step (Schaipp et al., ICML 2024), so very large
# learning rates stop hurting. Here: SGD-M vs MoMo on scikit-learn's digits over 5 decades of
# learning rate, all runs vmapped through the shared train step (the full study is
# `benchmarks/momo_lr_sweep.py`).

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
import jax, jax.numpy as jnp, numpy as np, optax
import matplotlib.pyplot as plt

from jaxlab.data.digits import load_digits_split
from jaxlab.models.mlp import MLP
from jaxlab.optim import OPTIMIZERS, set_hyperparams
from jaxlab.train import TrainState, make_train_step

data = load_digits_split()
model = MLP(hidden=(64,))
x, y = jnp.asarray(data["x_train"]), jnp.asarray(data["y_train"])

def loss_fn(params, batch, rng, extra):  # full-batch loss
  logits = model.apply({"params": params}, x)
  return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), {}

def sweep(name, lrs, steps):
  """One run per learning rate, vmapped through the shared step (the rate lives in the state)."""
  opt = optax.inject_hyperparams(OPTIMIZERS.get(name))(learning_rate=1.0)
  def init(lr):
    state = TrainState.create(model.init(jax.random.key(0), x[:1])["params"], opt, jax.random.key(0))
    return state.replace(opt_state=set_hyperparams(state.opt_state, {"learning_rate": lr}))
  state = jax.jit(jax.vmap(init))(jnp.asarray(lrs))
  step = make_train_step(loss_fn, opt, vmap_runs=True, steps_per_call=steps, skip_nonfinite=False)
  state, _ = step(state, {"unused": jnp.zeros((steps, len(lrs), 1))})
  logits = jax.vmap(lambda p: model.apply({"params": p}, data["x_test"]))(state.params)
  return np.asarray((logits.argmax(-1) == data["y_test"]).mean(-1))


# %%
lrs = [1e-1, 1e0, 1e1, 1e2, 1e3]
steps = 30 if TINY else 150
acc = {"SGD-M": sweep("sgdm", lrs, steps), "MoMo": sweep("momo", lrs, steps)}
fig, ax = plt.subplots(figsize=(5, 3))
for name, a in acc.items():
  ax.plot(lrs, a, marker="o", label=name)
ax.set(xscale="log", xlabel="learning rate", ylabel="test accuracy"); ax.legend()
print({k: np.round(v, 3).tolist() for k, v in acc.items()})
assert acc["SGD-M"][-1] < 0.5                      # SGD-M diverges at lr = 1000
assert TINY or min(acc["MoMo"][1:]) > 0.9          # MoMo stays good at every lr >= 1

# %% [markdown]
# MoMo-Adam (`momo_adam`) does the same for Adam; `adapt_lower_bound=True` (MoMo*) estimates
# the loss's lower bound online when 0 is far from the optimum.
