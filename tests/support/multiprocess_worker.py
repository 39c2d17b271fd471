"""One process of a 2-process CPU "cluster" (run by test_multiprocess.py, not by pytest directly)."""

import os
import sys

process_id, port, workdir, out, mesh = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4 "
                           "--xla_cpu_collective_call_terminate_timeout_seconds=900").strip()  # the suite's flags kept
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=process_id)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from configs import digits_mlp  # noqa: E402
from jaxlab.experiment import train  # noqa: E402

config = digits_mlp.get_config("tiny")
config.batch_size = 64
# "data_outer": each process holds half the batch rows; "model_outer": the "data" axis lies inside
# each process, so every process holds every row (for its model shard).
config.mesh = (("data", 4), ("model", 2)) if mesh == "data_outer" else (("model", 2), ("data", 4))
result = train(config, workdir, progress=False)
assert jax.process_count() == 2 and jax.device_count() == 8
params = jax.tree.map(lambda x: np.asarray(jax.experimental.multihost_utils.process_allgather(x, tiled=True)),
                      result.state.params)
if process_id == 0:
  np.savez(out, **{jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(params)})
