"""Tokenizations of encoder features [b, h, w, c] into tokens [b, m, d] for an MoE layer.

Obando-Ceron et al., ICML 2024, Sec. 4 (Fig. 4) and Sokar et al., "Don't flatten, tokenize!"
(ICLR 2025); names as dopamine's ``RoutingType``:

* ``per_conv`` (dopamine PER_PIXEL): h*w tokens of dim c, one per spatial position.
* ``per_feat`` (PER_FEATUREMAP): c tokens of dim h*w, one per feature map.
* ``per_patch`` (PER_PATCH): a Conv(embedding_size, patch, stride=patch, VALID) patch embedding,
  then one token per patch (dopamine names the conv ``embedding``).
* ``flatten``: no tokenization: the whole flattened encoder output is one token [b, 1, h*w*c]
  (of vector features, [b, 1, F]), the "flatten" side of Sokar et al.'s flatten-vs-tokenize
  question (ICLR 2025) asked of an MoE head.

Two options act on the tokens and on the layer's output (each off by default):

* a learned position embedding added to the tokens (:class:`PositionEmbedding`, ViT's), so that
  positions whose features are equal (MinAtar's empty cells) still route differently;
* ``pool`` turns the layer's output [b, m, d] (or the encoder's [b, h, w, c] for the dense head)
  into the Q head's input: ``flatten`` (the paper's) or ``gap``, global average pooling over the
  positions (Sokar & Castro, "Mind the GAP!", 2025).

Vector features [b, F] (an MLP torso's output) have no positions, so the one tokenization is
``per_feat``: each feature is a token, as each feature map is one under PER_FEATUREMAP (a vector
is a 1x1xF map: PER_FEATUREMAP gives F tokens of dim 1, PER_PIXEL one token of all F, which
gives a Soft MoE nothing to route). A token of dim 1 makes every router logit a multiple of the
same scalar, so each scalar is first embedded by its own affine map,
``token_j = h_j W_j + b_j`` (:class:`PerFeatureEmbedding`; the numerical-feature tokenizer of
Gorishniy et al., "Revisiting Deep Learning Models for Tabular Data", NeurIPS 2021, Sec. 3.3),
the vector analogue of per_patch's learned embedding. Dopamine's labs/moes names a
``ClassicControlMoE`` in its CartPole / Acrobot / MountainCar gin files but ships no such class,
so there is no upstream tokenization of vectors to follow.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check, check_int, is_int

#: Tokenizer names; ``"auto"`` is "per_conv" for image features [b, h, w, c] and "per_feat" for vectors [b, F];
#: ``"flatten"`` is one token of every feature (no tokenization).
TOKENIZERS = ("auto", "per_conv", "per_feat", "per_patch", "flatten")
#: Position embeddings added to the tokens: none, or a learned table (:class:`PositionEmbedding`).
POSITION_EMBEDDINGS = ("none", "learned")
#: How the Q head's input is made from positions: ``flatten`` (concatenate) or ``gap`` (average): :func:`pool`.
POOLINGS = ("flatten", "gap")


def per_conv(features: jax.Array) -> jax.Array:
  """[b, h, w, c] -> [b, h*w, c]."""
  b, h, w, c = features.shape
  return features.reshape(b, h * w, c)


def per_feat(features: jax.Array) -> jax.Array:
  """[b, h, w, c] -> [b, c, h*w]."""
  return jnp.swapaxes(per_conv(features), 1, 2)


def flatten(features: jax.Array) -> jax.Array:
  """[b, ...] -> [b, 1, prod(...)]: one token of the whole flattened encoder output."""
  return features.reshape(features.shape[0], 1, -1)


def check_patch_settings(module: str, embedding_size: int, patch_size: Sequence[int]) -> None:
  """InputError ``<module>.embedding_size`` / ``<module>.patch_size`` for a patch embedding that builds nothing."""
  check_int(embedding_size, f"{module}.embedding_size", meaning="width of each per-patch token")
  ok = (isinstance(patch_size, (tuple, list)) and len(patch_size) == 2
        and all(is_int(p) and p >= 1 for p in patch_size))
  check(ok, f"{module}.patch_size={patch_size!r}; must be (height, width), two ints >= 1")


class PerPatch(nn.Module):
  """[b, h, w, c] -> [b, (h//ph)*(w//pw), embedding_size] via a strided VALID conv."""

  embedding_size: int = 64
  patch_size: Sequence[int] = (3, 3)

  @nn.compact
  def __call__(self, features: jax.Array) -> jax.Array:
    check_patch_settings("PerPatch", self.embedding_size, self.patch_size)
    ph, pw = self.patch_size
    check(features.shape[1] >= ph and features.shape[2] >= pw,
          f"PerPatch.patch_size={tuple(self.patch_size)} is larger than the encoder's feature map "
          f"{features.shape[1:3]}; each side must be <= the map's")
    x = nn.Conv(self.embedding_size, (ph, pw), strides=(ph, pw), padding="VALID",
                name="embedding")(features)
    return per_conv(x)


def init_per_feature(key: jax.Array, shape: tuple[int, int]) -> jax.Array:
  """U(-1/sqrt(d), 1/sqrt(d)) of ``shape`` [F, d] (Gorishniy et al., NeurIPS 2021)."""
  bound = shape[-1] ** -0.5
  return jax.random.uniform(key, shape, jnp.float32, -bound, bound)


def per_feature_embedding(features: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
  """``token_j = h_j * kernel[j] + bias[j]``: vector features [b, F] -> tokens [b, F, d] (in the features' dtype)."""
  return features[..., None] * kernel.astype(features.dtype) + bias.astype(features.dtype)


class PerFeatureEmbedding(nn.Module):
  """Vector features [b, F] -> tokens [b, F, embedding_size]: ``token_j = h_j * kernel[j] + bias[j]``.

  Both parameters ``[F, embedding_size]`` are initialised U(-1/sqrt(d), 1/sqrt(d)), d =
  ``embedding_size``, as the numerical-feature tokenizer of Gorishniy et al. (NeurIPS 2021).
  """

  embedding_size: int = 64

  @nn.compact
  def __call__(self, features: jax.Array) -> jax.Array:
    check_int(self.embedding_size, "PerFeatureEmbedding.embedding_size", meaning="width of each per-feature token")
    kernel = self.param("kernel", init_per_feature, (features.shape[-1], self.embedding_size))
    bias = self.param("bias", init_per_feature, (features.shape[-1], self.embedding_size))
    return per_feature_embedding(features, kernel, bias)


def global_average_pool(x: jax.Array) -> jax.Array:
  r"""Global average pooling (GAP): ``[b, ..., c] -> [b, c]``, the mean over every position axis.

  Lin, Chen, Yan, "Network In Network", ICLR 2014, Sec. 3.2; proposed for value networks by Sokar &
  Castro, "Mind the GAP! The Challenges of Scale in Pixel-based Deep Reinforcement Learning",
  2025 (arXiv 2505.17749): the encoder output is averaged over its positions instead of
  flattened, so the layer after it takes ``c`` inputs instead of ``h w c``.

  .. math:: \mathrm{GAP}(x)_{k} = \frac{1}{|P|} \sum_{p \in P} x_{p, k}

  over the positions ``P`` (the ``h x w`` grid of a feature map, the ``m`` tokens of a layer's output).

  Examples:
    >>> import jax.numpy as jnp
    >>> global_average_pool(jnp.ones((2, 10, 10, 16))).shape, global_average_pool(jnp.ones((2, 100, 16))).shape
    ((2, 16), (2, 16))
  """
  check(x.ndim >= 3, f"global average pooling needs positions: features of shape {x.shape}; need [b, ..., c]")
  return jnp.mean(x, axis=tuple(range(1, x.ndim - 1)))


def pool(x: jax.Array, pooling: str) -> jax.Array:
  """The Q head's input [b, F] from ``x`` [b, ..., c]: ``"flatten"`` (F = every entry) or ``"gap"``
  (:func:`global_average_pool`, F = c)."""
  check(pooling in POOLINGS, f"pooling={pooling!r}; choose one of {POOLINGS}")
  return x.reshape(x.shape[0], -1) if pooling == "flatten" else global_average_pool(x)


def add_position_embedding(tokens: jax.Array, table: jax.Array) -> jax.Array:
  r"""Tokens [b, m, d] plus a position embedding [m, d]: token :math:`i` becomes :math:`x_i + E_i`.

  The learned 1-D position embedding of ViT (Dosovitskiy et al., "An Image is Worth 16x16 Words",
  ICLR 2021, Eq. 1: :math:`z_0 = [x^1_p E; \dots; x^N_p E] + E_{pos}`), added to the tokens before the
  MoE layer, so that the router's logits :math:`(x_i + E_i)\,\Phi` depend on the position even where
  the features :math:`x_i` are equal (e.g. zero at MinAtar's empty cells).
  """
  check(tokens.ndim == 3 and table.shape == tokens.shape[1:],
        f"position embedding of shape {table.shape} for tokens of shape {tokens.shape}; need [m, d] = tokens' [m, d]")
  return tokens + table.astype(tokens.dtype)


class PositionEmbedding(nn.Module):
  """Tokens [b, m, d] -> tokens + a learned table ``pos_embedding`` [m, d] (:func:`add_position_embedding`).

  Initialised N(0, 0.02^2), as vmoe's and ViT's ``AddPositionEmbs`` (google-research/vmoe
  vmoe/nn/vit_moe.py:274-276 @ 942a78b: ``normal(stddev=0.02)``, "from BERT").
  """

  @nn.compact
  def __call__(self, tokens: jax.Array) -> jax.Array:
    check(tokens.ndim == 3, f"PositionEmbedding takes tokens [batch, m, d]; got shape {tokens.shape}")
    table = self.param("pos_embedding", nn.initializers.normal(stddev=0.02), tokens.shape[1:], jnp.float32)
    return add_position_embedding(tokens, table)
