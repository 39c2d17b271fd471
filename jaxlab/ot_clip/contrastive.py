"""The two contrastive baselines: CLIP's symmetric InfoNCE and SigLIP's pairwise sigmoid loss."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxlab.errors import InputError, check_finite, check_positive, check_scalar, is_traced
from jaxlab.ot_clip.checks import positive_finite
from jaxlab.ot_clip.similarity import similarity


def check_logit_scale(logit_scale: Any) -> None:
  """A concrete scale must be a finite scalar > 0; a traced one is checked by ``guard_logit_scale``."""
  check_scalar(logit_scale, "logit_scale")
  check_positive(logit_scale, "logit_scale", got=True)


def guard_logit_scale(loss: jax.Array, logit_scale: Any) -> jax.Array:
  """NaN instead of a finite wrong loss for a *traced* scale that is <= 0 or not finite.

  A concrete scale was checked already (InputError); inside jit the scale cannot be inspected, but
  one scalar select keeps a bad one from training silently (the train step skips NaN losses).
  """
  if not is_traced(logit_scale):
    return loss
  return jnp.where(positive_finite(logit_scale), loss, jnp.nan)


def clip_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any) -> jax.Array:
  """Symmetric InfoNCE (Radford et al., ICML 2021, Fig. 3), logits = logit_scale * S.

  L = 1/2 [ -1/n sum_i log softmax_j(s S_ij)_i  -  1/n sum_j log softmax_i(s S_ij)_j ].
  Computed in at least float32 (bfloat16/float16 embeddings are upcast; the loss is float32).
  """
  check_logit_scale(logit_scale)
  sim = similarity(image_emb, text_emb)
  logits = jnp.asarray(logit_scale, sim.dtype) * sim
  diag = jnp.diagonal(logits)
  i2t = jnp.mean(jax.nn.logsumexp(logits, axis=1) - diag)
  t2i = jnp.mean(jax.nn.logsumexp(logits, axis=0) - diag)
  return guard_logit_scale(0.5 * (i2t + t2i), logit_scale)


def siglip_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any,
                logit_bias: Any) -> jax.Array:
  """Pairwise sigmoid loss (Zhai et al., ICCV 2023, Alg. 1), normalised by the batch size.

  L = -1/n sum_ij log sigmoid(z_ij (t S_ij + b)), z_ij = +1 if i == j else -1.
  Computed in at least float32 (float16 logits would overflow); ``logit_bias`` is required.
  """
  check_logit_scale(logit_scale)
  if logit_bias is None:
    raise InputError("siglip needs logit_bias (a finite scalar, e.g. -10.0), got None")
  check_scalar(logit_bias, "logit_bias")
  check_finite(logit_bias, "logit_bias", got=True)
  sim = similarity(image_emb, text_emb)
  logits = jnp.asarray(logit_scale, sim.dtype) * sim + jnp.asarray(logit_bias, sim.dtype)
  n = logits.shape[0]
  signs = 2.0 * jnp.eye(n, dtype=logits.dtype) - 1.0
  return guard_logit_scale(-jnp.sum(jax.nn.log_sigmoid(signs * logits)) / n, logit_scale)
