"""Tokenizations of encoder features [b, h, w, c] into tokens [b, m, d] for an MoE layer.

Obando-Ceron et al., ICML 2024, Sec. 4 (Fig. 4) and Sokar et al., "Don't flatten, tokenize!"
(ICLR 2025); names as dopamine's ``RoutingType``:

* ``per_conv`` (dopamine PER_PIXEL): h*w tokens of dim c, one per spatial position.
* ``per_feat`` (PER_FEATUREMAP): c tokens of dim h*w, one per feature map.
* ``per_patch`` (PER_PATCH): a Conv(embedding_size, patch, stride=patch, VALID) patch embedding,
  then one token per patch (dopamine names the conv ``embedding``).
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check, check_int, is_int

TOKENIZERS = ("per_conv", "per_feat", "per_patch")


def per_conv(features: jax.Array) -> jax.Array:
  """[b, h, w, c] -> [b, h*w, c]."""
  b, h, w, c = features.shape
  return features.reshape(b, h * w, c)


def per_feat(features: jax.Array) -> jax.Array:
  """[b, h, w, c] -> [b, c, h*w]."""
  return jnp.swapaxes(per_conv(features), 1, 2)


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
