"""Float32 tolerances that follow from the computation, not from what one machine produced.

XLA:CPU picks its kernels by CPU features (AVX-512, AVX2, FMA), by thread count and by how it
fuses each program; numpy's OpenBLAS does the same. So one float32 computation on two machines,
or two routes to the same value on one machine, agree only up to rounding, and where the
rounding lands differs between machines. A bound in a test is therefore the rounding error the
computation can make, from its shape:

* A sum or dot product of ``n`` terms, in any order, with or without FMA:
  ``|fl(s) - s| <= gamma(n) * sum|terms|`` with ``gamma(n) = n u / (1 - n u)`` and ``u = eps / 2``
  (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 3.5 and Sec. 3.1).
  ``dot_atol`` gives that bound; ``ops_rtol(n)`` is ``gamma(n)`` for a well-conditioned result
  (terms of one sign, so the bound is relative to the result).
* A value computed in the log domain from exponents of size ``M`` (logsumexp, softmax, Sinkhorn
  potentials): rounding an exponent of size ``M`` moves it by up to ``M u``, and a log-sum-exp
  passes that through as an *absolute* error. ``log_domain_atol(M, n)`` is ``M u`` per rounding
  step times the number ``n`` of steps an exponent goes through (its dot product, the scaling,
  the iterations that update it).
* ``k`` steps of a computation (training steps, solver iterations) add their errors: ``k`` times
  the bound of one step; no contraction is assumed.

The helpers multiply each bound by ``safety`` = 2: XLA approximates exp, log and tanh to within
about 2 ulps rather than the half ulp of a correctly rounded operation. The bounds are worst
cases (errors of one sign in every operation), so a failure means a real difference, not noise;
no tolerance here is a value fitted to one run.
Bit equality is asserted only where it is a property of the code (the same program run twice on
one machine, a copy, a checkpoint restore, integer or masked arithmetic); those tests say so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23, the spacing of float32 numbers at 1.0
U32 = EPS32 / 2                          # unit roundoff of round-to-nearest


def gamma(n: int, u: float = U32) -> float:
  """Higham's ``gamma_n = n u / (1 - n u)``: the relative error bound of ``n`` rounded operations."""
  assert n * u < 1, n
  return n * u / (1 - n * u)


def ops_rtol(n: int, safety: float = 2.0) -> float:
  """Relative tolerance for a well-conditioned float32 result of ``n`` rounded operations in a chain."""
  return safety * gamma(n)


def dot_atol(n: int, abs_sum: float, safety: float = 2.0) -> float:
  """Absolute tolerance for a float32 sum/dot of ``n`` terms whose magnitudes add up to ``abs_sum``."""
  return safety * gamma(n) * abs_sum


def log_domain_atol(max_exponent: float, n: int = 1, safety: float = 2.0) -> float:
  """Absolute tolerance for a float32 value formed as ``log sum exp`` of exponents up to ``max_exponent``.

  ``n`` is the number of rounded operations an exponent goes through before the log-sum-exp (e.g.
  the length of the dot product behind a similarity, plus Sinkhorn's potential updates).
  """
  return safety * gamma(n) * max(abs(max_exponent), 1.0)


def steps_tol(steps: int, ops_per_step: int, scale: float = 1.0, safety: float = 2.0) -> dict[str, float]:
  """``rtol``/``atol`` for parameters after ``steps`` steps computed by two programs.

  Each step rounds ``ops_per_step`` operations per parameter (its forward and backward dot products,
  the batch mean, the optimizer); the error of one step is carried into the next and the next
  step's adds to it. ``scale`` is the parameters' magnitude, for entries that pass near zero.
  """
  tol = ops_rtol(steps * ops_per_step, safety)
  return {"rtol": tol, "atol": tol * scale}


def assert_close_to_scale(actual: Any, desired: Any, tol: float, err_msg: str = "") -> None:
  """``|actual - desired| <= tol * max|desired|``, leaf by leaf for pytrees.

  The rounding error of a sum is relative to the size of what it sums, not to each result: an
  output entry that comes out near zero carries the error of its O(max) terms. So a bound derived
  from the computation is an absolute one, at the scale of the largest entry.
  """
  import jax  # pylint: disable=import-outside-toplevel

  def check(a, d):
    d = np.asarray(d, np.float64)
    scale = float(np.abs(d).max()) if d.size else 0.0
    np.testing.assert_allclose(np.asarray(a, np.float64), d, rtol=0, atol=tol * scale, err_msg=err_msg)

  jax.tree.map(check, actual, desired)


def top2_margin(scores: Any, axis: int = -1) -> float:
  """The smallest gap between the best and second-best score along ``axis``.

  An argmax computed by two float32 routes is the same integer wherever this gap exceeds the two
  routes' rounding bound; tests comparing predictions assert that first, so that their equality
  is a property of the data and not of one machine's rounding.
  """
  s = np.sort(np.asarray(scores, np.float64), axis=axis)
  return float(np.min(np.take(s, -1, axis) - np.take(s, -2, axis)))


# --- bfloat16 compute (compute_dtype="bfloat16") ----------------------------------------------

EPS_BF16 = 2.0**-7  # the spacing of bfloat16 numbers at 1.0: 8 significant bits (7 stored + 1 implicit)
U_BF16 = EPS_BF16 / 2  # unit roundoff of round-to-nearest, 2**-8 ~ 3.9e-3

# A first-step loss computed in bfloat16 vs in float32 (``tests/train/test_compute_dtype.py``). The
# bfloat16 step rounds the params, the batch and every activation once to bfloat16 (relative error
# <= U_BF16 each); matmuls accumulate in float32 and the losses reduce in float32, so those add only
# float32 rounding (~1e-7). The loss is a smooth function of the rounded values whose relative
# sensitivity to each layer's values is O(1) at initialisation (inputs and activations of unit
# scale, losses normalised by the batch), so each layer contributes at most ~U_BF16 of relative
# change, of independent sign. The tiny configs have a handful of such layers; we allow 4 U_BF16
# (two roundings per layer, operand and result, times the safety factor 2 used above) = 2**-6 ~ 1.6e-2,
# the "~1e-2 for 8 significant bits" of a bfloat16 loss. It is not a worst case for deep networks
# (there the per-layer terms would add up to depth x U_BF16); the measured deviations are 10-100x below it.
BF16_LOSS_RTOL = 4 * U_BF16
