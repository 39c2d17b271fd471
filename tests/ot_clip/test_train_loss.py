"""The two-tower loss through the shared train step, on 8 devices with the batch over "data"."""

import jax
import numpy as np
import optax
import pytest

from jaxlab import train
from jaxlab.data.digits import load_digits_split
from jaxlab.ot_clip import digits_pairs
from jaxlab.ot_clip.train_loss import make_two_tower_loss
from jaxlab.ot_clip.two_tower import TwoTower
from tests.support.tolerances import log_domain_atol


@pytest.mark.parametrize("loss_name, split", [("entropic_ot", False), ("entropic_ot", True), ("unbalanced_ot", True)])
def test_two_tower_trains_through_the_shared_step_on_8_devices(loss_name, split):
  # split: the tasks' form, the coupling split by rows over "data" (make_two_tower_loss(..., mesh=)).
  mesh = train.make_mesh((("data", -1),))
  assert mesh.shape["data"] == 8
  vocab = digits_pairs.build_vocab()
  data = load_digits_split(0.3)
  r = np.random.default_rng(0)
  batch = {"image": data["x_train"][:64], "tokens": digits_pairs.caption_tokens(data["y_train"][:64], vocab, r)}
  model = TwoTower(vocab_size=len(vocab) + 1, hidden=32, embed_dim=16)
  loss_fn = make_two_tower_loss(model, loss_name, mesh=mesh if split else None)
  dense_fn = make_two_tower_loss(model, loss_name)
  opt = optax.adam(3e-3)
  params = model.init(jax.random.key(0), batch["image"][:2], batch["tokens"][:2])["params"]
  state = train.TrainState.create(params, opt, jax.random.key(1))
  state_sharding = train.tree_shardings(state, mesh)
  data_sharding = train.batch_sharding(mesh)
  step = train.make_train_step(loss_fn, opt, state_sharding=state_sharding, batch_sharding=data_sharding)
  state = jax.device_put(state, state_sharding)
  batch = jax.device_put(batch, data_sharding)
  loss0 = float(loss_fn(state.params, batch, None, ())[0])
  for _ in range(4):
    state, metrics = step(state, batch)
  assert np.isfinite(float(metrics["loss"])) and int(metrics["nonfinite_skipped"]) == 0
  assert float(metrics["loss"]) < loss0
  # The sharded step saw the global batch: same loss as the single-device computation.
  host_params = jax.device_get(state.params)
  host_batch = jax.device_get(batch)
  # Two float32 routes to a log-domain loss: exponents up to 2 x the logit scale, from the
  # towers' 64-, 32- and 16-term dots, then 5 Sinkhorn iterations.
  scale = float(np.exp(host_params["log_logit_scale"]))
  np.testing.assert_allclose(dense_fn(host_params, host_batch, None, ())[0],
                             loss_fn(state.params, batch, None, ())[0], rtol=0,
                             atol=2 * log_domain_atol(2 * scale, 64 + 32 + 16 + 2 * 5 + 2))
