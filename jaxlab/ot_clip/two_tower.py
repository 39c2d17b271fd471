"""A small two-tower (CLIP-style) model: image MLP, bag-of-tokens text encoder, learned logit scale."""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.ot_clip.similarity import l2_normalize

PAD_ID = 0
LOG_INIT_SCALE_CLIP = math.log(1 / 0.07)  # Radford et al. 2021, Sec. 2.5
LOG_MAX_SCALE = math.log(100.0)           # open_clip clamps the log scale to [0, ln 100]


class ImageEncoder(nn.Module):
  """Flattened pixels -> MLP -> embedding."""
  hidden: int = 128
  embed_dim: int = 32

  @nn.compact
  def __call__(self, images: jax.Array) -> jax.Array:
    h = images.reshape(images.shape[0], -1)
    h = nn.gelu(nn.Dense(self.hidden)(h))
    h = nn.gelu(nn.Dense(self.hidden)(h))
    return nn.Dense(self.embed_dim)(h)


class TextEncoder(nn.Module):
  """Token ids [B, L] (0 = padding) -> embedding table -> masked mean pool -> MLP."""
  vocab_size: int
  hidden: int = 128
  embed_dim: int = 32

  @nn.compact
  def __call__(self, tokens: jax.Array) -> jax.Array:
    mask = (tokens != PAD_ID).astype(jnp.float32)[..., None]
    e = nn.Embed(self.vocab_size, self.hidden)(tokens)
    h = jnp.sum(e * mask, axis=-2) / jnp.maximum(jnp.sum(mask, axis=-2), 1.0)
    h = nn.gelu(nn.Dense(self.hidden)(h))
    return nn.Dense(self.embed_dim)(h)


class TwoTower(nn.Module):
  """Returns L2-normalised image/text embeddings, the logit scale and the (SigLIP) logit bias.

  The scale is exp(log_scale) with log_scale clamped at ln 100 in the forward pass. open_clip
  clamps the parameter after each optimiser step instead; both give the same forward values,
  and here the gradient is zero while the clamp is active.
  """
  vocab_size: int
  hidden: int = 128
  embed_dim: int = 32
  init_log_logit_scale: float = LOG_INIT_SCALE_CLIP
  init_logit_bias: float = 0.0

  def setup(self):
    self.image_encoder = ImageEncoder(self.hidden, self.embed_dim)
    self.text_encoder = TextEncoder(self.vocab_size, self.hidden, self.embed_dim)
    self.log_logit_scale = self.param(
        "log_logit_scale", lambda _: jnp.asarray(self.init_log_logit_scale, jnp.float32))
    self.logit_bias = self.param("logit_bias", lambda _: jnp.asarray(self.init_logit_bias, jnp.float32))

  def encode_image(self, images: jax.Array) -> jax.Array:
    return l2_normalize(self.image_encoder(images))

  def encode_text(self, tokens: jax.Array) -> jax.Array:
    return l2_normalize(self.text_encoder(tokens))

  def logit_scale(self) -> jax.Array:
    return jnp.exp(jnp.minimum(self.log_logit_scale, LOG_MAX_SCALE))

  def __call__(self, images: jax.Array, tokens: jax.Array) -> dict[str, jax.Array]:
    return {"image_emb": self.encode_image(images), "text_emb": self.encode_text(tokens),
            "logit_scale": self.logit_scale(), "logit_bias": self.logit_bias}
