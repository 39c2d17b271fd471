"""The NNX two-tower model against the linen one: parameter tree, outputs, training on the CLIP loss.

Run op by op, both call the same functions on the same arrays: bit-equal by construction
(tests/support/nnx_training.py).
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from jaxlab.errors import InputError
from jaxlab.ot_clip import TwoTower, clip_loss
from jaxlab.ot_clip import nnx as ot_nnx
from tests.support.nnx_training import linen_params, load, train_both

IMAGES = (4, 4, 2)


def _batch(n=4):
  images = jax.random.normal(jax.random.key(0), (n, *IMAGES))
  tokens = jax.random.randint(jax.random.key(1), (n, 5), 0, 12)
  return images, tokens


@pytest.mark.parametrize("settings", [
    dict(vocab_size=12, hidden=16, embed_dim=8),
    dict(vocab_size=12, hidden=16, embed_dim=8, conv_channels=(4, 8), init_logit_bias=-2.0),
    dict(hidden=16, embed_dim=8, text_embedding_dim=6, init_log_logit_scale=5.0),
])
def test_nnx_two_tower_equals_linen(settings):
  images, texts = _batch()
  if settings.get("text_embedding_dim"):
    texts = jax.random.normal(jax.random.key(2), (4, 6))
  linen = TwoTower(**settings)
  variables = {"params": linen_params(linen, images, texts)}
  model = load(lambda: ot_nnx.TwoTower(IMAGES, **settings, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(images, texts), linen.apply(variables, images, texts))
  chex.assert_trees_all_equal_shapes_and_dtypes(ot_nnx.TwoTower(IMAGES, **settings, rngs=nnx.Rngs(0)).linen_params(),
                                                variables["params"])


def test_nnx_two_tower_trains_on_the_clip_loss_with_momo_adam_as_linen():
  images, tokens = _batch()
  settings = dict(vocab_size=12, hidden=16, embed_dim=8)
  linen = TwoTower(**settings)
  params = linen_params(linen, images, tokens)
  model = load(lambda: ot_nnx.TwoTower(IMAGES, **settings, rngs=nnx.Rngs(0)), params)
  loss = lambda out: clip_loss(out["image_emb"], out["text_emb"], out["logit_scale"])
  # per step and parameter: the towers' dots (32 + 16 + 16 inputs; 5 tokens + 16 + 16), the 8-term
  # normalisation and similarities, the 4-term log-sum-exp, the backward about as long, the optimizer
  train_both(lambda p, i, t: linen.apply({"params": p}, i, t), params, model, loss, (images, tokens),
             ops_per_step=200, steps=3, learning_rate=0.01)


def test_every_linen_setting_has_an_nnx_counterpart():
  fields = {f.name for f in dataclasses.fields(TwoTower)} - {"parent", "name"}
  assert fields == set(ot_nnx.TWO_TOWER_SETTINGS)


def test_bad_nnx_input_is_one_line():
  model = ot_nnx.TwoTower(IMAGES, vocab_size=12, hidden=16, embed_dim=8, rngs=nnx.Rngs(0))
  images, tokens = _batch()
  with pytest.raises(InputError, match="token id 12 is outside \\[0, vocab_size=12\\)"):
    model(images, tokens.at[0, 0].set(12))
  with pytest.raises(InputError, match="same batch size"):
    model(images[:3], tokens)
  with pytest.raises(InputError, match="TwoTower.vocab_size must be an integer >= 2, got 1"):
    ot_nnx.TwoTower(IMAGES, vocab_size=1, rngs=nnx.Rngs(0))
  with pytest.raises(InputError, match="the conv tower"):
    ot_nnx.TwoTower((16,), vocab_size=12, conv_channels=(4,), rngs=nnx.Rngs(0))
