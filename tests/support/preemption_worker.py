"""Trains digits_mlp in a workdir and saves the final params (run by test_preemption.py)."""

import json
import os
import sys

workdir, out = sys.argv[1], sys.argv[2]
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from configs import digits_mlp  # noqa: E402
from jaxlab.experiment import train  # noqa: E402

config = digits_mlp.get_config("tiny")
config.num_steps, config.log_every, config.checkpoint_every, config.eval_every = 1500, 10, 1000, 1000
result = train(config, workdir, progress=False)
np.savez(out, **{jax.tree_util.keystr(k): np.asarray(v)
                 for k, v in jax.tree_util.tree_leaves_with_path(result.state.params)})
print(json.dumps({"steps": result.summary["steps"], "stopped": result.summary.get("stopped", "")}))
