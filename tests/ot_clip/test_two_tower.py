"""The two-tower model: normalised embeddings, logit scale init and clamp."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.ot_clip.two_tower import TwoTower
from tests.support.tolerances import ops_rtol


def _init(**kw):
  model = TwoTower(vocab_size=12, hidden=16, embed_dim=8, **kw)
  images, tokens = jnp.ones((3, 64)), jnp.array([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
  return model, model.init(jax.random.key(0), images, tokens)["params"], images, tokens


def test_embeddings_are_unit_norm_and_logit_scale_is_clip_init():
  model, params, images, tokens = _init()
  out = model.apply({"params": params}, images, tokens)
  assert out["image_emb"].shape == out["text_emb"].shape == (3, 8)
  # Normalised, then its norm taken again: two 8-term sums of squares, two square roots, a division.
  np.testing.assert_allclose(jnp.linalg.norm(out["text_emb"], axis=1), 1.0, rtol=ops_rtol(2 * 8 + 4))
  np.testing.assert_allclose(out["logit_scale"], 1 / 0.07, rtol=ops_rtol(4))  # exp(log(1 / 0.07))


def test_logit_scale_is_clamped_at_100():
  model, params, images, tokens = _init(init_log_logit_scale=math.log(1000.0))
  np.testing.assert_allclose(model.apply({"params": params}, images, tokens)["logit_scale"], 100.0,
                             rtol=ops_rtol(4))


def test_padding_does_not_change_the_text_embedding():
  model, params, _, _ = _init()
  enc = lambda t: model.apply({"params": params}, t, method=TwoTower.encode_text)
  # Unit embeddings from sums over 4 vs 2 positions, a 16-wide layer and the 8-term normalisation.
  np.testing.assert_allclose(enc(jnp.array([[1, 2, 0, 0]])), enc(jnp.array([[1, 2]])), atol=ops_rtol(4 + 16 + 8 + 4))


def test_conv_image_tower_and_text_embedding_tower():
  model = TwoTower(hidden=16, embed_dim=8, conv_channels=(4, 8), text_embedding_dim=5)
  images, texts = jnp.ones((3, 12, 12, 3)), jnp.ones((3, 5))
  params = jax.jit(model.init)(jax.random.key(0), images, texts)["params"]  # jitted: one compile, not one per op
  assert params["image_encoder"]["Conv_0"]["kernel"].shape == (3, 3, 3, 4)  # 3x3, RGB -> 4
  assert params["image_encoder"]["Conv_1"]["kernel"].shape == (3, 3, 4, 8)
  assert params["text_encoder"]["Dense_0"]["kernel"].shape == (5, 16)  # an MLP over the text embedding
  out = jax.jit(model.apply)({"params": params}, images, texts)
  assert out["image_emb"].shape == out["text_emb"].shape == (3, 8)
  # Normalised, then its norm taken again: two 8-term sums of squares, two square roots, a division.
  np.testing.assert_allclose(np.linalg.norm(out["image_emb"], axis=1), 1.0, rtol=ops_rtol(2 * 8 + 4))
