"""MoMo and MoMo-Adam: momentum methods with a model-based (Polyak-type) adaptive step.

Schaipp, Ohana, Eickenberg, Defazio, Gower. "MoMo: Momentum Models for Adaptive Learning
Rates", ICML 2024 (arXiv 2305.07583). Follows the official PyTorch code (fabian-sp/MoMo,
``momo-opt`` 0.1.0) step for step, including its proximal weight decay
``x <- (x - tau d / D) / (1 + alpha lambda)``, which ``optax.contrib`` approximates differently.
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from jaxlab.errors import (InputError, JaxlabRuntimeWarning, check, check_bool, check_positive, check_range, is_real,
                           is_traced, warn)
from jaxlab.optim import _momo_common as common
from jaxlab.optim.schedules import check_schedule_nonnegative

WeightDecayMode = Literal["divide", "adamw"]


def _check_learning_rate(opt: str, learning_rate: optax.ScalarOrSchedule) -> None:
  """A number must be finite and >= 0; a schedule too, at a few concrete steps (a negative cap ascends)."""
  if callable(learning_rate):
    check_schedule_nonnegative(learning_rate, f"{opt}: learning_rate")
  else:
    check_range(learning_rate, f"{opt}: learning_rate", 0.0, got=True)


def momo_frozen(state: MomoState | MomoAdamState, value: jax.Array) -> jax.Array:
  """Whether MoMo's last step was frozen by its lower bound: ``step_size == 0`` with ``lb > value``.

  A lower bound above the loss makes the truncated model's step ``[f - lb + ...]_+`` zero, so
  the parameters stop moving without an error. Under ``jit`` nothing can be raised, so the state
  carries what tells it (``step_size`` and ``lb``) and this reads it (cheaply: two scalar
  comparisons, traced or not); called eagerly, ``update`` also warns once by itself. The remedy
  is a lower ``lower_bound`` or ``adapt_lower_bound=True``.

  Args:
    state: the state :func:`momo` or :func:`momo_adam` returned from ``update``.
    value: the loss passed to that ``update``.

  Returns:
    A bool scalar array.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxlab.optim import momo, momo_frozen
    >>> opt = momo(lower_bound=5.0)  # above the loss, 3.0
    >>> x = jnp.ones(3); state = opt.init(x)
    >>> loss, g = jax.value_and_grad(lambda x: jnp.sum(x**2))(x)
    >>> step = jax.jit(lambda g, state, x, loss: opt.update(g, state, x, value=loss))
    >>> u, state = step(g, state, x, loss)
    >>> bool(momo_frozen(state, loss)), float(state.step_size)
    (True, 0.0)
  """
  return (state.step_size == 0) & (state.lb > jnp.asarray(value, state.lb.dtype))


def _warn_if_frozen(opt: str, warned: list[bool], state: MomoState | MomoAdamState, value: jax.Array) -> None:
  """Eager use only (concrete values): say once that the lower bound froze the parameters."""
  if warned[0] or any(is_traced(x) for x in (state.step_size, state.lb, value)):
    return
  if bool(momo_frozen(state, value)):
    warned[0] = True
    warn(f"{opt}: step_size=0 with lower bound lb={float(state.lb):g} above the loss {float(value):g}: "
         "the parameters are not moving; lower lower_bound (or set adapt_lower_bound=True)", JaxlabRuntimeWarning)


def _check_lower_bound(opt: str, lower_bound: Any) -> None:
  """MoMo's lower bound on the loss may be any finite number (negative too); a traced one passes."""
  if is_traced(lower_bound):
    return
  check(is_real(lower_bound), f"{opt}: lower_bound must be a number, got {lower_bound!r}")
  check(math.isfinite(lower_bound), f"{opt}: lower_bound must be finite, got {float(lower_bound)}")


class MomoState(NamedTuple):
  """State of :func:`momo`. Scalars are float32 (float64 only for float64 params)."""

  count: jax.Array  # shape=(), int32: steps taken so far.
  exp_avg: optax.Updates  # d_k, tree like params, in the params' dtype.
  barf: jax.Array  # shape=(), float32: running average of losses, \bar f_k.
  gamma: jax.Array  # shape=(), float32: running average of <g_k, x_k>.
  lb: jax.Array  # shape=(), float32: lower-bound estimate used at the next step.
  step_size: jax.Array  # shape=(), float32: last adaptive step tau_k (a train-step metric); 0 with lb > loss: frozen.


