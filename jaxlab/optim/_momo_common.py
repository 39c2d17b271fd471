"""Pieces shared by MoMo and MoMo-Adam: the params/loss checks, tree reductions, the Polyak step.

Schaipp, Ohana, Eickenberg, Defazio, Gower. "MoMo: Momentum Models for Adaptive Learning
Rates", ICML 2024 (arXiv 2305.07583).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from jaxlab.errors import InputError


def check_float_params(opt: str, params: Any) -> None:
  """Integer params would truncate every update to 0."""
  for leaf in jax.tree.leaves(params):
    if not jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
      raise InputError(f"{opt}: params must be floating point, got a {jnp.result_type(leaf)} leaf of "
                       f"shape {jnp.shape(leaf)} (integer params would truncate every update to 0)")


def check_update_args(opt: str, params: Any, value: Any) -> jax.Array:
  """Validates ``update``'s params and loss; returns the loss as a scalar array."""
  if params is None:
    raise InputError(
        f"{opt} needs the current params: call update(grads, state, params, value=loss)."
    )
  if value is None:
    raise InputError(
        f"{opt} needs the current (batch) loss: call update(grads, state, params, value=loss),"
        " e.g. with loss from jax.value_and_grad."
    )
  value = jnp.asarray(value)
  if value.ndim != 0:
    raise InputError(f"{opt}: value must be a scalar loss, got shape {value.shape}")
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
    masked: tuple[jax.Array, jax.Array] | None = None,
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

  With a weight-decay mask, :math:`\omega_i = 1 + \alpha\lambda m_i` differs per coordinate and
  ``masked = (<d, x/omega>, ||d||^2_{D omega})``; the closed form of the same proximal step is then
  :math:`\tau = \min(\alpha/\rho, [\bar f - \rho\,\mathrm{lb} - \gamma + \langle d, x/\omega\rangle]_+
  / \|d\|^2_{D\omega})` (equal to the above when :math:`\omega` is uniform), and the reset tests
  :math:`\bar f - \gamma + \langle d, x/\omega\rangle < \rho\,\mathrm{lb}`.

  Returns ``(tau, lb')``; without ``adapt_lower_bound`` ``lb'`` is ``lb``. A zero direction
  (``sq_norm == 0``) gives ``tau = 0``: the step ``tau * d`` is zero anyway, and this avoids 0/0.
  """
  if masked is None:
    omega = 1 + alpha * weight_decay
    if adapt_lower_bound:
      cap = omega * (barf - gamma) + iprod
      lb = jnp.where(cap < omega * rho * lb, jnp.maximum(cap / (2 * omega * rho), lb_floor), lb)
    numer = jnp.maximum(omega * (barf - rho * lb - gamma) + iprod, 0.0)
    denom = sq_norm
  else:
    iprod_w, denom = masked
    if adapt_lower_bound:
      cap = barf - gamma + iprod_w
      lb = jnp.where(cap < rho * lb, jnp.maximum(cap / (2 * rho), lb_floor), lb)
    numer = jnp.maximum(barf - rho * lb - gamma + iprod_w, 0.0)
  positive = denom > 0
  ratio = jnp.where(positive, numer / jnp.where(positive, denom, 1.0), 0.0)
  tau = jnp.minimum(alpha / rho, ratio)
  if adapt_lower_bound:
    h = barf - gamma + iprod
    lb = jnp.maximum((h - 0.5 * tau * sq_norm) / rho, lb_floor)
  return tau.astype(barf.dtype), lb.astype(barf.dtype)


def resolve_mask(mask: Any, params: optax.Params) -> Any | None:
  """A tree of bools like ``params`` (``mask`` may be one, or a callable of params), or None."""
  if mask is None:
    return None
  tree = mask(params) if callable(mask) else mask
  if jax.tree.structure(tree) != jax.tree.structure(params):
    raise InputError(f"weight-decay mask must have the structure of params: got {jax.tree.structure(tree)}, "
                     f"params are {jax.tree.structure(params)}")
  return jax.tree.map(bool, tree)


def tree_cast(tree: Any, dtype: Any | None) -> Any:
  return tree if dtype is None else jax.tree.map(lambda x: x.astype(dtype), tree)
