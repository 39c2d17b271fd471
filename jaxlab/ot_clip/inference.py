"""Zero-shot classification: argmax of similarities, and OT-CLIP's transductive OT / FGW inference.

Shi, Fan & Yan, ICML 2024, Sec. 5 ("rethinking inference"): instead of labelling each test image
alone, couple the whole test set with the class prompts by an entropic OT plan whose class
marginal is a class prior (uniform, or the known label distribution of a long-tailed test set),
and predict argmax_j P_ij. Since P_ij is proportional to exp((g_j - C_ij) / eps) within a row, OT
inference is argmax similarity with a per-class offset g_j chosen so that the predicted label
histogram matches the prior. FGW inference (Sec. 5) adds the Gromov term so that similar test
images are sent to similar classes (graph matching between the image graph and the prompt graph).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.ot_clip.gromov import fgw_log_plan
from jaxlab.ot_clip.plans import sinkhorn_log_plan
from jaxlab.ot_clip.similarity import check_embeddings, check_positive, l2_normalize

# Inference solves to a tolerance (nothing is differentiated); these bound the work.
INFERENCE_THRESHOLD = 1e-5
INFERENCE_MAX_ITERATIONS = 2000


def check_class_prior(prior: Any, num_classes: int) -> jax.Array:
  """Uniform if ``prior`` is None; otherwise a ValueError unless it is a distribution over classes."""
  if prior is None:
    return jnp.full((num_classes,), 1.0 / num_classes, jnp.float32)
  if isinstance(prior, jax.core.Tracer):
    return prior
  arr = np.asarray(prior, np.float64)
  if arr.shape != (num_classes,):
    raise ValueError(f"class_prior has shape {arr.shape}, expected ({num_classes},) for {num_classes} classes")
  if np.any(arr < 0) or not np.isclose(arr.sum(), 1.0, atol=1e-4):
    raise ValueError(f"class_prior must be non-negative and sum to 1, got sum {arr.sum():.6g}")
  return jnp.asarray(arr, jnp.float32)


def _normalized(image_emb: jax.Array, class_emb: jax.Array) -> tuple[jax.Array, jax.Array]:
  check_embeddings(image_emb, class_emb, same_batch=False, names=("image", "class"))
  return l2_normalize(image_emb), l2_normalize(class_emb)


def zero_shot_predict(image_emb: jax.Array, class_emb: jax.Array) -> jax.Array:
  """CLIP's zero-shot rule: argmax_j <x_i, t_j> (Radford et al. 2021, Sec. 3.1.1)."""
  x, t = _normalized(image_emb, class_emb)
  return jnp.argmax(x @ t.T, axis=1)


def ot_zero_shot_plan(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any,
                      class_prior: Any = None, **sinkhorn_kwargs: Any) -> jax.Array:
  """log P of the entropic plan between the test images (mass 1/N each) and the classes (prior)."""
  check_positive("epsilon", epsilon)
  x, t = _normalized(image_emb, class_emb)
  prior = check_class_prior(class_prior, t.shape[0])
  kwargs = {"implicit": True, "threshold": INFERENCE_THRESHOLD,
            "max_iterations": INFERENCE_MAX_ITERATIONS, **sinkhorn_kwargs}
  return sinkhorn_log_plan(1.0 - x @ t.T, epsilon, b=prior, **kwargs)


def ot_zero_shot(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any, class_prior: Any = None,
                 **sinkhorn_kwargs: Any) -> jax.Array:
  """Predictions argmax_j P_ij of OT inference with a uniform or known class prior (Sec. 5)."""
  return jnp.argmax(ot_zero_shot_plan(image_emb, class_emb, epsilon, class_prior, **sinkhorn_kwargs), axis=1)


def fgw_zero_shot_plan(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any,
                       class_prior: Any = None, *, alpha: float = 0.5, num_outer: int = 10,
                       **sinkhorn_kwargs: Any) -> jax.Array:
  """log P of fused Gromov-Wasserstein matching of the image graph to the prompt graph (Sec. 5).

  The structure matrices are the within-set similarities X X^T (test images) and T T^T (classes).
  """
  check_positive("epsilon", epsilon)
  x, t = _normalized(image_emb, class_emb)
  prior = check_class_prior(class_prior, t.shape[0])
  kwargs = {"implicit": True, "threshold": INFERENCE_THRESHOLD,
            "max_iterations": INFERENCE_MAX_ITERATIONS, **sinkhorn_kwargs}
  return fgw_log_plan(1.0 - x @ t.T, x, t, epsilon, b=prior, alpha=alpha,
                      num_outer=num_outer, **kwargs)


def fgw_zero_shot(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any, class_prior: Any = None,
                  **kwargs: Any) -> jax.Array:
  """Predictions argmax_j P_ij of FGW inference (Sec. 5)."""
  return jnp.argmax(fgw_zero_shot_plan(image_emb, class_emb, epsilon, class_prior, **kwargs), axis=1)