class MomoAdamState(NamedTuple):
  """State of :func:`momo_adam`. Scalars are float32 (float64 only for float64 params)."""

  count: jax.Array  # shape=(), int32: steps taken so far.
  exp_avg: optax.Updates  # d_k (first moment), tree like params, in the params' dtype.
  exp_avg_sq: optax.Updates  # v_k (second moment), tree like params, in the params' dtype.
  barf: jax.Array  # shape=(), float32: running average of losses, \bar f_k.
  gamma: jax.Array  # shape=(), float32: running average of <g_k, x_k>.
  lb: jax.Array  # shape=(), float32: lower-bound estimate used at the next step.
  step_size: jax.Array  # shape=(), float32: last adaptive step tau_k (a train-step metric); 0 with lb > loss: frozen.


def _learning_rate(
    learning_rate: optax.ScalarOrSchedule, count: jax.Array, dtype: jnp.dtype
) -> jax.Array:
  return common.cast(learning_rate(count) if callable(learning_rate) else learning_rate, dtype)


def _scalar_state(params: optax.Params, lower_bound: Any) -> dict[str, jax.Array]:
  # f32 even for bf16 params: tau is a ratio of reductions that bf16 would round badly.
  dtype = common.scalar_dtype(params)
  # One array per field: a shared buffer cannot be donated twice by a jitted train step.
  return dict(barf=jnp.zeros([], dtype), gamma=jnp.zeros([], dtype),
              lb=jnp.array(lower_bound, dtype), step_size=jnp.zeros([], dtype))


