"""``loss_fn(params, batch, rng, extra)`` for ``jaxlab.train.step.make_train_step``: two-tower + OT-CLIP loss.

The train step jits over the *global* batch sharded on "data", so the plan below couples the
whole batch with no collectives of our own; XLA inserts the gathers the B x B cost needs.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import InputError
from jaxlab.ot_clip.registry import LOSSES, get_loss, hyperparameter_names
from jaxlab.ot_clip.two_tower import LOG_MAX_SCALE, TwoTower


LossFn = Callable[[Any, dict[str, jax.Array], jax.Array, Any], tuple[jax.Array, dict[str, jax.Array]]]


def make_two_tower_loss(model: nn.Module, loss_name: str, *, text_key: str = "tokens",
                        **loss_kwargs: Any) -> LossFn:
  """Builds ``loss_fn(params, batch, rng, extra) -> (loss, metrics)``.

  ``batch`` holds ``"image"`` [B, ...] and, under ``text_key``, the texts: ``"tokens"`` [B, L]
  int32 by default (or e.g. ``"text"``, precomputed text embeddings [B, D] for a ``TwoTower``
  with ``text_embedding_dim=D``), row i of one paired with row i of the other. Metrics: the logit scale and the in-batch image->text retrieval accuracy.
  An unknown loss name or a bad hyper-parameter fails here (``get_loss`` checks eagerly). For a
  ``TwoTower``, whose logit scale is clamped at 100, losses that take ``max_logit_scale`` get it
  (unless given): the unbalanced loss then keeps its faster absorbed updates (``ot_losses``).
  """
  if isinstance(model, TwoTower) and "max_logit_scale" in hyperparameter_names(LOSSES.get(loss_name)):
    loss_kwargs = {"max_logit_scale": math.exp(LOG_MAX_SCALE), **loss_kwargs}
  loss = get_loss(loss_name, **loss_kwargs)

  def loss_fn(params: Any, batch: dict[str, jax.Array], rng: jax.Array, extra: Any
              ) -> tuple[jax.Array, dict[str, jax.Array]]:
    del rng, extra
    missing = [key for key in ("image", text_key) if key not in batch]
    if missing:
      raise InputError(f"the two-tower batch needs keys 'image' and {text_key!r}, missing {missing} (got {sorted(batch)})")
    out = model.apply({"params": params}, batch["image"], batch[text_key])
    value = loss(out["image_emb"], out["text_emb"], out["logit_scale"], out["logit_bias"])
    hits = jnp.argmax(out["image_emb"] @ out["text_emb"].T, axis=1) == jnp.arange(out["image_emb"].shape[0])
    return value, {"logit_scale": out["logit_scale"], "i2t_accuracy": jnp.mean(hits)}

  return loss_fn
