"""Held-out metrics: retrieval recall@1 and the zero-shot / selective / long-tailed set on known answers."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.ot_clip.evaluation import class_embedding, retrieval_metrics, zero_shot_metrics
from tests.support.tolerances import ops_rtol


def test_retrieval_recall_counts_each_direction():
  image = jnp.eye(4)[jnp.array([0, 0, 2, 3, 3])]
  text = jnp.eye(4)[jnp.array([0, 1, 2, 3, 2])]
  out = retrieval_metrics(image, text)
  # Image 1 (= e0) retrieves text 0; image 4 (= e3) retrieves text 3 (the first of the ties).
  np.testing.assert_allclose(out["i2t_recall_at_1"], 3 / 5, rtol=ops_rtol(2))  # a sum of 0/1 values, one division
  # Text 1 (= e1) matches no image (all similarities 0, argmax picks image 0); text 4 (= e2) retrieves image 2.
  np.testing.assert_allclose(out["t2i_recall_at_1"], 3 / 5, rtol=ops_rtol(2))


def test_zero_shot_metrics_on_embeddings_that_name_their_class():
  labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2])
  classes = jnp.eye(3, 8)
  # Each image points at its class, with a margin that varies so the confidences are distinct.
  margin = jnp.linspace(0.5, 2.0, len(labels))[:, None]
  images = jnp.eye(3, 8)[labels] * margin + 0.1 * jnp.ones((len(labels), 8))
  lt_idx, lt_prior = np.array([0, 3, 6, 1, 4, 2]), np.array([0.5, 1 / 3, 1 / 6])
  fn = jax.jit(functools.partial(zero_shot_metrics, epsilon=0.05, coverage=0.5, long_tailed=(lt_idx, lt_prior)))
  out = jax.device_get(fn(images, classes, jnp.asarray(labels)))
  for key in ("zero_shot_accuracy", "ot_zero_shot_accuracy", "lt_zero_shot_accuracy", "lt_ot_prior_accuracy"):
    assert out[key] == 1.0, (key, out[key])  # every prediction right (a mean of exact 0/1 values)
  # The long-tailed subset (3:2:1) under a uniform class marginal: OT must send mass to the rare
  # class, so some image of a frequent class is mislabelled; the known prior removes that.
  assert out["lt_ot_uniform_accuracy"] < 1.0
  for key in ("aurc_plan", "selective_risk_plan", "selective_risk_partial_ot"):
    assert out[key] == 0.0, (key, out[key])


def test_class_embedding_is_a_unit_prompt_ensemble():
  prompts = jnp.array([[[3.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]])
  out = class_embedding(prompts)
  # A mean of 2 rows, a 2-term sum of squares and a reciprocal square root (a few ulps).
  np.testing.assert_allclose(out, [[1.0, 0.0], [2 ** -0.5, 2 ** -0.5]], rtol=ops_rtol(2 + 2 + 4), atol=0)