def momo(
    learning_rate: optax.ScalarOrSchedule = 1.0,
    beta: float = 0.9,
    lower_bound: float = 0.0,
    weight_decay: float = 0.0,
    adapt_lower_bound: bool = False,
    bias_correction: bool = False,
    mu_dtype: Optional[Any] = None,
    mask: Optional[Any] = None,
) -> optax.GradientTransformationExtraArgs:
  r"""MoMo: SGD with momentum and a model-based adaptive step (Schaipp et al., 2024, Alg. 1).

  With loss :math:`f_k`, gradient :math:`g_k` at :math:`x_k`, learning rate :math:`\alpha_k`,
  weight decay :math:`\lambda` and lower bound :math:`\mathrm{lb}`:

  .. math::
    \bar f_k = \beta \bar f_{k-1} + (1-\beta) f_k, \quad
    d_k = \beta d_{k-1} + (1-\beta) g_k, \quad
    \gamma_k = \beta \gamma_{k-1} + (1-\beta) \langle g_k, x_k \rangle \\
    \tau_k = \min\Big(\frac{\alpha_k}{\rho_k},\
      \frac{[(1+\alpha_k\lambda)(\bar f_k - \rho_k \mathrm{lb} - \gamma_k)
             + \langle d_k, x_k\rangle]_+}{\|d_k\|^2}\Big), \quad
    x_{k+1} = \frac{x_k - \tau_k d_k}{1 + \alpha_k \lambda}

  By default the averages start at the first step's values and :math:`\rho_k = 1`; with
  ``bias_correction`` they start at zero and :math:`\rho_k = 1 - \beta^k`. With
  ``adapt_lower_bound`` the lower bound is estimated online (MoMo*, the official ``use_fstar``),
  never below ``lower_bound``. Without weight decay and bias correction this equals
  ``optax.contrib.momo``; with weight decay optax uses ``x/(1+alpha lambda) - tau d`` instead.

  The state keeps the last :math:`\tau_k` in ``step_size`` and the bound in ``lb``: ``step_size == 0``
  with ``lb`` above the loss means the bound froze the parameters (:func:`momo_frozen` reads it;
  an eager ``update`` also warns once). A schedule as ``learning_rate`` is checked at a few steps
  when the transform is built (a negative value is refused).

  Args:
    learning_rate: cap :math:`\alpha` on the step (a float or an optax schedule of the step).
    beta: momentum coefficient, in [0, 1).
    lower_bound: lower bound of the loss; 0 suits most non-negative losses.
    weight_decay: :math:`\lambda \ge 0`, applied proximally.
    adapt_lower_bound: estimate the lower bound on the fly (MoMo*).
    bias_correction: zero-initialised averages with :math:`\rho_k = 1-\beta^k`.
    mu_dtype: dtype of the momentum :math:`d_k` (default: the params'). Use ``jnp.float32``
      with bf16 params.
    mask: weight decay only where the mask is True: a pytree of bools like params, or a
      callable ``params -> mask`` (e.g. no decay on biases and norm scales). Masked-out
      coordinates have :math:`\omega = 1` in the same proximal step (see ``polyak_step``).

  Returns:
    An ``optax.GradientTransformationExtraArgs``; call
    ``update(grads, state, params, value=loss)`` and apply with ``optax.apply_updates``.

  Examples:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxlab.optim import momo
    >>> f = lambda x: jnp.sum((x - 1.0) ** 2)
    >>> opt = momo(learning_rate=1.0)
    >>> x = jnp.zeros(3); state = opt.init(x)
    >>> loss, g = jax.value_and_grad(f)(x)
    >>> u, state = opt.update(g, state, x, value=loss)
    >>> x = optax.apply_updates(x, u)
    >>> print(x)  # step min(1, loss / |g|^2) = 3 / 12 along -g = (2, 2, 2)
    [0.5 0.5 0.5]

  References:
    Schaipp et al., `MoMo: Momentum Models for Adaptive Learning Rates
    <https://arxiv.org/abs/2305.07583>`_, ICML 2024.
  """
  _check_learning_rate("momo", learning_rate)
  check_range(beta, "momo: beta", 0.0, 1.0, high_open=True, got=True)
  check_range(weight_decay, "momo: weight_decay", 0.0, got=True)
  _check_lower_bound("momo", lower_bound)
  check_bool(adapt_lower_bound, "momo: adapt_lower_bound", got=True)
  check_bool(bias_correction, "momo: bias_correction", got=True)

  warned = [False]  # the eager frozen warning, once per transform

  def init_fn(params: optax.Params) -> MomoState:
    common.check_float_params("momo", params)
    return MomoState(
        count=jnp.zeros([], jnp.int32),
        exp_avg=optax.tree.zeros_like(params, dtype=mu_dtype),
        **_scalar_state(params, lower_bound),
    )

  def update_fn(
      grads: optax.Updates,
      state: MomoState,
      params: Optional[optax.Params] = None,
      *,
      value: Optional[jax.Array] = None,
      **extra_args: Any,
  ) -> tuple[optax.Updates, MomoState]:
    del extra_args
    loss = common.check_update_args("momo", params, value)
    dt = state.barf.dtype
    count = optax.safe_increment(state.count)
    b = common.cast(beta, dt)
    if bias_correction:
      bt, rho = b, 1 - b ** count.astype(dt)
    else:
      # No bias correction: the averages start at the first step's values (bt = 0).
      bt, rho = jnp.where(state.count == 0, jnp.zeros([], dt), b), jnp.ones([], dt)
    barf = common.ema(state.barf, loss.astype(dt), bt)
    exp_avg = jax.tree.map(lambda d, g: common.ema(d, g, bt), state.exp_avg, grads)
    gamma = common.ema(state.gamma, common.tree_vdot(grads, params, dt), bt)
    alpha = _learning_rate(learning_rate, state.count, dt)
    wd = common.cast(weight_decay, dt)
    decay = None if common.is_zero(weight_decay) else common.resolve_mask(mask, params)
    masked = None
    if decay is not None:  # per-leaf omega: 1 + alpha lambda where decayed, 1 elsewhere
      omega = jax.tree.map(lambda m: 1 + alpha * wd if m else jnp.ones([], dt), decay)
      masked = (common.tree_vdot(exp_avg, jax.tree.map(lambda x, w: x / w, params, omega), dt),
                common.tree_vdot(exp_avg, jax.tree.map(lambda d, w: d / w, exp_avg, omega), dt))
    tau, lb = common.polyak_step(
        barf=barf, gamma=gamma, iprod=common.tree_vdot(exp_avg, params, dt),
        sq_norm=common.tree_vdot(exp_avg, exp_avg, dt), lb=state.lb,
        lb_floor=common.cast(lower_bound, dt), alpha=alpha, weight_decay=wd, rho=rho,
        adapt_lower_bound=adapt_lower_bound, masked=masked)
    if common.is_zero(weight_decay):
      updates = jax.tree.map(lambda d, x: (-tau * d).astype(x.dtype), exp_avg, params)
    elif decay is None:
      # (x - tau d) / (1 + alpha lambda) - x, written so bf16 params lose no precision.
      updates = jax.tree.map(
          lambda d, x: (-(tau * d + alpha * wd * x) / (1 + alpha * wd)).astype(x.dtype),
          exp_avg, params)
    else:
      updates = jax.tree.map(
          lambda d, x, m: (-(tau * d + alpha * wd * x) / (1 + alpha * wd) if m else -tau * d).astype(x.dtype),
          exp_avg, params, decay)
    state = MomoState(count, exp_avg, barf, gamma, lb, tau)
    _warn_if_frozen("momo", warned, state, loss)
    return updates, state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def momo_adam(
    learning_rate: optax.ScalarOrSchedule = 1e-2,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    lower_bound: float = 0.0,
    weight_decay: float = 0.0,
    adapt_lower_bound: bool = False,
    weight_decay_mode: WeightDecayMode = "divide",
    mu_dtype: Optional[Any] = None,
    mask: Optional[Any] = None,
) -> optax.GradientTransformationExtraArgs:
  r"""MoMo-Adam: Adam with a model-based adaptive step (Schaipp et al., 2024, Alg. 2).

  Averages start at zero and are bias corrected, :math:`\rho_k = 1 - \beta_1^k`:

  .. math::
    \bar f_k = \beta_1 \bar f_{k-1} + (1-\beta_1) f_k, \quad
    d_k = \beta_1 d_{k-1} + (1-\beta_1) g_k, \quad
    \gamma_k = \beta_1 \gamma_{k-1} + (1-\beta_1) \langle g_k, x_k \rangle \\
    v_k = \beta_2 v_{k-1} + (1-\beta_2) g_k^2, \quad
    D_k = \sqrt{v_k / (1-\beta_2^k)} + \epsilon \\
    \tau_k = \min\Big(\frac{\alpha_k}{\rho_k},\
      \frac{[(1+\alpha_k\lambda)(\bar f_k - \rho_k \mathrm{lb} - \gamma_k)
             + \langle d_k, x_k\rangle]_+}{\|d_k\|^2_{D_k^{-1}}}\Big), \quad
    x_{k+1} = \frac{x_k - \tau_k d_k / D_k}{1 + \alpha_k \lambda}

  ``weight_decay_mode="divide"`` is the proximal step above (the paper's and the official
  default); ``"adamw"`` is the official ``divide=False``:
  :math:`x_{k+1} = (1-\alpha_k\lambda) x_k - \tau_k d_k / D_k` (with :math:`\tau_k` unchanged).
  ``adapt_lower_bound`` estimates the lower bound online (MoMo*). Without weight decay this
  equals ``optax.contrib.momo_adam``. As with :func:`momo`, ``step_size == 0`` with ``lb`` above the
  loss means the bound froze the parameters (:func:`momo_frozen`), and a schedule is checked when
  the transform is built.

  Args:
    learning_rate: cap :math:`\alpha` on the step (a float or an optax schedule of the step).
    b1: decay of the first moment, loss and :math:`\gamma` averages, in [0, 1).
    b2: decay of the second moment, in [0, 1).
    eps: added to :math:`D_k`, > 0 (0 gives 0/0 = NaN on a coordinate whose gradient stays 0).
    lower_bound: lower bound of the loss; 0 suits most non-negative losses.
    weight_decay: :math:`\lambda \ge 0`.
    adapt_lower_bound: estimate the lower bound on the fly (MoMo*).
    weight_decay_mode: ``"divide"`` (proximal) or ``"adamw"``.
    mu_dtype: dtype of both moments :math:`d_k, v_k` (default: the params'). With bf16 params
      use ``jnp.float32``: :math:`\beta_2 = 0.999` is below bf16's resolution, so a bf16
      :math:`v_k` cannot decay.
    mask: weight decay only where True (a pytree of bools like params, or a callable of params).

  Returns:
    An ``optax.GradientTransformationExtraArgs``; call
    ``update(grads, state, params, value=loss)`` and apply with ``optax.apply_updates``.

  Examples:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxlab.optim import momo_adam
    >>> f = lambda x: jnp.sum((x - 1.0) ** 2)
    >>> opt = momo_adam(learning_rate=0.1)
    >>> x = jnp.zeros(3); state = opt.init(x)
    >>> loss, g = jax.value_and_grad(f)(x)
    >>> u, state = opt.update(g, state, x, value=loss)
    >>> x = optax.apply_updates(x, u)
    >>> print(jnp.allclose(x, 0.1))  # step capped at lr / (1 - b1) = 1: x = d / D = 0.2 / 2
    True

  References:
    Schaipp et al., `MoMo: Momentum Models for Adaptive Learning Rates
    <https://arxiv.org/abs/2305.07583>`_, ICML 2024.
  """
  _check_learning_rate("momo_adam", learning_rate)
  check_range(b1, "momo_adam: b1", 0.0, 1.0, high_open=True, got=True)
  check_range(b2, "momo_adam: b2", 0.0, 1.0, high_open=True, got=True)
  check_positive(eps, "momo_adam: eps", "added to sqrt(v): 0 gives 0/0 = NaN where a gradient is 0", got=True)
  check_range(weight_decay, "momo_adam: weight_decay", 0.0, got=True)
  _check_lower_bound("momo_adam", lower_bound)
  check_bool(adapt_lower_bound, "momo_adam: adapt_lower_bound", got=True)
  if weight_decay_mode not in ("divide", "adamw"):
    raise InputError(
        f"momo_adam: weight_decay_mode must be 'divide' or 'adamw', got {weight_decay_mode!r}")

  warned = [False]  # the eager frozen warning, once per transform

  def init_fn(params: optax.Params) -> MomoAdamState:
    common.check_float_params("momo_adam", params)
    return MomoAdamState(
        count=jnp.zeros([], jnp.int32),
        exp_avg=optax.tree.zeros_like(params, dtype=mu_dtype),
        exp_avg_sq=optax.tree.zeros_like(params, dtype=mu_dtype),
        **_scalar_state(params, lower_bound),
    )

  def update_fn(
      grads: optax.Updates,
      state: MomoAdamState,
      params: Optional[optax.Params] = None,
      *,
      value: Optional[jax.Array] = None,
      **extra_args: Any,
  ) -> tuple[optax.Updates, MomoAdamState]:
    del extra_args
    loss = common.check_update_args("momo_adam", params, value)
    dt = state.barf.dtype
    count = optax.safe_increment(state.count)
    k = count.astype(dt)
    beta1, beta2, e = common.cast(b1, dt), common.cast(b2, dt), common.cast(eps, dt)
    rho, bc2 = 1 - beta1**k, 1 - beta2**k
    barf = common.ema(state.barf, loss.astype(dt), beta1)
    exp_avg = jax.tree.map(lambda d, g: common.ema(d, g, beta1), state.exp_avg, grads)
    exp_avg_sq = jax.tree.map(
        lambda v, g: common.ema(v, jnp.square(g.astype(dt)), beta2), state.exp_avg_sq, grads)
    # d / D_k; recomputed below instead of stored, so XLA can fuse it into both passes.
    precond = lambda d, v: d.astype(dt) / (jnp.sqrt(v.astype(dt) / bc2) + e)
    gamma = common.ema(state.gamma, common.tree_vdot(grads, params, dt), beta1)
    alpha = _learning_rate(learning_rate, state.count, dt)
    wd = common.cast(weight_decay, dt)
    decay = None if common.is_zero(weight_decay) else common.resolve_mask(mask, params)
    masked = None
    if decay is not None:  # per-leaf omega: 1 + alpha lambda where decayed, 1 elsewhere
      omega = jax.tree.map(lambda m: 1 + alpha * wd if m else jnp.ones([], dt), decay)
      masked = (
          common.tree_vdot(exp_avg, jax.tree.map(lambda x, w: x / w, params, omega), dt),
          common.tree_vdot(exp_avg, jax.tree.map(lambda d, v, w: precond(d, v) / w,
                                                 exp_avg, exp_avg_sq, omega), dt))
    tau, lb = common.polyak_step(
        barf=barf, gamma=gamma, iprod=common.tree_vdot(exp_avg, params, dt),
        sq_norm=common.tree_vdot(exp_avg, jax.tree.map(precond, exp_avg, exp_avg_sq), dt),
        lb=state.lb, lb_floor=common.cast(lower_bound, dt), alpha=alpha, weight_decay=wd,
        rho=rho, adapt_lower_bound=adapt_lower_bound, masked=masked)
    plain = lambda d, v, x: -tau * precond(d, v)
    if common.is_zero(weight_decay):
      step = plain
    elif weight_decay_mode == "divide":
      # (x - tau d/D) / (1 + alpha lambda) - x, written so bf16 params lose no precision.
      step = lambda d, v, x: -(tau * precond(d, v) + alpha * wd * x) / (1 + alpha * wd)
    else:
      step = lambda d, v, x: -alpha * wd * x - tau * precond(d, v)
    if decay is None:
      updates = jax.tree.map(
          lambda d, v, x: step(d, v, x).astype(x.dtype), exp_avg, exp_avg_sq, params)
    else:
      updates = jax.tree.map(
          lambda d, v, x, m: (step if m else plain)(d, v, x).astype(x.dtype),
          exp_avg, exp_avg_sq, params, decay)
    state = MomoAdamState(count, exp_avg, exp_avg_sq, barf, gamma, lb, tau)
    _warn_if_frozen("momo_adam", warned, state, loss)
    return updates, state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)
