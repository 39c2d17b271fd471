"""Q-networks on vector observations: the MLP torso, per-feature tokens, and what "auto" picks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl import QNetwork, param_count
from jaxlab.rl.networks_tokens import PerFeatureEmbedding

OBS = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)  # [batch, F]: CartPole-like vectors
KEY = jax.random.key(0)


def _net(**kw):
  return QNetwork(**{"num_actions": 2, "mlp_features": (16,), "num_experts": 4, "expert_hidden": 8,
                     "embedding_size": 5, "width": 32, **kw})


@pytest.mark.parametrize("encoder,tokenizer", [("auto", "auto"), ("mlp", "per_feat")])
def test_soft_moe_on_vectors_routes_one_token_per_torso_feature(encoder, tokenizer):
  net = _net(encoder=encoder, tokenizer=tokenizer)
  params = net.init(KEY, OBS)["params"]
  assert params["MLPEncoder_0"]["Dense_0"]["kernel"].shape == (4, 16)
  assert params["embedding"]["kernel"].shape == params["embedding"]["bias"].shape == (16, 5)  # 16 tokens of 5
  assert params["SoftMoE_0"]["router"]["phi"].shape == (5, 4, 4)  # 4 experts x ceil(16 / 4) slots
  assert params["Dense_0"]["kernel"].shape == (16 * 5, 2)  # the flattened tokens -> Q
  q, stats = net.apply({"params": params}, OBS)
  assert q.shape == (3, 2) and bool(jnp.isfinite(q).all())
  assert stats["expert_load"].shape == (4,) and 0 < float(stats["dispatch_entropy"]) <= 1


def test_per_feature_tokens_are_each_scalar_embedded_by_its_own_affine_map():
  h = jnp.array([[0.0, 2.0, -1.0]])
  emb = PerFeatureEmbedding(embedding_size=4)
  p = emb.init(KEY, h)["params"]
  tokens = emb.apply({"params": p}, h)
  assert tokens.shape == (1, 3, 4)
  np.testing.assert_allclose(tokens[0], h[0][:, None] * p["kernel"] + p["bias"], rtol=1e-6)
  assert float(jnp.abs(p["kernel"]).max()) <= 0.5  # U(-1/sqrt(4), 1/sqrt(4))


def test_top1_dense_and_none_heads_take_vectors():
  q, stats = _net(head="top1").apply(_net(head="top1").init(KEY, OBS), OBS)
  assert q.shape == (3, 2) and "load_balancing_loss" in stats
  # the dense head on a 16-unit torso is Dopamine's ClassicControlDQNNetwork layout: F -> 16 -> 32 -> Q
  assert param_count((4,), num_actions=2, head="dense", mlp_features=(16,), width=32) == (
      4 * 16 + 16 + 16 * 32 + 32 + 32 * 2 + 2)
  assert param_count((4,), num_actions=2, head="none", encoder="auto", mlp_features=(16,)) == 4 * 16 + 16 + 16 * 2 + 2


def test_images_keep_the_conv_encoder_under_auto():
  images = jnp.zeros((2, 10, 5, 1))
  params = _net(encoder="auto", tokenizer="auto").init(KEY, images)["params"]
  assert params["MinAtarEncoder_0"]["Conv_0"]["kernel"].shape == (3, 3, 1, 16)
  assert params["SoftMoE_0"]["router"]["phi"].shape[0] == 16  # per-conv tokens: 50 positions of 16 channels


@pytest.mark.parametrize("kw,obs,message", [
    (dict(encoder="minatar"), OBS, "QNetwork.encoder='minatar' needs images [batch, H, W, C]; vector observations "
     "(3, 4) take encoder='mlp' (or 'auto')"),
    (dict(tokenizer="per_conv"), OBS, "QNetwork.tokenizer='per_conv' needs image features; the 'mlp' encoder's "
     "vector features take tokenizer='per_feat' (or 'auto')"),
    (dict(mlp_features=()), OBS, "QNetwork.mlp_features=(); must be a non-empty tuple of ints >= 1"),
    (dict(mlp_features=(8, 0)), OBS, "QNetwork.mlp_features=(8, 0); must be a non-empty tuple of ints >= 1"),
    (dict(), jnp.zeros((3, 0)), "observations have shape (3, 0); need [batch, F] with F >= 1"),
    (dict(), jnp.zeros((3, 4, 5)), "observations have shape (3, 4, 5); need [batch, H, W, C] with H, W, C >= 1 "
     "(images) or [batch, F] (vectors)"),
])
def test_bad_vector_settings_are_one_line(kw, obs, message):
  with pytest.raises(InputError) as e:
    jax.eval_shape(_net(**kw).init, KEY, obs)
  assert message in str(e.value)
