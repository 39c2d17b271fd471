"""A small two-tower (CLIP-style) model: image MLP or conv net, text encoder, learned logit scale.

The text tower reads token ids (bag of tokens) or, for precomputed paired embeddings, a float
text embedding (an MLP); the image tower reads flattened pixels or embeddings (an MLP) or images
[B, H, W, C] (a small conv net).
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check_finite, check_int, check_scalar, is_traced
from jaxlab.ot_clip.similarity import l2_normalize

PAD_ID = 0
LOG_INIT_SCALE_CLIP = math.log(1 / 0.07)  # Radford et al. 2021, Sec. 2.5
LOG_MAX_SCALE = math.log(100.0)           # open_clip clamps the log scale to [0, ln 100]


def _check_widths(module: nn.Module, names: tuple[str, ...]) -> None:
  for name in names:
    check_int(getattr(module, name), f"{type(module).__name__}.{name}", 1, got=True)


def masked_mean(embedded: jax.Array, tokens: jax.Array) -> jax.Array:
  """Mean of the token embeddings [B, L, H] over the non-padding ids (``tokens != 0``) -> [B, H].

  In the embeddings' dtype (bfloat16 params stay bfloat16); an all-padding row gives zeros.
  """
  mask = (tokens != PAD_ID).astype(embedded.dtype)[..., None]
  return jnp.sum(embedded * mask, axis=-2) / jnp.maximum(jnp.sum(mask, axis=-2), 1.0)


def clamped_logit_scale(log_logit_scale: jax.Array) -> jax.Array:
  """``exp(min(log_scale, ln 100))`` in float32: the learned temperature, clamped as open_clip's."""
  return jnp.exp(jnp.minimum(log_logit_scale.astype(jnp.float32), LOG_MAX_SCALE))


def check_pair(images: jax.Array, texts: jax.Array) -> None:
  """InputError unless images [B, ...] and texts [B, L] have the same batch size."""
  ishape, tshape = tuple(np.shape(images)), tuple(np.shape(texts))
  if len(ishape) < 2 or len(tshape) != 2 or ishape[0] != tshape[0]:
    raise InputError(f"images {ishape} and tokens {tshape} must be [B, ...] and [B, L] with the same batch size B")


def check_text_embeddings(texts: jax.Array, text_embedding_dim: int) -> None:
  """InputError unless ``texts`` are float text embeddings [B, text_embedding_dim]."""
  shape = tuple(np.shape(texts))
  if len(shape) != 2 or shape[0] < 1 or shape[1] != text_embedding_dim:
    raise InputError(f"text embeddings must be [batch, {text_embedding_dim}] (text_embedding_dim), "
                     f"got shape {shape}")
  dtype = jnp.result_type(texts)
  if not jnp.issubdtype(dtype, jnp.floating):
    raise InputError(f"text embeddings must have a floating dtype, got {dtype}")


def check_tokens(tokens: jax.Array, vocab_size: int) -> None:
  """InputError unless ``tokens`` are integer ids [B, L] and, when concrete, each in [0, vocab_size)."""
  shape = tuple(np.shape(tokens))
  if len(shape) != 2 or min(shape) < 1:
    raise InputError(f"tokens must be a non-empty 2-D [batch, length] array of ids, got shape {shape}")
  dtype = jnp.result_type(tokens)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise InputError(f"tokens must be integer ids, got dtype {dtype}")
  if not is_traced(tokens):
    ids = np.asarray(tokens)
    if ids.min() < 0 or ids.max() >= vocab_size:
      bad = ids[(ids < 0) | (ids >= vocab_size)].ravel()[0]
      raise InputError(f"token id {int(bad)} is outside [0, vocab_size={vocab_size})")


class ImageEncoder(nn.Module):
  """Flattened pixels -> MLP -> embedding."""
  hidden: int = 128
  embed_dim: int = 32

  def __post_init__(self) -> None:
    _check_widths(self, ("hidden", "embed_dim"))
    super().__post_init__()

  @nn.compact
  def __call__(self, images: jax.Array) -> jax.Array:
    h = images.reshape(images.shape[0], -1)
    h = nn.gelu(nn.Dense(self.hidden)(h))
    h = nn.gelu(nn.Dense(self.hidden)(h))
    return nn.Dense(self.embed_dim)(h)


class ConvImageEncoder(nn.Module):
  """Images [B, H, W, C] -> strided 3x3 convolutions (GELU) -> global mean pool -> MLP -> embedding.

  Each entry of ``channels`` is one convolution of stride 2, so the resolution halves per layer.
  """
  channels: tuple[int, ...] = (32, 64)
  hidden: int = 128
  embed_dim: int = 32

  def __post_init__(self) -> None:
    _check_widths(self, ("hidden", "embed_dim"))
    if not isinstance(self.channels, (tuple, list)) or not self.channels:
      raise InputError(f"ConvImageEncoder.channels={self.channels!r}; must be a non-empty tuple of ints >= 1")
    for c in self.channels:
      check_int(c, "ConvImageEncoder.channels[i]", 1, got=True)
    super().__post_init__()

  @nn.compact
  def __call__(self, images: jax.Array) -> jax.Array:
    if images.ndim != 4:
      raise InputError(f"ConvImageEncoder needs images [batch, height, width, channels], got shape {tuple(images.shape)}")
    h = images
    for width in self.channels:
      h = nn.gelu(nn.Conv(int(width), (3, 3), strides=(2, 2))(h))
    h = jnp.mean(h, axis=(1, 2))
    h = nn.gelu(nn.Dense(self.hidden)(h))
    return nn.Dense(self.embed_dim)(h)


