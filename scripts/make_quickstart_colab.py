"""Writes colabs/quickstart.ipynb from the cells below: python scripts/make_quickstart_colab.py colabs/quickstart.ipynb"""
import json, sys
cells = [
("markdown", """# jaxlab quickstart

Four ICML 2024 methods composing into one sharded train step. This notebook trains the quickstart
config through `jaxlab.train`, then plots its metrics. On Colab, first install jaxlab from a
checkout of the repository (`pip install -e .`); the cells below need no downloads."""),
("code", """# On Colab: !pip install -q -e /content/jaxlab
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
("code", """import tempfile
config = digits_mlp.get_config("tiny")
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
]
nb = {"cells": [], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
      "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
for i, (kind, src) in enumerate(cells):
  c = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": src.splitlines(keepends=True)}
  if kind == "code":
    c.update(execution_count=None, outputs=[])
  nb["cells"].append(c)
json.dump(nb, open(sys.argv[1], "w"), indent=1)
