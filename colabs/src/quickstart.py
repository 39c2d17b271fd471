# %% [markdown]
# # jaxlab quickstart
#
# Four ICML 2024 methods composing into one sharded train step. This notebook trains a config
# through `jaxlab.train`, then plots its metrics. Nothing is downloaded.

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

# %% [markdown]
# ## Train through the one step
# Digits classification with MoMo (`jaxlab.optim.momo`): the step passes `value=loss`, and MoMo's
# adaptive step size shows up in the metrics as `opt/step_size`. Configs load by name (or path)
# from any working directory; `:tiny` is a few-second variant.

# %%
import tempfile

import matplotlib.pyplot as plt

from jaxlab.config_files import load_config
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train

config = load_config("digits_mlp:tiny" if TINY else "digits_mlp")
config.log_every = max(1, config.num_steps // 20)
workdir = tempfile.mkdtemp()
result = train(config, workdir, progress=False)
{k: result.summary[k] for k in ("task", "optimizer", "steps", "final_loss", "test_accuracy", "steps_per_sec")}

# %% [markdown]
# ## Metrics from `metrics.jsonl`

# %%
rows = [r for r in read_metrics(workdir) if "loss" in r]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3))
steps = [r["step"] for r in rows]
ax0.plot(steps, [r["loss"] for r in rows], marker="o")
ax0.set(xlabel="step", ylabel="train loss", title=result.summary["task"])
ax1.plot(steps, [r["opt/step_size"] for r in rows], marker="o")
ax1.set(xlabel="step", ylabel="MoMo step size", yscale="log")
assert rows[-1]["step"] == config.num_steps
