"""Classification losses with the ``(logits, labels) -> (loss, metrics)`` shape the tasks use."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxlab.registry import Registry

#: Classification losses by name (``config.loss.name`` of the ``digits_classification`` task), each
#: ``(logits, labels, **kwargs) -> (loss, metrics)``. The OT-CLIP losses of two towers are another kind,
#: with another signature: ``jaxlab.ot_clip.LOSSES``.
CLASSIFICATION_LOSSES: Registry = Registry("classification loss")


@CLASSIFICATION_LOSSES.register("softmax_cross_entropy")
def softmax_cross_entropy(logits: jax.Array, labels: jax.Array, label_smoothing: float = 0.0
                          ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean cross-entropy over the (global) batch, plus accuracy."""
  num_classes = logits.shape[-1]
  targets = optax.smooth_labels(jax.nn.one_hot(labels, num_classes), label_smoothing)
  loss = optax.softmax_cross_entropy(logits.astype(jnp.float32), targets).mean()
  accuracy = (logits.argmax(-1) == labels).mean()
  return loss, {"accuracy": accuracy}
