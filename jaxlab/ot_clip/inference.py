"""Zero-shot classification: argmax of similarities, and OT-CLIP's transductive OT / FGW inference.

Shi, Fan & Yan, ICML 2024, Sec. 5 ("rethinking inference"): instead of labelling each test image
alone, couple the whole test set with the class prompts by an entropic OT plan whose class
marginal is a class prior (uniform, or the known label distribution of a long-tailed test set),
and predict argmax_j P_ij. Since P_ij is proportional to exp((g_j - C_ij) / eps) within a row, OT
inference is argmax similarity with a per-class offset g_j chosen so that the predicted label
histogram matches the prior. FGW inference (Sec. 5) adds the Gromov term so that similar test
images are sent to similar classes (graph matching between the image graph and the prompt graph).

The temperature: every OT function takes exactly one of ``epsilon`` (the entropic regulariser,
in (0, 1]) or ``logit_scale`` (= 1 / epsilon, in [1, inf)); the third positional argument is
``epsilon``. The two ranges meet only at 1, where both mean the same, so a logit scale passed as
epsilon (e.g. 14.3 or 100) or an epsilon passed as logit_scale (e.g. 0.05) is always an
InputError (that names the other argument), never a silently flat plan. Costs are 1 - cosine in
[0, 2], so epsilon > 1 would make the plan nearly independent of the images anyway; trained
CLIP scales lie in [1, 100] (open_clip clamps them there). Under jit a traced epsilon or scale
cannot be range-checked in Python: outside its range every prediction is -1 (plans are NaN).

Bad rows: an image embedding with a NaN or inf entry gets prediction -1 and no mass in the
transport (the other images share the mass, so their predictions are those of the problem
without that image). Class embeddings must be finite: InputError when concrete; under jit a
non-finite class embedding, or a traced class prior that is not a distribution, makes every
prediction -1.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError, check_option_names, check_range, check_scalar, is_traced
from jaxlab.ot_clip.checks import check_embeddings, compute_dtype
from jaxlab.ot_clip.gromov import fgw_log_plan
from jaxlab.ot_clip.plans import sinkhorn_log_plan
from jaxlab.ot_clip.similarity import gather_batch, l2_normalize

# Inference solves to a tolerance (nothing is differentiated); these bound the work.
INFERENCE_THRESHOLD = 1e-5
INFERENCE_MAX_ITERATIONS = 2000
# Options an inference function passes on to ``plans.sinkhorn_log_plan``.
SOLVER_OPTIONS = ("implicit", "use_ott", "num_iterations", "threshold", "max_iterations")
PRIOR_SUM_ATOL = 1e-4


def check_class_prior(prior: Any, num_classes: int, dtype: Any = jnp.float32) -> jax.Array:
  """Uniform if ``prior`` is None; else the prior in ``dtype``, InputError unless a distribution.

  Shape (num_classes,) is always checked; values (finite, >= 0, sum 1 within 1e-4) when concrete.
  A traced prior is returned as is: callers mask their output with ``prior_is_valid``.
  """
  if prior is None:
    return jnp.full((num_classes,), 1.0 / num_classes, dtype)
  shape = tuple(np.shape(prior))
  if shape != (num_classes,):
    raise InputError(f"class_prior has shape {shape}, expected ({num_classes},) for {num_classes} classes")
  if is_traced(prior):
    return prior.astype(dtype)
  arr = np.asarray(prior, np.float64)
  if not np.all(np.isfinite(arr)):
    raise InputError(f"class_prior must be finite, got {arr[~np.isfinite(arr)][0]} at index "
                     f"{int(np.flatnonzero(~np.isfinite(arr))[0])}")
  if np.any(arr < 0):
    raise InputError(f"class_prior must be non-negative and sum to 1, got {arr[arr < 0][0]:.6g} at index "
                     f"{int(np.flatnonzero(arr < 0)[0])}")
  if not np.isclose(arr.sum(), 1.0, rtol=0.0, atol=PRIOR_SUM_ATOL):
    raise InputError(f"class_prior must be non-negative and sum to 1, got sum {arr.sum():.6g}")
  return jnp.asarray(arr, dtype)


def prior_is_valid(prior: jax.Array) -> jax.Array:
  """Traced check of what ``check_class_prior`` checks on concrete priors."""
  return (jnp.all(jnp.isfinite(prior)) & jnp.all(prior >= 0)
          & (jnp.abs(jnp.sum(prior) - 1.0) <= PRIOR_SUM_ATOL))


def resolve_epsilon(epsilon: Any, logit_scale: Any) -> tuple[Any, Any]:
  """(epsilon, valid) from exactly one of ``epsilon`` in (0, 1] or ``logit_scale`` in [1, inf).

  ``valid`` is True for a concrete value (a bad one raised InputError) and a traced bool otherwise.
  """
  if (epsilon is None) == (logit_scale is None):
    raise InputError("pass exactly one of epsilon= (the entropic regulariser, in (0, 1]) or logit_scale= "
                     f"(= 1/epsilon, >= 1); got epsilon={epsilon!r}, logit_scale={logit_scale!r}")
  name, value = ("epsilon", epsilon) if epsilon is not None else ("logit_scale", logit_scale)
  check_scalar(value, name)
  if is_traced(value):
    valid = (value > 0) & (value <= 1) if name == "epsilon" else (value >= 1) & jnp.isfinite(value)
    return (value if name == "epsilon" else 1.0 / value), valid
  if name == "epsilon":
    try:
      check_range(value, "epsilon", 0, 1, low_open=True, got=True)
    except InputError as e:
      hint = (f"; {float(value):g} looks like a logit scale: pass logit_scale={float(value):g} (epsilon = "
              f"1/logit_scale = {1 / float(value):.4g})" if _as_float(value) > 1 and np.isfinite(_as_float(value)) else "")
      raise InputError(f"{e}{hint}") from None
    return value, True
  try:
    check_range(value, "logit_scale", 1, math.inf, high_open=True, got=True)
  except InputError as e:
    hint = (f"; {float(value):g} looks like an epsilon: pass epsilon={float(value):g} (logit_scale = "
            f"1/epsilon = {1 / float(value):.4g})" if 0 < _as_float(value) < 1 else "")
    raise InputError(f"{e}{hint}") from None
  return 1.0 / float(value), True


def _as_float(value: Any) -> float:
  try:
    return float(value)
  except (TypeError, ValueError):
    return float("nan")


class Prepared(NamedTuple):
  """Checked, gathered, normalised inputs of one inference problem."""
  images: jax.Array      # [N, d], non-finite rows zeroed
  classes: jax.Array     # [K, d], non-finite rows zeroed
  image_mass: jax.Array  # [N]: 1 / (number of finite rows) on finite rows, 0 on the others
  prior: jax.Array       # [K]
  row_ok: jax.Array      # [N] bool: the image embedding is finite
  all_ok: Any            # scalar bool (traced) or True: temperature, classes and prior are valid


def prepare(image_emb: Any, class_emb: Any, class_prior: Any = None, *, epsilon: Any = None,
            logit_scale: Any = None, need_temperature: bool = True) -> tuple[Prepared, Any]:
  """Checks and prepares one problem; returns (Prepared, epsilon in the compute dtype or None).

  Inputs are all-gathered when their type carries an explicit sharding (``jax.make_mesh``'s
  default axes), as the losses do: the plan couples every image with every class.
  """
  eps, valid = resolve_epsilon(epsilon, logit_scale) if need_temperature else (None, True)
  check_embeddings(image_emb, class_emb, same_batch=False, names=("image", "class"))
  x, t = jnp.asarray(image_emb), jnp.asarray(class_emb)
  dtype = compute_dtype(x, t)
  x, t = gather_batch(x).astype(dtype), gather_batch(t).astype(dtype)
  if not is_traced(t):
    bad = np.flatnonzero(~np.all(np.isfinite(np.asarray(t)), axis=1))
    if bad.size:
      raise InputError(f"class embeddings must be finite, got a NaN or inf in class row {int(bad[0])} "
                       f"(of {t.shape[0]})")
  prior = check_class_prior(class_prior, t.shape[0], dtype)
  row_ok = jnp.all(jnp.isfinite(x), axis=1)
  class_ok = jnp.all(jnp.isfinite(t))
  all_ok = valid & class_ok & (prior_is_valid(prior) if is_traced(prior) else True)
  x = l2_normalize(jnp.where(row_ok[:, None], x, 0.0))
  t = l2_normalize(jnp.where(jnp.isfinite(t), t, 0.0))
  mass = row_ok.astype(dtype) / jnp.maximum(jnp.sum(row_ok), 1).astype(dtype)
  if eps is not None:
    eps = jnp.asarray(eps, dtype)
  return Prepared(x, t, mass, prior, row_ok, all_ok), eps


def mask_plan(log_plan: jax.Array, p: Prepared) -> jax.Array:
  """-inf rows for bad images; NaN everywhere if the problem itself is invalid (traced inputs)."""
  log_plan = jnp.where(p.row_ok[:, None], log_plan, -jnp.inf)
  return jnp.where(p.all_ok, log_plan, jnp.nan)


def predict_from_plan(log_plan: jax.Array) -> jax.Array:
  """argmax_j P_ij, or -1 for a row with no finite entry or with a NaN (a masked image)."""
  ok = jnp.any(jnp.isfinite(log_plan), axis=1) & ~jnp.any(jnp.isnan(log_plan), axis=1)
  return jnp.where(ok, jnp.argmax(log_plan, axis=1), -1)


def solver_options(where: str, options: dict[str, Any]) -> dict[str, Any]:
  check_option_names(options, where, SOLVER_OPTIONS)
  return {"implicit": True, "threshold": INFERENCE_THRESHOLD, "max_iterations": INFERENCE_MAX_ITERATIONS,
          **options}


def zero_shot_predict(image_emb: jax.Array, class_emb: jax.Array) -> jax.Array:
  """CLIP's zero-shot rule: argmax_j <x_i, t_j> (Radford et al. 2021, Sec. 3.1.1).

  -1 for an image embedding with a NaN or inf entry (see the module docstring).
  """
  p, _ = prepare(image_emb, class_emb, need_temperature=False)
  return jnp.where(p.row_ok & p.all_ok, jnp.argmax(p.images @ p.classes.T, axis=1), -1)


def ot_zero_shot_plan(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any = None,
                      class_prior: Any = None, *, logit_scale: Any = None, **solver_kwargs: Any) -> jax.Array:
  """log P of the entropic plan between the test images (mass 1/N each) and the classes (prior).

  Exactly one of ``epsilon`` / ``logit_scale`` (module docstring). Rows of non-finite images are
  -inf (no mass); the other images share the mass 1. ``solver_kwargs``: implicit, use_ott,
  num_iterations, threshold, max_iterations (default: ott's Sinkhorn solved to 1e-5).
  """
  p, eps = prepare(image_emb, class_emb, class_prior, epsilon=epsilon, logit_scale=logit_scale)
  log_plan = sinkhorn_log_plan(1.0 - p.images @ p.classes.T, eps, p.image_mass, p.prior,
                               **solver_options("ot_zero_shot", solver_kwargs))
  return mask_plan(log_plan, p)


def ot_zero_shot(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any = None, class_prior: Any = None,
                 *, logit_scale: Any = None, **solver_kwargs: Any) -> jax.Array:
  """Predictions argmax_j P_ij of OT inference with a uniform or known class prior (Sec. 5).

  -1 for non-finite images (and for every image when a traced input is invalid).
  """
  return predict_from_plan(ot_zero_shot_plan(image_emb, class_emb, epsilon, class_prior,
                                             logit_scale=logit_scale, **solver_kwargs))


def fgw_zero_shot_plan(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any = None,
                       class_prior: Any = None, *, logit_scale: Any = None, alpha: float = 0.5,
                       num_outer: int = 10, **solver_kwargs: Any) -> jax.Array:
  """log P of fused Gromov-Wasserstein matching of the image graph to the prompt graph (Sec. 5).

  The structure matrices are the within-set similarities X X^T (test images) and T T^T (classes).
  alpha in [0, 1], num_outer >= 1; bad rows and the temperature as in ``ot_zero_shot_plan``.
  """
  p, eps = prepare(image_emb, class_emb, class_prior, epsilon=epsilon, logit_scale=logit_scale)
  log_plan = fgw_log_plan(1.0 - p.images @ p.classes.T, p.images, p.classes, eps, p.image_mass, p.prior,
                          alpha=alpha, num_outer=num_outer, **solver_options("fgw_zero_shot", solver_kwargs))
  return mask_plan(log_plan, p)


def fgw_zero_shot(image_emb: jax.Array, class_emb: jax.Array, epsilon: Any = None, class_prior: Any = None,
                  *, logit_scale: Any = None, **kwargs: Any) -> jax.Array:
  """Predictions argmax_j P_ij of FGW inference (Sec. 5); -1 as in ``ot_zero_shot``."""
  return predict_from_plan(fgw_zero_shot_plan(image_emb, class_emb, epsilon, class_prior,
                                              logit_scale=logit_scale, **kwargs))
