"""What a trained two-tower model does with its params: embed images and texts, classify images zero-shot.

The two-tower tasks (digits, the user's own pairs) hand these functions to ``jaxlab.load_run`` and
evaluate with them, so a loaded run embeds and classifies exactly as the trainer evaluated it.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from jaxlab.ot_clip.evaluation import class_embedding, classify
from jaxlab.ot_clip.two_tower import TwoTower


def two_tower_fns(model: TwoTower, class_texts: np.ndarray | None = None, epsilon: float = 0.1
                  ) -> dict[str, Callable[..., jax.Array]]:
  """The inference functions of ``model``, each ``fn(params, ...)``, pure and jit-able.

  Args:
    model: the two-tower model.
    class_texts: the text-tower inputs of each class's prompts, ``[classes, prompts, ...]`` (token ids
      ``[C, P, L]`` or text embeddings ``[C, 1, D]``), whose embeddings are averaged into the class
      embedding (Radford et al. 2021, Sec. 3.1.4); None: no classes, no zero-shot functions.
    epsilon: the entropic regularisation of OT zero-shot inference (``method="ot"``).

  Returns:
    ``embed_images(params, images)`` and ``embed_texts(params, texts)`` (L2-normalised embeddings) and,
    with ``class_texts``, ``class_embeddings(params)`` (``[classes, embed_dim]``) and
    ``zero_shot(params, images, method="argmax" | "ot", epsilon=None)`` (class ids; ``epsilon`` None: the
    default above).

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxlab.ot_clip import TwoTower
    >>> from jaxlab.ot_clip.two_tower_inference import two_tower_fns
    >>> model = TwoTower(vocab_size=10, hidden=8, embed_dim=4)
    >>> params = model.init(jax.random.key(0), jnp.zeros((1, 6)), jnp.zeros((1, 3), jnp.int32))["params"]
    >>> fns = two_tower_fns(model, class_texts=jnp.ones((2, 1, 3), jnp.int32))
    >>> fns["embed_images"](params, jnp.ones((5, 6))).shape, fns["zero_shot"](params, jnp.ones((5, 6))).shape
    ((5, 4), (5,))
  """
  default_epsilon = epsilon

  def embed_images(params: Any, images: jax.Array) -> jax.Array:
    return model.apply({"params": params}, images, method=TwoTower.encode_image)

  def embed_texts(params: Any, texts: jax.Array) -> jax.Array:
    return model.apply({"params": params}, texts, method=TwoTower.encode_text)

  fns = {"embed_images": embed_images, "embed_texts": embed_texts}
  if class_texts is None:
    return fns

  def class_embeddings(params: Any) -> jax.Array:
    text = embed_texts(params, class_texts.reshape((-1,) + class_texts.shape[2:]))
    return class_embedding(text.reshape(class_texts.shape[0], class_texts.shape[1], -1))  # prompt ensemble

  def zero_shot(params: Any, images: jax.Array, method: str = "argmax", epsilon: float | None = None) -> jax.Array:
    epsilon = default_epsilon if epsilon is None else epsilon
    return classify(embed_images(params, images), class_embeddings(params), method, epsilon)

  return {**fns, "class_embeddings": class_embeddings, "zero_shot": zero_shot}
