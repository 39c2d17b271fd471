"""The two-tower tasks' ``loss`` block: ``loss.chunk_size`` checked once against the rows a device holds; the coupling placed by the context."""

import jax
import numpy as np
import pytest

from jaxlab.config_files import load_config
from jaxlab.errors import InputError
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.tasks.clip_config import check_chunk_size, rows_per_device, split_mesh
from tests.support.tolerances import log_domain_atol


def _config(batch_size=64, chunk_size=None, **overrides):
  config = load_config("digits_clip:tiny")
  config.batch_size = batch_size
  config.loss.chunk_size = chunk_size
  for key, value in overrides.items():
    config[key] = value
  return config


def test_the_rows_a_device_holds_follow_the_mesh_the_runs_and_the_micro_batches():
  config = _config(64, grad_accum_steps=2)
  assert rows_per_device(config, task_context(config, jax.devices()[:8])) == (
      4, "batch_size=64 / grad_accum_steps=2 / 8 'data' devices")
  assert split_mesh(task_context(config, jax.devices()[:1])) is None  # one device: nothing to split
  config.runs = {"seeds": 8}  # vmapped runs are what "data" splits: each run's coupling is whole
  ctx = task_context(config, jax.devices()[:8])
  assert split_mesh(ctx) is None and rows_per_device(config, ctx)[0] == 32


def test_a_bad_chunk_size_is_one_line_naming_the_key():
  ctx = task_context(_config(), jax.devices()[:8])
  with pytest.raises(InputError, match=r"^loss.chunk_size=0; must be an int >= 1"):
    check_chunk_size(_config(chunk_size=0), ctx)
  with pytest.raises(InputError, match=r"^loss.chunk_size=3; must divide the 8 rows of the coupling each device holds "
                                       r"\(batch_size=64 / 8 'data' devices\), or be >= them; e.g. 2$"):
    make_task(_config(chunk_size=3), ctx)  # at build, before anything is compiled
  assert check_chunk_size(_config(chunk_size=4), ctx) == 4
  assert check_chunk_size(_config(chunk_size=100), ctx) == 100  # one block


def test_the_task_loss_with_chunk_size_equals_the_whole_coupling_on_8_devices():
  config = _config(64)
  ctx = task_context(config, jax.devices()[:8])
  whole, chunked = make_task(config, ctx), make_task(_config(64, chunk_size=4), ctx)
  params = whole.init_params(jax.random.key(0))
  rows = np.arange(config.batch_size)
  batch = whole.host_batch(0, rows, 0)
  with jax.set_mesh(ctx.mesh):
    batch = jax.device_put(batch, jax.sharding.NamedSharding(ctx.mesh, jax.sharding.PartitionSpec("data")))
    want = jax.jit(whole.loss_fn)(params, batch, None, ())
    got = jax.jit(chunked.loss_fn)(params, batch, None, ())
  # Two float32 routes to one log-domain loss (the logit scale starts at 1 / 0.07): the towers'
  # 64-, 32- and 32-term dots, then 5 Sinkhorn iterations (10 half-steps) and the loss's LSE.
  scale = float(want[1]["logit_scale"])
  np.testing.assert_allclose(got[0], want[0], rtol=0, atol=2 * log_domain_atol(2 * scale, 64 + 32 + 32 + 10 + 2))
  assert float(got[1]["i2t_accuracy"]) == float(want[1]["i2t_accuracy"])
