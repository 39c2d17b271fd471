"""A Flax NNX two-tower (CLIP-style) model and its towers, computing what the linen ones compute.

:class:`TwoTower` is the NNX twin of :class:`jaxlab.ot_clip.TwoTower`: the same towers (flax's
``nnx.Linear`` / ``nnx.Conv`` / ``nnx.Embed`` for linen's ``nn.Dense`` / ``nn.Conv`` / ``nn.Embed``)
and the same functions around them (``jaxlab.ot_clip.two_tower.masked_mean``,
``clamped_logit_scale``, the input checks, :func:`jaxlab.ot_clip.similarity.l2_normalize`), on
parameters in the linen model's layout (:mod:`jaxlab.nnx_params`: ``image_encoder/Dense_0``,
``text_encoder/Embed_0``, ``log_logit_scale``, ``logit_bias``). Its output dict feeds the
OT-CLIP losses as the linen model's does.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from jaxlab.errors import InputError
from jaxlab.nnx_params import LinenLayout, linen_config
from jaxlab.ot_clip import two_tower as linen_tt
from jaxlab.ot_clip.similarity import l2_normalize

__all__ = ["ConvImageEncoder", "ImageEncoder", "TextEncoder", "TwoTower"]

Array = jax.Array


class ImageEncoder(LinenLayout):
  """The NNX twin of :class:`jaxlab.ot_clip.two_tower.ImageEncoder`: flattened inputs -> an MLP (GELU) -> embedding.

  Args:
    in_features: the size of one flattened input.
    hidden: width of the two hidden layers.
    embed_dim: output width.
    rngs: the ``params`` stream initialises ``Dense_0`` ... ``Dense_2``.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.ot_clip.nnx import ImageEncoder
    >>> ImageEncoder(64, hidden=32, embed_dim=8, rngs=nnx.Rngs(0))(jnp.ones((2, 8, 8))).shape
    (2, 8)
  """

  def __init__(self, in_features: int, hidden: int = 128, embed_dim: int = 32, *, rngs: nnx.Rngs):
    linen_tt.ImageEncoder(hidden, embed_dim)   # its checks of the sizes
    self.Dense_0 = nnx.Linear(in_features, hidden, rngs=rngs)
    self.Dense_1 = nnx.Linear(hidden, hidden, rngs=rngs)
    self.Dense_2 = nnx.Linear(hidden, embed_dim, rngs=rngs)

  def __call__(self, images: Array) -> Array:
    """Inputs [B, ...] (flattened) -> embeddings [B, embed_dim] (not normalised)."""
    h = images.reshape(images.shape[0], -1)
    h = nnx.gelu(self.Dense_0(h))
    h = nnx.gelu(self.Dense_1(h))
    return self.Dense_2(h)


class ConvImageEncoder(LinenLayout):
  """The NNX twin of :class:`jaxlab.ot_clip.two_tower.ConvImageEncoder`: stride-2 convolutions, mean pool, MLP.

  Args:
    in_channels: C of the images [B, H, W, C].
    channels: each entry one convolution ``Conv_i`` of stride 2.
    hidden: width of the hidden layer.
    embed_dim: output width.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.ot_clip.nnx import ConvImageEncoder
    >>> ConvImageEncoder(1, (8, 16), hidden=32, embed_dim=8, rngs=nnx.Rngs(0))(jnp.ones((2, 8, 8, 1))).shape
    (2, 8)
  """

  def __init__(self, in_channels: int, channels: Sequence[int] = (32, 64), hidden: int = 128, embed_dim: int = 32, *,
               rngs: nnx.Rngs):
    linen_tt.ConvImageEncoder(channels, hidden, embed_dim)   # its checks of the sizes
    width = in_channels
    for i, c in enumerate(channels):
      setattr(self, f"Conv_{i}", nnx.Conv(width, int(c), (3, 3), strides=(2, 2), rngs=rngs))
      width = int(c)
    self.Dense_0 = nnx.Linear(width, hidden, rngs=rngs)
    self.Dense_1 = nnx.Linear(hidden, embed_dim, rngs=rngs)
    self.num_convs = len(channels)

  def __call__(self, images: Array) -> Array:
    """Images [B, H, W, C] -> embeddings [B, embed_dim] (not normalised)."""
    if images.ndim != 4:
      raise InputError("ConvImageEncoder needs images [batch, height, width, channels], "
                       f"got shape {tuple(images.shape)}")
    h = images
    for i in range(self.num_convs):
      h = nnx.gelu(getattr(self, f"Conv_{i}")(h))
    h = jnp.mean(h, axis=(1, 2))
    h = nnx.gelu(self.Dense_0(h))
    return self.Dense_1(h)


class TextEncoder(LinenLayout):
  """The NNX twin of :class:`jaxlab.ot_clip.two_tower.TextEncoder`: token ids (0 = padding) -> table -> masked mean -> MLP.

  Args:
    vocab_size: ids in [0, vocab_size); 0 is padding.
    hidden: width of the table and the hidden layer.
    embed_dim: output width.
    rngs: the ``params`` stream initialises ``Embed_0``, ``Dense_0``, ``Dense_1``.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.ot_clip.nnx import TextEncoder
    >>> TextEncoder(10, hidden=16, embed_dim=8, rngs=nnx.Rngs(0))(jnp.array([[3, 4, 0]])).shape
    (1, 8)
  """

  def __init__(self, vocab_size: int, hidden: int = 128, embed_dim: int = 32, *, rngs: nnx.Rngs):
    linen_tt.TextEncoder(vocab_size, hidden, embed_dim)   # its checks of the sizes
    self.Embed_0 = nnx.Embed(vocab_size, hidden, rngs=rngs)
    self.Dense_0 = nnx.Linear(hidden, hidden, rngs=rngs)
    self.Dense_1 = nnx.Linear(hidden, embed_dim, rngs=rngs)

  def __call__(self, tokens: Array) -> Array:
    """Token ids [B, L] -> embeddings [B, embed_dim] (not normalised)."""
    h = linen_tt.masked_mean(self.Embed_0(tokens), tokens)
    h = nnx.gelu(self.Dense_0(h))
    return self.Dense_1(h)


#: The :class:`jaxlab.ot_clip.TwoTower` fields that :class:`TwoTower` implements (all of them).
TWO_TOWER_SETTINGS = ("vocab_size", "hidden", "embed_dim", "init_log_logit_scale", "init_logit_bias",
                      "conv_channels", "text_embedding_dim")


class TwoTower(LinenLayout):
  """The NNX twin of :class:`jaxlab.ot_clip.TwoTower`: unit image and text embeddings, the logit scale and bias.

  The linen model reads the image shape from its first input; this one is built for ``image_shape``.

  Args:
    image_shape: one image's shape: any shape for the MLP tower (it is flattened), (H, W, C) for
      the conv tower (``conv_channels``).
    rngs: the ``params`` stream initialises the parameters.
    **settings: the fields of :class:`jaxlab.ot_clip.TwoTower` (``vocab_size``, ``hidden``, ``embed_dim``,
      ``conv_channels``, ``text_embedding_dim``, ...: same names, defaults and checks), kept as
      ``config``, that linen module.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.ot_clip import clip_loss
    >>> from jaxlab.ot_clip.nnx import TwoTower
    >>> model = TwoTower((8, 8), vocab_size=20, hidden=16, embed_dim=8, rngs=nnx.Rngs(0))
    >>> out = model(jnp.ones((4, 8, 8)), jnp.array([[1, 2], [3, 0], [4, 5], [6, 7]]))
    >>> out["image_emb"].shape, round(float(out["logit_scale"]), 2)
    ((4, 8), 14.29)
    >>> clip_loss(out["image_emb"], out["text_emb"], out["logit_scale"]).shape
    ()
  """

  def __init__(self, image_shape: Sequence[int], *, rngs: nnx.Rngs, **settings: Any):
    config = linen_config(linen_tt.TwoTower, settings, TWO_TOWER_SETTINGS)
    image_shape = tuple(image_shape)
    c = config
    if c.conv_channels:
      if len(image_shape) != 3:
        raise InputError(f"TwoTower image_shape={image_shape}; the conv tower (conv_channels={c.conv_channels}) "
                         "takes images (H, W, C)")
      self.image_encoder: LinenLayout = ConvImageEncoder(image_shape[-1], tuple(c.conv_channels), c.hidden,
                                                         c.embed_dim, rngs=rngs)
    else:
      self.image_encoder = ImageEncoder(math.prod(image_shape), c.hidden, c.embed_dim, rngs=rngs)
    if c.text_embedding_dim:
      self.text_encoder: LinenLayout = ImageEncoder(c.text_embedding_dim, c.hidden, c.embed_dim, rngs=rngs)
    else:
      self.text_encoder = TextEncoder(c.vocab_size, c.hidden, c.embed_dim, rngs=rngs)
    self.log_logit_scale = nnx.Param(jnp.asarray(c.init_log_logit_scale, jnp.float32))
    self.logit_bias = nnx.Param(jnp.asarray(c.init_logit_bias, jnp.float32))
    self.config = config

  def encode_image(self, images: Array) -> Array:
    """Images [B, ...] -> unit embeddings [B, embed_dim], float32."""
    return l2_normalize(self.image_encoder(images).astype(jnp.float32))

  def encode_text(self, texts: Array) -> Array:
    """Token ids [B, L], or text embeddings [B, text_embedding_dim] -> unit embeddings [B, embed_dim], float32."""
    if self.config.text_embedding_dim:
      linen_tt.check_text_embeddings(texts, self.config.text_embedding_dim)
    else:
      linen_tt.check_tokens(texts, self.config.vocab_size)
    return l2_normalize(self.text_encoder(texts).astype(jnp.float32))

  def logit_scale(self) -> Array:
    """``exp(min(log_logit_scale, ln 100))``, float32."""
    return linen_tt.clamped_logit_scale(self.log_logit_scale[...])

  def __call__(self, images: Array, texts: Array) -> dict[str, Array]:
    """``{"image_emb", "text_emb", "logit_scale", "logit_bias"}`` for paired images [B, ...] and texts [B, L].

    Args:
      images: ``[B, *image_shape]``.
      texts: token ids [B, L] or text embeddings [B, text_embedding_dim].

    Returns:
      Unit embeddings [B, embed_dim] (float32), the logit scale and the (SigLIP) logit bias.
    """
    linen_tt.check_pair(images, texts)
    return {"image_emb": self.encode_image(images), "text_emb": self.encode_text(texts),
            "logit_scale": self.logit_scale(), "logit_bias": self.logit_bias[...]}
