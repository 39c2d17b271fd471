"""The two contrastive baselines: CLIP's symmetric InfoNCE and SigLIP's pairwise sigmoid loss."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxlab.ot_clip.similarity import check_positive, similarity


def clip_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any) -> jax.Array:
  """Symmetric InfoNCE (Radford et al., ICML 2021, Fig. 3), logits = logit_scale * S.

  L = 1/2 [ -1/n sum_i log softmax_j(s S_ij)_i  -  1/n sum_j log softmax_i(s S_ij)_j ].
  """
  check_positive("logit_scale", logit_scale)
  logits = logit_scale * similarity(image_emb, text_emb)
  diag = jnp.diagonal(logits)
  i2t = jnp.mean(jax.nn.logsumexp(logits, axis=1) - diag)
  t2i = jnp.mean(jax.nn.logsumexp(logits, axis=0) - diag)
  return 0.5 * (i2t + t2i)


def siglip_loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any,
                logit_bias: Any) -> jax.Array:
  """Pairwise sigmoid loss (Zhai et al., ICCV 2023, Alg. 1), normalised by the batch size.

  L = -1/n sum_ij log sigmoid(z_ij (t S_ij + b)), z_ij = +1 if i == j else -1.
  """
  check_positive("logit_scale", logit_scale)
  logits = logit_scale * similarity(image_emb, text_emb) + logit_bias
  n = logits.shape[0]
  signs = 2.0 * jnp.eye(n, dtype=logits.dtype) - 1.0
  return -jnp.sum(jax.nn.log_sigmoid(signs * logits)) / n
