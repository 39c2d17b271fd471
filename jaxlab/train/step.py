"""The one training step every jaxlab method plugs into.

``make_train_step(loss_fn, optimizer)`` returns ``step(state, batch) -> (state, metrics)``,
jitted with the state's and batch's ``NamedSharding``s and the state donated. The loss sees the
*global* batch (jit over sharded arrays, not pmap), so a contrastive loss that couples the
whole batch needs no collectives of its own.

``loss_fn(params, batch, rng, extra) -> (loss, metrics)`` where ``extra`` is
``TrainState.extra`` (target params for a TD loss, ``()`` otherwise).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from jaxlab.train.sharding import path_name
from jaxlab.train.state import TrainState

LossFn = Callable[[Any, Any, jax.Array, Any], tuple[jax.Array, dict[str, jax.Array]]]

# Scalar optimizer-state fields surfaced as metrics: MoMo's adaptive step and lower bound, and
# the learning rate of ``optax.inject_hyperparams``.
OPT_STATE_METRICS = ("step_size", "lb", "learning_rate")


def optimizer_metrics(opt_state: optax.OptState) -> dict[str, jax.Array]:
  """``opt/<field>`` for every scalar field or dict entry of ``opt_state`` named in OPT_STATE_METRICS."""
  out = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
    field = (getattr(path[-1], "name", None) or getattr(path[-1], "key", None)) if path else None
    if field in OPT_STATE_METRICS and jnp.ndim(leaf) == 0:
      key = f"opt/{field}"
      if key in out:  # several such states (e.g. inside a chain): keep them apart by path
        key = f"opt/{path_name(path)}"
      out[key] = leaf
  return out


def _all_finite(tree: Any) -> jax.Array:
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def train_step_fn(loss_fn: LossFn, optimizer: optax.GradientTransformation, *,
                  skip_nonfinite: bool = True,
                  update_extra: Callable[[TrainState], Any] | None = None
                  ) -> Callable[[TrainState, Any], tuple[TrainState, dict[str, jax.Array]]]:
  """The un-jitted step; ``make_train_step`` adds shardings, donation and input checks."""
  takes_value = isinstance(optimizer, optax.GradientTransformationExtraArgs)

  def apply_update(operands):
    params, opt_state, grads, loss = operands
    if takes_value:  # MoMo, polyak_sgd, ... need f(x_k); plain transforms ignore it
      updates, opt_state = optimizer.update(grads, opt_state, params, value=loss)
    else:
      updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  def step(state: TrainState, batch: Any) -> tuple[TrainState, dict[str, jax.Array]]:
    (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        state.params, batch, state.step_rng(), state.extra)
    operands = (state.params, state.opt_state, grads, loss)
    skipped = state.nonfinite_skipped
    if skip_nonfinite:
      # cond, not a select over every leaf: with donation the skipped branch is free.
      ok = jnp.isfinite(loss) & _all_finite(grads)
      out_types = jax.eval_shape(apply_update, operands)
      keep = lambda ops: jax.tree.map(lambda x, t: x.astype(t.dtype), (ops[0], ops[1]), out_types)
      params, opt_state = jax.lax.cond(ok, apply_update, keep, operands)
      skipped = skipped + (~ok).astype(jnp.int32)
    else:
      params, opt_state = apply_update(operands)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state,
                              nonfinite_skipped=skipped)
    if update_extra is not None:
      new_state = new_state.replace(extra=update_extra(new_state))
    metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads),
               "nonfinite_skipped": skipped, **optimizer_metrics(opt_state)}
    return new_state, metrics

  return step


def _shape_mismatches(expected: Any, got: Any) -> list[str]:
  exp_leaves, exp_def = jax.tree_util.tree_flatten_with_path(expected)
  got_leaves, got_def = jax.tree_util.tree_flatten_with_path(got)
  if exp_def != got_def:
    return [f"batch structure: expected {exp_def}, got {got_def}"]
  out = []
  for (path, e), (_, g) in zip(exp_leaves, got_leaves):
    if tuple(e.shape) != tuple(jnp.shape(g)) or jnp.dtype(e.dtype) != jnp.result_type(g):
      out.append(f"batch[{path_name(path)!r}]: expected {e.dtype}{list(e.shape)}, "
                 f"got {jnp.result_type(g)}{list(jnp.shape(g))}")
  return out


class TrainStep:
  """A jitted step that checks each batch against the shapes it was built for.

  Without the check a wrongly-shaped batch would silently recompile (or fail deep in XLA).
  """

  def __init__(self, fn: Callable, batch_spec: Any | None):
    self._fn = fn
    self.batch_spec = batch_spec

  def __call__(self, state: TrainState, batch: Any) -> tuple[TrainState, dict[str, jax.Array]]:
    if self.batch_spec is None:
      self.batch_spec = jax.tree.map(lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), batch)
    else:
      problems = _shape_mismatches(self.batch_spec, batch)
      if problems:
        raise ValueError("batch does not match the train step's batch spec:\n  " + "\n  ".join(problems))
    return self._fn(state, batch)

  @property
  def jitted(self) -> Callable:
    return self._fn


def make_train_step(loss_fn: LossFn, optimizer: optax.GradientTransformation, *,
                    state_sharding: Any = None, batch_sharding: Any = None,
                    batch_spec: Any = None, skip_nonfinite: bool = True,
                    update_extra: Callable[[TrainState], Any] | None = None,
                    donate: bool = True) -> TrainStep:
  """Builds the jitted, sharded train step.

  Args:
    loss_fn: ``(params, batch, rng, extra) -> (loss, metrics)``; sees the global batch.
    optimizer: an optax transform. If it is a ``GradientTransformationExtraArgs`` (MoMo,
      ``optax.polyak_sgd``, chains containing them), ``update`` receives ``value=loss``.
    state_sharding: pytree of ``NamedSharding`` for the ``TrainState`` (see ``tree_shardings``);
      ``None`` lets jit place it.
    batch_sharding: ``NamedSharding`` (or pytree of them) for the batch, usually over "data".
    batch_spec: pytree of ``ShapeDtypeStruct``; batches that differ raise a ``ValueError``
      naming expected vs got. ``None`` records the first batch's.
    skip_nonfinite: if the loss or any gradient is not finite, keep params and optimizer state
      unchanged and count the step in ``metrics["nonfinite_skipped"]``.
    update_extra: ``new_state -> extra`` run after the update (e.g. periodic target-network sync).
    donate: donate the old state's buffers.

  Returns:
    A ``TrainStep``: ``step(state, batch) -> (new_state, metrics)``; metrics are scalars,
    including ``loss``, ``grad_norm``, ``nonfinite_skipped`` and ``opt/step_size``, ``opt/lb``
    where the optimizer state has them.
  """
  step = train_step_fn(loss_fn, optimizer, skip_nonfinite=skip_nonfinite, update_extra=update_extra)
  jit_kwargs: dict[str, Any] = {"donate_argnums": (0,) if donate else ()}
  if state_sharding is not None or batch_sharding is not None:
    jit_kwargs["in_shardings"] = (state_sharding, batch_sharding)
    jit_kwargs["out_shardings"] = (state_sharding, None)
  return TrainStep(jax.jit(step, **jit_kwargs), batch_spec)
