"""Selective classification from transport plans: confidences, risk-coverage curve and AURC.

Shi, Fan & Yan, ICML 2024, Sec. 5: a classifier may abstain, and should answer the samples it is
most sure of. Confidence comes from the inference plan: the share of an image's mass sent to its
predicted class (``plan_confidence``), or, with partial OT, whether the image is transported at
all when only a fraction ``coverage`` of the mass must move (``partial_ot_confidence``). Partial
transport is written as balanced OT with one extra "reject" class of constant cost that must
absorb 1 - coverage of the mass (Chapel et al., NeurIPS 2020, Prop. 1 for the same reduction).
Risk-coverage and AURC follow Geifman & El-Yaniv (NeurIPS 2017) and Geifman et al. (ICLR 2019).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxlab.ot_clip.inference import INFERENCE_MAX_ITERATIONS, INFERENCE_THRESHOLD, check_class_prior
from jaxlab.ot_clip.plans import sinkhorn_log_plan
from jaxlab.ot_clip.similarity import check_embeddings, check_positive, l2_normalize


def plan_confidence(log_plan: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(prediction, confidence) with confidence max_j P_ij / sum_j P_ij, from log P [N, K]."""
  row = jax.nn.softmax(log_plan, axis=1)
  return jnp.argmax(row, axis=1), jnp.max(row, axis=1)


def partial_ot_confidence(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any, coverage: float,
                          class_prior: Any = None) -> tuple[jax.Array, jax.Array]:
  """(prediction, confidence) from partial OT moving a fraction ``coverage`` of the images' mass.

  The reject column's cost is a constant: a constant added to one column is absorbed by its
  potential, so its value does not change the plan. Confidence is the share of image i's mass
  sent to real classes; the predicted class is the argmax over those.
  """
  check_positive("epsilon", epsilon)
  if not 0.0 < coverage <= 1.0:
    raise ValueError(f"coverage must be in (0, 1], got {coverage}")
  check_embeddings(image_emb, class_emb, same_batch=False, names=("image", "class"))
  x, t = l2_normalize(image_emb), l2_normalize(class_emb)
  prior = check_class_prior(class_prior, t.shape[0])
  cost = jnp.concatenate([1.0 - x @ t.T, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)
  b = jnp.concatenate([coverage * prior, jnp.array([1.0 - coverage], prior.dtype)])
  b = jnp.maximum(b, 1e-12)  # coverage = 1 leaves an empty reject class
  log_plan = sinkhorn_log_plan(cost, epsilon, b=b, implicit=True, threshold=INFERENCE_THRESHOLD,
                               max_iterations=INFERENCE_MAX_ITERATIONS)
  row = jax.nn.softmax(log_plan, axis=1)
  return jnp.argmax(row[:, :-1], axis=1), 1.0 - row[:, -1]


def risk_coverage_curve(confidence: jax.Array, correct: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(coverage k/N, selective risk of the k most confident) for k = 1..N."""
  order = jnp.argsort(-confidence, stable=True)
  errors = jnp.cumsum(1.0 - correct[order].astype(jnp.float32))
  k = jnp.arange(1, confidence.shape[0] + 1, dtype=jnp.float32)
  return k / confidence.shape[0], errors / k


def aurc(confidence: jax.Array, correct: jax.Array) -> jax.Array:
  """Area under the risk-coverage curve (lower is better; Geifman et al. 2019)."""
  return jnp.mean(risk_coverage_curve(confidence, correct)[1])


def selective_risk(confidence: jax.Array, correct: jax.Array, coverage: float) -> jax.Array:
  """Error rate on the ceil(coverage N) most confident samples."""
  if not 0.0 < coverage <= 1.0:
    raise ValueError(f"coverage must be in (0, 1], got {coverage}")
  n = confidence.shape[0]
  k = max(1, int(-(-coverage * n // 1)))
  return risk_coverage_curve(confidence, correct)[1][k - 1]
