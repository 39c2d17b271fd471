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
import numpy as np

from jaxlab.errors import InputError, check_range, is_traced
from jaxlab.ot_clip.checks import check_floating
from jaxlab.ot_clip.inference import mask_plan, prepare, solver_options
from jaxlab.ot_clip.plans import sinkhorn_log_plan


def plan_confidence(log_plan: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(prediction, confidence) with confidence max_j P_ij / sum_j P_ij, from log P [N, K].

  A row with no finite entry or with a NaN (a masked image, see ``inference``) gets prediction
  -1 and confidence 0, so it is the last to be selected.
  """
  shape = tuple(np.shape(log_plan))
  if len(shape) != 2 or min(shape) < 1:
    raise InputError(f"log_plan must be a non-empty 2-D [N, K] array, got shape {shape}")
  check_floating(log_plan, "log_plan")
  row = jax.nn.softmax(log_plan, axis=1)
  ok = jnp.any(jnp.isfinite(log_plan), axis=1) & ~jnp.any(jnp.isnan(log_plan), axis=1)
  return jnp.where(ok, jnp.argmax(row, axis=1), -1), jnp.where(ok, jnp.max(row, axis=1), 0.0)


def partial_ot_confidence(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any = None,
                          coverage: Any = None, class_prior: Any = None, *, logit_scale: Any = None
                          ) -> tuple[jax.Array, jax.Array]:
  """(prediction, confidence) from partial OT moving a fraction ``coverage`` of the images' mass.

  The reject column's cost is a constant: a constant added to one column is absorbed by its
  potential, so its value does not change the plan. Confidence is the share of image i's mass
  sent to real classes; the predicted class is the argmax over those. ``coverage`` in (0, 1] is
  required; the temperature is exactly one of ``epsilon`` / ``logit_scale`` and bad rows get
  prediction -1 and confidence 0, as in ``inference.ot_zero_shot``.
  """
  if coverage is None:
    raise InputError("partial_ot_confidence needs coverage, the fraction of the mass to transport, in (0, 1]")
  check_range(coverage, "coverage", 0, 1, low_open=True, got=True)
  p, eps = prepare(image_emb, class_emb, class_prior, epsilon=epsilon, logit_scale=logit_scale)
  x, t, dtype = p.images, p.classes, p.images.dtype
  cost = jnp.concatenate([1.0 - x @ t.T, jnp.ones((x.shape[0], 1), dtype)], axis=1)
  coverage_arr = jnp.asarray(coverage, dtype)
  reject = (1.0 - coverage_arr) if is_traced(coverage) else jnp.asarray(1.0 - coverage, dtype)
  b = jnp.concatenate([coverage * p.prior, reject[None]])
  b = jnp.maximum(b, 1e-12)  # coverage = 1 leaves an empty reject class
  log_plan = sinkhorn_log_plan(cost, eps, p.image_mass, b, **solver_options("partial_ot_confidence", {}))
  if is_traced(coverage):
    p = p._replace(all_ok=p.all_ok & (coverage_arr > 0) & (coverage_arr <= 1))
  log_plan = mask_plan(log_plan, p)
  pred, _ = plan_confidence(log_plan[:, :-1])
  row = jax.nn.softmax(log_plan, axis=1)
  return pred, jnp.where(pred >= 0, 1.0 - row[:, -1], 0.0)


def _check_scores(confidence: Any, correct: Any) -> None:
  cs, ks = tuple(np.shape(confidence)), tuple(np.shape(correct))
  if len(cs) != 1 or cs != ks or cs[0] < 1:
    raise InputError(f"confidence {cs} and correct {ks} must be non-empty 1-D arrays of the same length")
  check_floating(confidence, "confidence")


def risk_coverage_curve(confidence: jax.Array, correct: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(coverage k/N, selective risk of the k most confident) for k = 1..N."""
  _check_scores(confidence, correct)
  confidence, correct = jnp.asarray(confidence), jnp.asarray(correct)
  order = jnp.argsort(-confidence, stable=True)
  errors = jnp.cumsum(1.0 - correct[order].astype(jnp.float32))
  k = jnp.arange(1, confidence.shape[0] + 1, dtype=jnp.float32)
  return k / confidence.shape[0], errors / k


def aurc(confidence: jax.Array, correct: jax.Array) -> jax.Array:
  """Area under the risk-coverage curve (lower is better; Geifman et al. 2019)."""
  return jnp.mean(risk_coverage_curve(confidence, correct)[1])


def selective_risk(confidence: jax.Array, correct: jax.Array, coverage: float) -> jax.Array:
  """Error rate on the ceil(coverage N) most confident samples; coverage in (0, 1]."""
  if is_traced(coverage):
    raise InputError("selective_risk needs a concrete coverage (it sets how many samples count), got a traced value")
  check_range(coverage, "coverage", 0, 1, low_open=True, got=True)
  _check_scores(confidence, correct)
  n = np.shape(confidence)[0]
  k = max(1, int(-(-coverage * n // 1)))
  return risk_coverage_curve(confidence, correct)[1][k - 1]