class TextEncoder(nn.Module):
  """Token ids [B, L] (0 = padding) -> embedding table -> masked mean pool -> MLP."""
  vocab_size: int
  hidden: int = 128
  embed_dim: int = 32

  def __post_init__(self) -> None:
    check_int(self.vocab_size, f"{type(self).__name__}.vocab_size", 2, got=True)  # id 0 is padding
    _check_widths(self, ("hidden", "embed_dim"))
    super().__post_init__()

  @nn.compact
  def __call__(self, tokens: jax.Array) -> jax.Array:
    h = masked_mean(nn.Embed(self.vocab_size, self.hidden)(tokens), tokens)
    h = nn.gelu(nn.Dense(self.hidden)(h))
    return nn.Dense(self.embed_dim)(h)


class TwoTower(nn.Module):
  """Returns L2-normalised image/text embeddings, the logit scale and the (SigLIP) logit bias.

  The towers compute in their params' dtype (bfloat16 under a bfloat16 compute dtype); the
  embeddings are normalised in float32 and returned as float32, as the OT-CLIP losses compare
  them in float32 anyway (``jaxlab.ot_clip.checks.compute_dtype``).

  The scale is exp(log_scale) with log_scale clamped at ln 100 in the forward pass. open_clip
  clamps the parameter after each optimiser step instead; both give the same forward values,
  and here the gradient is zero while the clamp is active.

  Towers: the image tower is an MLP over flattened inputs (``conv_channels=()``) or a
  :class:`~jaxlab.ot_clip.two_tower.ConvImageEncoder` over images [B, H, W, C]; the text tower reads token ids
  (``text_embedding_dim=0``; ``vocab_size`` >= 2, id 0 is padding) or precomputed float text
  embeddings [B, text_embedding_dim] (an MLP; ``vocab_size`` is then 0, unused).

  Construction checks the sizes (integers >= 1) and that the initial log scale and bias are
  finite. A call checks that images [B, ...] and texts [B, L] have the same batch size, and,
  for token ids, that they are integers and (when concrete) every id is in [0, vocab_size)
  (inside jit an out-of-range id cannot be seen: flax's Embed then gives NaN).
  """
  vocab_size: int = 0
  hidden: int = 128
  embed_dim: int = 32
  init_log_logit_scale: float = LOG_INIT_SCALE_CLIP
  init_logit_bias: float = 0.0
  conv_channels: tuple[int, ...] = ()
  text_embedding_dim: int = 0

  def __post_init__(self) -> None:
    check_int(self.text_embedding_dim, "TwoTower.text_embedding_dim", 0, got=True)
    if self.text_embedding_dim:
      if self.vocab_size != 0:
        raise InputError(f"TwoTower.vocab_size={self.vocab_size!r} with text_embedding_dim="
                         f"{self.text_embedding_dim}: text embeddings take no vocabulary; allowed: vocab_size=0")
    else:
      check_int(self.vocab_size, "TwoTower.vocab_size", 2, got=True)
    check_int(self.hidden, "TwoTower.hidden", 1, got=True)
    check_int(self.embed_dim, "TwoTower.embed_dim", 1, got=True)
    check_scalar(self.init_log_logit_scale, "TwoTower.init_log_logit_scale")
    check_finite(self.init_log_logit_scale, "TwoTower.init_log_logit_scale", got=True)
    check_scalar(self.init_logit_bias, "TwoTower.init_logit_bias")
    check_finite(self.init_logit_bias, "TwoTower.init_logit_bias", got=True)
    super().__post_init__()

  def setup(self):
    if self.conv_channels:
      self.image_encoder = ConvImageEncoder(tuple(self.conv_channels), self.hidden, self.embed_dim)
    else:
      self.image_encoder = ImageEncoder(self.hidden, self.embed_dim)
    if self.text_embedding_dim:
      self.text_encoder = ImageEncoder(self.hidden, self.embed_dim)  # the same MLP, over a text embedding
    else:
      self.text_encoder = TextEncoder(self.vocab_size, self.hidden, self.embed_dim)
    self.log_logit_scale = self.param(
        "log_logit_scale", lambda _: jnp.asarray(self.init_log_logit_scale, jnp.float32))
    self.logit_bias = self.param("logit_bias", lambda _: jnp.asarray(self.init_logit_bias, jnp.float32))

  def encode_image(self, images: jax.Array) -> jax.Array:
    return l2_normalize(self.image_encoder(images).astype(jnp.float32))

  def encode_text(self, texts: jax.Array) -> jax.Array:
    """Token ids [B, L], or text embeddings [B, text_embedding_dim] -> unit embeddings [B, embed_dim]."""
    if self.text_embedding_dim:
      check_text_embeddings(texts, self.text_embedding_dim)
    else:
      check_tokens(texts, self.vocab_size)
    return l2_normalize(self.text_encoder(texts).astype(jnp.float32))

  def logit_scale(self) -> jax.Array:
    return clamped_logit_scale(self.log_logit_scale)

  def __call__(self, images: jax.Array, texts: jax.Array) -> dict[str, jax.Array]:
    check_pair(images, texts)
    return {"image_emb": self.encode_image(images), "text_emb": self.encode_text(texts),
            "logit_scale": self.logit_scale(), "logit_bias": self.logit_bias}
