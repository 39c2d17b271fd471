"""``loss_fn(params, batch, rng, extra)`` for ``jaxlab.train.step.make_train_step``: two-tower + OT-CLIP loss.

The train step jits over the *global* batch sharded on "data". Given the mesh, the loss keeps the
B x B coupling split by rows over "data" (``jax.shard_map``, ``jaxlab.ot_clip.coupling``): each
device holds its B/n rows of it, and the Sinkhorn's column sums are collectives of B-vectors.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import flax.linen as nn
import jax

from jaxlab.errors import InputError
from jaxlab.ot_clip.coupling import check_axis_name, check_chunk_size, i2t_accuracy
from jaxlab.ot_clip.registry import LOSSES, get_loss, hyperparameter_names
from jaxlab.ot_clip.two_tower import LOG_MAX_SCALE, TwoTower


LossFn = Callable[[Any, dict[str, jax.Array], jax.Array, Any], tuple[jax.Array, dict[str, jax.Array]]]


def make_two_tower_loss(model: nn.Module, loss_name: str, *, text_key: str = "tokens", chunk_size: int | None = None,
                        mesh: Any = None, batch_axis: str = "data", **loss_kwargs: Any) -> LossFn:
  """Builds ``loss_fn(params, batch, rng, extra) -> (loss, metrics)``.

  ``batch`` holds ``"image"`` [B, ...] and, under ``text_key``, the texts: ``"tokens"`` [B, L]
  int32 by default (or e.g. ``"text"``, precomputed text embeddings [B, D] for a ``TwoTower``
  with ``text_embedding_dim=D``), row i of one paired with row i of the other. Metrics: the logit scale and the in-batch image->text retrieval accuracy.
  An unknown loss name or a bad hyper-parameter fails here (``get_loss`` checks eagerly). For a
  ``TwoTower``, whose logit scale is clamped at 100, losses that take ``max_logit_scale`` get it
  (unless given): the unbalanced loss then keeps its faster absorbed updates (``ot_losses``).

  ``mesh``: the mesh the batch is split over (its ``batch_axis``); given one whose ``batch_axis``
  has more than one device, the loss and the accuracy hold the B x B coupling split by rows over
  it (``get_loss(..., axis_name=batch_axis, mesh=mesh)``). None (or vmapped runs, whose run axis
  is what is split): the compiler places the dense loss. ``chunk_size``: the coupling is visited
  that many rows at a time (``get_loss``). ``loss_kwargs``: the loss's hyper-parameters.
  (The two-tower tasks build this from their config: ``jaxlab.tasks.clip_config.make_loss_fn``.)
  """
  if isinstance(model, TwoTower) and "max_logit_scale" in hyperparameter_names(LOSSES.get(loss_name)):
    loss_kwargs = {"max_logit_scale": math.exp(LOG_MAX_SCALE), **loss_kwargs}
  split = mesh is not None and batch_axis in mesh.shape and mesh.shape[batch_axis] > 1
  where = {"axis_name": batch_axis, "mesh": mesh} if split else {}
  loss = get_loss(loss_name, chunk_size=chunk_size, **where, **loss_kwargs)
  chunk_size = check_chunk_size(chunk_size)
  axes = check_axis_name(batch_axis) if split else None

  def loss_fn(params: Any, batch: dict[str, jax.Array], rng: jax.Array, extra: Any
              ) -> tuple[jax.Array, dict[str, jax.Array]]:
    del rng, extra
    missing = [key for key in ("image", text_key) if key not in batch]
    if missing:
      raise InputError(f"the two-tower batch needs keys 'image' and {text_key!r}, missing {missing} (got {sorted(batch)})")
    out = model.apply({"params": params}, batch["image"], batch[text_key])
    value = loss(out["image_emb"], out["text_emb"], out["logit_scale"], out["logit_bias"])
    accuracy = i2t_accuracy(out["image_emb"], out["text_emb"], chunk_size=chunk_size, axis_name=axes, mesh=mesh)
    return value, {"logit_scale": out["logit_scale"], "i2t_accuracy": accuracy}

  return loss_fn
