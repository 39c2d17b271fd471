# %% [markdown]
# # jaxlab quickstart
#
# Four ICML 2024 methods composing into one sharded train step. This notebook trains a config
# through `jaxlab.train`, then plots its metrics. Nothing is downloaded.

# %%
EXTRAS = "data,notebooks"
# Where jaxlab is installed from on Colab or a fresh machine: EDIT THIS LINE to your copy of the
# repository (a pip source: git+https://<host>/<owner>/jaxlab, git+...@<commit>, or a local folder).
# The default is a placeholder (colabs/README.md); $JAXLAB_SOURCE, when set, wins over this line.
JAXLAB_SOURCE = "git+https://github.com/jaxlab/jaxlab"
# jaxlab is installed, with the extras this notebook needs, only when it is not importable (locally
# and in the tests this does nothing). On a GPU/TPU runtime the preinstalled jax is pinned, so its
# accelerator backend stays.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("jaxlab") is None:
  source = os.environ.get("JAXLAB_SOURCE", JAXLAB_SOURCE)
  package = f"{source}[{EXTRAS}]" if os.path.isdir(source) else f"jaxlab[{EXTRAS}] @ {source}"
  pins = []
  if importlib.util.find_spec("jax") is not None:
    from importlib.metadata import version
    pins = [f"jax=={version('jax')}"]
  subprocess.run([sys.executable, "-m", "pip", "install", "-q", package, *pins], check=True)
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
from jaxlab.train.trainer import train

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
