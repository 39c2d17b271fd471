"""Shared checks of jaxlab's NNX modules against the linen modules they mirror.

Both sides call the same pure functions on the same arrays. Run op by op (no ``jit``), each
primitive executes on its own with the same inputs on both sides, so the outputs are bit-equal
by construction; the tests assert equality, and a difference means the two compute different
things. (A ``lax.scan``, e.g. DPOT's ``scan_blocks``, runs as one compiled body, whose operands
linen and NNX order differently: those outputs agree to a rounding bound instead.) Training runs
jitted, two programs, compared to a rounding bound (:func:`train_both`). The parameters are drawn with numpy in the linen
module's tree (from ``jax.eval_shape`` of its ``init``): op-by-op random initialisation would
compile every random op, which costs seconds, and equality holds for any parameters.
"""

from __future__ import annotations

from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab.optim import momo_adam
from tests.support.tolerances import steps_tol


def linen_params(module: Any, *inputs: Any, rngs: Any = None, scale: float = 0.3, seed: int = 0) -> Any:
  """Parameters in ``module``'s tree (its ``init`` on ``inputs``, shapes only), ``scale`` * N(0, 1) from numpy."""
  abstract = jax.eval_shape(module.init, rngs if rngs is not None else jax.random.key(0), *inputs)["params"]
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda s: jnp.asarray(scale * rng.standard_normal(s.shape), s.dtype), abstract)


def load(model_fn: Callable[[], nnx.Module], params: Any) -> nnx.Module:
  """The NNX model built abstractly (no random init) with the linen ``params`` loaded: the documented way."""
  model = nnx.eval_shape(model_fn).load_linen_params(params)
  chex.assert_trees_all_equal(model.linen_params(), params)
  return model


def train_both(linen_apply: Callable[..., Any], params: Any, model: nnx.Module, loss: Callable[[Any], jax.Array],
               inputs: tuple, ops_per_step: int, steps: int = 4, learning_rate: float = 0.1) -> list[float]:
  """``steps`` MoMo-Adam steps on ``loss(output)`` twice from the same parameters, each jitted: the linen
  module through optax (``update(..., value=loss)``), the NNX model through ``nnx.Optimizer(model, tx,
  wrt=nnx.Param)`` and ``optimizer.update(model, grads, value=loss)``.

  The two steps are two programs (XLA may fuse them differently), so their losses and parameters
  agree to ``steps_tol(steps, ops_per_step)``, the rounding of ``ops_per_step`` operations per
  parameter and step (the caller derives it from its model). Asserts that and that the loss falls;
  returns the NNX losses.
  """
  tx = momo_adam(learning_rate)

  @jax.jit
  def linen_step(p, state, *inputs):
    value, grads = jax.value_and_grad(lambda q: loss(linen_apply(q, *inputs)))(p)
    updates, state = tx.update(grads, state, p, value=value)
    return optax.apply_updates(p, updates), state, value

  @nnx.jit
  def nnx_step(model, optimizer, *inputs):
    value, grads = nnx.value_and_grad(lambda m: loss(m(*inputs)))(model)
    optimizer.update(model, grads, value=value)
    return value

  linen_losses, state, p = [], tx.init(params), params
  optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
  nnx_losses = []
  for _ in range(steps):
    p, state, value = linen_step(p, state, *inputs)
    linen_losses.append(float(value))
    nnx_losses.append(float(nnx_step(model, optimizer, *inputs)))
  tol = steps_tol(steps, ops_per_step)
  np.testing.assert_allclose(nnx_losses, linen_losses, **tol)
  assert nnx_losses[-1] < nnx_losses[0], nnx_losses
  chex.assert_trees_all_close(model.linen_params(), p, **tol)
  return nnx_losses


def mean_square(out: Any) -> jax.Array:
  """A loss of any output pytree: the mean of its first leaf's squares (drives every parameter it reaches)."""
  return jnp.mean(jnp.square(jax.tree.leaves(out)[0]))
