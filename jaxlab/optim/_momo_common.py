"""Pieces shared by MoMo and MoMo-Adam: argument checks, tree reductions, the Polyak step.

Schaipp, Ohana, Eickenberg, Defazio, Gower. "MoMo: Momentum Models for Adaptive Learning
Rates", ICML 2024 (arXiv 2305.07583).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax


def check_range(
    opt: str,
    name: str,
    value: Any,
    low: float,
    high: float | None = None,
) -> None:
  """Raises ValueError unless ``low <= value`` (and ``value < high`` if given).

  Schedules and traced values (``inject_hyperparams`` under jit) cannot be checked here and are
  passed through; they were checked when the transform was first built with concrete values.
  """
  if callable(value) or isinstance(value, jax.core.Tracer):
    return
  v = float(value)
  if high is None and not v >= low:  # `not >=` also rejects NaN.
    raise ValueError(f"{opt}: {name} must be >= {low}, got {v}")
  if high is not None and not low <= v < high:
    raise ValueError(f"{opt}: {name} must be in [{low}, {high}), got {v}")


def check_update_args(opt: str, params: Any, value: Any) -> jax.Array:
  """Validates ``update``'s params and loss; returns the loss as a scalar array."""
  if params is None:
    raise ValueError(
        f"{opt} needs the current params: call update(grads, state, params, value=loss)."
    )
  if value is None:
    raise ValueError(
        f"{opt} needs the current (batch) loss: call update(grads, state, params, value=loss),"
        " e.g. with loss from jax.value_and_grad."
    )
  value = jnp.asarray(value)
  if value.ndim != 0:
    raise ValueError(f"{opt}: value must be a scalar loss, got shape {value.shape}")
  return value


def scalar_dtype(params: optax.Params) -> jnp.dtype:
  """Dtype of the scalar state and reductions: at least f32 (bf16 params), f64 for f64 params."""
  return jnp.promote_types(jnp.float32, optax.tree.dtype(params, "highest"))


def cast(x: Any, dtype: jnp.dtype) -> jax.Array:
  return jnp.asarray(x, dtype)


def is_zero(x: Any) -> bool:
  """True for a concrete Python zero, so zero weight decay costs no extra pass over params."""
  return isinstance(x, (int, float)) and x == 0


def tree_vdot(a: optax.Updates, b: optax.Updates, dtype: jnp.dtype) -> jax.Array:
  """<a, b> over all leaves, accumulated in ``dtype`` (f32 for bf16 leaves)."""
  parts = jax.tree.map(lambda x, y: jnp.sum(x.astype(dtype) * y.astype(dtype)), a, b)
  return sum(jax.tree.leaves(parts), start=jnp.zeros([], dtype))


def ema(avg: jax.Array, new: jax.Array, beta: jax.Array) -> jax.Array:
  """beta * avg + (1 - beta) * new, kept in avg's dtype (beta may be a traced f32)."""
  return (beta * avg + (1 - beta) * new).astype(avg.dtype)


def polyak_step(
    *,
    barf: jax.Array,
    gamma: jax.Array,
    iprod: jax.Array,
    sq_norm: jax.Array,
    lb: jax.Array,
    lb_floor: jax.Array,
    alpha: jax.Array,
    weight_decay: jax.Array,
    rho: jax.Array,
    adapt_lower_bound: bool,
) -> tuple[jax.Array, jax.Array]:
  r"""MoMo's truncated-model step size and (optionally) the MoMo* lower-bound update.

  With :math:`\omega = 1 + \alpha\lambda` and :math:`h = \bar f - \gamma + \langle d, x\rangle`
  (Schaipp et al., 2024, Alg. 1 and 2; the official code's ``use_fstar`` for MoMo*):

  .. math::
    \text{(MoMo*, reset)}\quad
    c = \omega(\bar f - \gamma) + \langle d, x\rangle,\;
    \text{if } c < \omega\rho\,\mathrm{lb}:\ \mathrm{lb} \leftarrow
    \max\!\big(c / (2\omega\rho),\ \mathrm{lb}_0\big) \\
    \tau = \min\Big(\frac{\alpha}{\rho},\
      \frac{[\omega(\bar f - \rho\,\mathrm{lb} - \gamma) + \langle d, x\rangle]_+}
           {\|d\|^2_{D}}\Big) \\
    \text{(MoMo*, next)}\quad
    \mathrm{lb}' = \max\!\big((h - \tfrac12\tau\|d\|^2_D)/\rho,\ \mathrm{lb}_0\big)

  Returns ``(tau, lb')``; without ``adapt_lower_bound`` ``lb'`` is ``lb``. A zero direction
  (``sq_norm == 0``) gives ``tau = 0``: the step ``tau * d`` is zero anyway, and this avoids 0/0.
  """
  omega = 1 + alpha * weight_decay
  if adapt_lower_bound:
    cap = omega * (barf - gamma) + iprod
    lb = jnp.where(cap < omega * rho * lb, jnp.maximum(cap / (2 * omega * rho), lb_floor), lb)
  numer = jnp.maximum(omega * (barf - rho * lb - gamma) + iprod, 0.0)
  positive = sq_norm > 0
  ratio = jnp.where(positive, numer / jnp.where(positive, sq_norm, 1.0), 0.0)
  tau = jnp.minimum(alpha / rho, ratio)
  if adapt_lower_bound:
    h = barf - gamma + iprod
    lb = jnp.maximum((h - 0.5 * tau * sq_norm) / rho, lb_floor)
  return tau.astype(barf.dtype), lb.astype(barf.dtype)
