"""The one training step every jaxlab method plugs into.

``train_step_fn(loss_fn, optimizer, ...)`` is the pure step ``(state, batch) -> (state, metrics)``;
``make_train_step`` jits it with the state's and batch's ``NamedSharding``s and the state donated,
optionally vmapped over a run axis (seeds, swept hyper-parameters) and scanned over
``steps_per_call`` steps. The loss sees the *global* batch (jit over sharded arrays, not pmap),
so a contrastive loss that couples the whole batch needs no collectives of its own.

``loss_fn(params, batch, rng, extra) -> (loss, metrics)`` where ``extra`` is
``TrainState.extra`` (target params for a TD loss, ``()`` otherwise). With a task's
``collect(state, rng) -> (state, batch, metrics)`` the batch is made on the device, in the same
program, before the loss.

Per-sample values (``update_data``): a loss may return, under ``metrics[PER_SAMPLE]``, a pytree of
per-row arrays ``[B, ...]`` (e.g. each transition's TD loss). The step takes them out of the
metrics (they are never logged) and, after the update, hands them with the batch to
``update_data(new_state, batch, per_sample) -> data_state``: a prioritised replay's new
priorities (Schaul et al. 2016). With ``grad_accum_steps`` > 1 the micro-batches' rows are put
back in the batch's order first.

Non-finite steps (``skip_nonfinite``): if the loss or any gradient is NaN/inf, params and the
optimizer's float state (moments, averages) are kept, while ``state.step`` and every integer
counter of the optimizer state advance. Learning-rate schedules therefore stay aligned with
``state.step`` whatever was skipped (as with PyTorch's GradScaler + LR scheduler), and the data
and rng move on. Bias corrections that use the counters (Adam's ``1 - b^k``, MoMo's ``rho_k``)
count skipped steps too, a negligible effect after the first few steps.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import jax
import jax.numpy as jnp
import optax

# The step's contract with the methods, importable from here too (jaxlab.train.step.PER_SAMPLE).
from jaxlab.contract import LOGGED_STATE_FIELDS, PER_SAMPLE, CollectFn, LossFn, Metrics, UpdateDataFn  # noqa: F401
from jaxlab.errors import InputError, check_choice, check_int
from jaxlab.train.precision import COMPUTE_DTYPES, cast_floats
from jaxlab.sharding import path_name
from jaxlab.train.state import TrainState

REMAT_POLICIES = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_saveable,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def optimizer_metrics(opt_state: optax.OptState) -> Metrics:
  """``opt/<field>`` for every scalar field or dict entry of ``opt_state`` named in
  ``jaxlab.contract.LOGGED_STATE_FIELDS`` (several such states, e.g. inside a chain, are kept apart by path)."""
  out = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
    field = (getattr(path[-1], "name", None) or getattr(path[-1], "key", None)) if path else None
    if field in LOGGED_STATE_FIELDS and jnp.ndim(leaf) == 0:
      key = f"opt/{field}"
      if key in out:  # several such states (e.g. inside a chain): keep them apart by path
        key = f"opt/{path_name(path)}"
      out[key] = leaf
  return out


def _all_finite(tree: Any) -> jax.Array:
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def _has_int_dtype(x: Any) -> bool:
  """An integer array (a step counter), as opposed to a float one; not a check of user input."""
  return jnp.issubdtype(jnp.result_type(x), jnp.integer)


def _keep_floats_advance_counters(new: Any, old: Any) -> Any:
  """A skipped step's optimizer state: integer leaves (step counters) from ``new``, the rest from ``old``."""
  return jax.tree.map(lambda n, o: n if _has_int_dtype(n) else o.astype(n.dtype), new, old)


def _split_microbatches(batch: Any, num: int) -> Any:
  """``[B, ...] -> [num, B // num, ...]``, micro-batch ``j`` = rows ``j, j + num, ...``.

  Strided rather than contiguous, so that with the batch sharded over "data" in contiguous
  blocks every micro-batch is spread over all devices and the split needs no communication.
  """
  def split(x):
    if x.shape[0] % num:
      raise InputError(f"grad_accum_steps={num} does not divide the batch dimension {x.shape[0]} "
                       f"of a batch leaf with shape {x.shape}")
    return jnp.swapaxes(x.reshape((x.shape[0] // num, num) + x.shape[1:]), 0, 1)
  return jax.tree.map(split, batch)


def _merge_microbatches(tree: Any) -> Any:
  """The inverse of :func:`_split_microbatches`: ``[num, B // num, ...] -> [B, ...]`` in batch order."""
  return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape((-1,) + x.shape[2:]), tree)


def _pop_per_sample(out: Any) -> tuple[Any, Any]:
  """``((loss, metrics), grads)`` without ``metrics[PER_SAMPLE]``, and that entry (None if absent)."""
  (loss, metrics), grads = out
  metrics = dict(metrics)
  per_sample = metrics.pop(PER_SAMPLE, None)
  return ((loss, metrics), grads), per_sample


def _check_options(grad_accum_steps: int, remat: str, compute_dtype: str | None, guard: str) -> None:
  check_int(grad_accum_steps, "grad_accum_steps", got=True)
  check_choice(remat, "remat", sorted(REMAT_POLICIES), got=True)
  if compute_dtype is not None:
    check_choice(compute_dtype, "compute_dtype", COMPUTE_DTYPES, "or None", got=True)
  check_choice(guard, "guard", ("cond", "select"), got=True)


def train_step_fn(loss_fn: LossFn, optimizer: optax.GradientTransformation, *,
                  skip_nonfinite: bool = True,
                  update_extra: Callable[[TrainState], Any] | None = None,
                  collect: CollectFn | None = None,
                  grad_accum_steps: int = 1,
                  remat: str = "none",
                  compute_dtype: str | None = None,
                  guard: Literal["cond", "select"] = "cond",
                  update_data: UpdateDataFn | None = None,
                  ) -> Callable[[TrainState, Any], tuple[TrainState, Metrics]]:
  """The pure step ``(state, batch) -> (state, metrics)``; ``make_train_step`` jits it.

  Args:
    loss_fn: ``(params, batch, rng, extra) -> (loss, metrics)``.
    optimizer: an optax transform; a ``GradientTransformationExtraArgs`` (MoMo, polyak_sgd,
      chains containing them) receives ``value=loss`` (the mean micro-batch loss when
      accumulating).
    skip_nonfinite: skip the update when the loss or a gradient is not finite (see the module
      docstring for what advances) and count it in ``nonfinite_skipped``.
    update_extra: ``new_state -> extra`` after the update (e.g. a periodic target-network sync).
    collect: ``(state, rng) -> (state, batch, metrics)`` run first; then ``batch`` is ignored.
    grad_accum_steps: split the batch into this many micro-batches (strided), accumulate their
      gradients in a ``lax.scan`` and apply one update; the loss and metrics are the means.
    remat: ``jax.checkpoint`` policy for the loss: ``"none"``, ``"full"`` (save nothing),
      ``"dots"``, ``"dots_no_batch"``. Models with blocks gain more from per-block remat.
    compute_dtype: ``"bfloat16"`` (or ``"float16"``) casts the params, the floating batch leaves
      and ``extra`` (e.g. target params) for the loss only; params, gradients and optimizer
      moments stay in the params' dtype (f32), and the loss (hence MoMo's ``value``) and
      ``grad_norm`` are float32. ``collect`` gets the state as it is (``jaxlab.train.precision``).
    guard: ``"cond"`` (skip branch not executed) or ``"select"`` (one update, then a select
      per leaf; what ``cond`` turns into under ``vmap``, without computing the update twice).
    update_data: ``(new_state, batch, per_sample) -> data_state`` after the update (and
      ``update_extra``), with what the loss returned under ``metrics[PER_SAMPLE]`` (see the module
      docstring); called on skipped steps too. Needs ``collect``, whose ``state.data_state`` it
      updates.
  """
  _check_options(grad_accum_steps, remat, compute_dtype, guard)
  takes_value = isinstance(optimizer, optax.GradientTransformationExtraArgs)
  policy = REMAT_POLICIES[remat]
  loss_for_grad = jax.checkpoint(loss_fn, policy=policy) if remat != "none" else loss_fn

  def loss_in_policy(params, batch, rng, extra):
    if compute_dtype is not None and compute_dtype != "float32":
      params, batch, extra = (cast_floats(t, compute_dtype) for t in (params, batch, extra))
    loss, metrics = loss_for_grad(params, batch, rng, extra)
    dtype = jnp.result_type(loss)
    if not jnp.issubdtype(dtype, jnp.floating) or jnp.ndim(loss) != 0:  # static: refused when traced
      raise InputError(f"the loss function returned a {dtype} value of shape {jnp.shape(loss)}; it must be a "
                       "floating-point scalar (an integer or boolean loss has no gradient)")
    return loss.astype(jnp.float32), metrics

  grad_fn = jax.value_and_grad(loss_in_policy, has_aux=True)

  def loss_and_grads(params, batch, rng, extra):
    """``((loss, metrics), grads)`` and the loss's per-sample values (None if it returns none)."""
    if grad_accum_steps == 1:
      return _pop_per_sample(grad_fn(params, batch, rng, extra))
    micro = _split_microbatches(batch, grad_accum_steps)

    def body(acc, xs):
      mb, i = xs
      out, per_sample = _pop_per_sample(grad_fn(params, mb, jax.random.fold_in(rng, i), extra))
      return jax.tree.map(jnp.add, acc, out), per_sample

    first = jax.tree.map(lambda x: x[0], micro)
    shapes = jax.eval_shape(lambda *a: _pop_per_sample(grad_fn(*a))[0], params, first, rng, extra)
    total, per_sample = jax.lax.scan(body, jax.tree.map(jnp.zeros_like, shapes),
                                     (micro, jnp.arange(grad_accum_steps)))
    per_sample = None if per_sample is None else _merge_microbatches(per_sample)
    return jax.tree.map(lambda x: x / grad_accum_steps, total), per_sample

  def apply_update(operands):
    params, opt_state, grads, loss = operands
    if takes_value:  # MoMo, polyak_sgd, ... need f(x_k); plain transforms ignore it
      updates, opt_state = optimizer.update(grads, opt_state, params, value=loss)
    else:
      updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  def skipped_update(operands):
    params, opt_state = operands[0], operands[1]
    new_params, new_opt_state = apply_update(operands)  # only its counters are kept
    params = jax.tree.map(lambda o, n: o.astype(n.dtype), params, new_params)
    return params, _keep_floats_advance_counters(new_opt_state, opt_state)

  def step(state: TrainState, batch: Any = None) -> tuple[TrainState, Metrics]:
    rng = state.step_rng()
    collect_metrics: Metrics = {}
    if collect is not None:
      collect_rng, rng = jax.random.split(rng)
      state, batch, collect_metrics = collect(state, collect_rng)
    ((loss, metrics), grads), per_sample = loss_and_grads(state.params, batch, rng, state.extra)
    operands = (state.params, state.opt_state, grads, loss)
    skipped = state.nonfinite_skipped
    if not skip_nonfinite:
      params, opt_state = apply_update(operands)
    else:
      ok = jnp.isfinite(loss) & _all_finite(grads)
      if guard == "cond":  # with donation the skip branch costs nothing unless taken
        params, opt_state = jax.lax.cond(ok, apply_update, skipped_update, operands)
      else:
        new_params, new_opt_state = apply_update(operands)
        params = jax.tree.map(lambda n, o: jnp.where(ok, n, o.astype(n.dtype)), new_params, state.params)
        opt_state = jax.tree.map(lambda n, o: n if _has_int_dtype(n) else jnp.where(ok, n, o.astype(n.dtype)),
                                 new_opt_state, state.opt_state)
      skipped = skipped + (~ok).astype(jnp.int32)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state,
                              nonfinite_skipped=skipped)
    if update_extra is not None:
      new_state = new_state.replace(extra=update_extra(new_state))
    if update_data is not None:
      if per_sample is None:
        raise InputError(f"update_data needs per-sample values from the loss: return them under "
                         f"metrics[{PER_SAMPLE!r}] (e.g. jaxlab.rl.td_loss(..., per_sample=True))")
      new_state = new_state.replace(data_state=update_data(new_state, batch, per_sample))
    grad_norm = optax.tree.norm(cast_floats(grads, jnp.float32))
    metrics = {**collect_metrics, **metrics, "loss": loss, "grad_norm": grad_norm,
               "nonfinite_skipped": skipped, **optimizer_metrics(opt_state)}
    return new_state, metrics

  return step


def reduce_over_steps(metrics: Metrics) -> Metrics:
  """Metrics stacked over the steps of one call ``[K, ...]`` -> the mean (floats) or last (ints)."""
  return {k: v[-1] if _has_int_dtype(v) else jnp.mean(v, axis=0) for k, v in metrics.items()}


def multi_step_fn(step: Callable[[TrainState, Any], tuple[TrainState, Metrics]], *,
                  steps_per_call: int = 1, vmap_runs: bool = False, batched_data: bool = True,
                  ) -> Callable[[TrainState, Any], tuple[TrainState, Metrics]]:
  """Wraps a step: ``vmap`` over a leading run axis, then ``lax.scan`` over ``steps_per_call`` steps.

  Batches are ``[steps_per_call?, runs?, B, ...]`` (each prefix only when used); with
  ``batched_data=False`` (a ``collect`` task) pass ``None``. Metrics are ``[runs?]`` scalars:
  the mean over the call's steps, the last value for integer counters.
  """
  check_int(steps_per_call, "steps_per_call", got=True)
  one = jax.vmap(step, in_axes=(0, 0 if batched_data else None)) if vmap_runs else step
  if steps_per_call == 1:
    return one

  def program(state: TrainState, batches: Any) -> tuple[TrainState, Metrics]:
    state, metrics = jax.lax.scan(lambda s, b: one(s, b), state, batches, length=steps_per_call)
    return state, reduce_over_steps(metrics)

  return program


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
  """A jitted step that checks its inputs before dispatch.

  A wrongly-shaped batch would otherwise silently recompile (or fail deep in XLA), and a state
  whose buffers the previous call donated would crash some jaxlib versions.

  ``step(state, batch, metrics=False)`` runs ``state_only``, the same program returning only the
  state: XLA drops whatever computes nothing but metrics (a Soft MoE's routing statistics, the
  gradient norm, ...) and the state comes out bit-identical (tested for a Soft-MoE DQN agent and
  a MoMo-trained classifier). A caller that logs rarely (the training loop, on a run with many
  calls that log nothing) asks for metrics only on the
  calls it logs; that program compiles on its first call.
  """

  def __init__(self, fn: Callable, batch_spec: Any | None, takes_batch: bool = True,
               state_only: Callable | None = None):
    self._fn = fn
    self._state_only = state_only
    self.batch_spec = batch_spec
    self.takes_batch = takes_batch
    self._spec: tuple[Any, list] | None = None

  def __call__(self, state: TrainState, batch: Any = None, *, metrics: bool = True
               ) -> tuple[TrainState, Metrics | None]:
    first = jax.tree.leaves(state)[:1]  # a donated state has every buffer deleted; one tells
    if first and isinstance(first[0], jax.Array) and first[0].is_deleted():
      raise InputError("this train state was donated to an earlier step call and its buffers are "
                       "deleted; use the state that call returned (state, metrics = step(state, batch))")
    if self.takes_batch:
      self._check_batch(batch)
    else:
      batch = None
    if metrics or self._state_only is None:
      return self._fn(state, batch)
    return self._state_only(state, batch), None

  def _check_batch(self, batch: Any) -> None:
    leaves, treedef = jax.tree.flatten(batch)
    if self.batch_spec is None:
      self.batch_spec = jax.tree.unflatten(treedef, [jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))
                                                     for x in leaves])
      self._spec = (treedef, [(s.shape, s.dtype) for s in jax.tree.leaves(self.batch_spec)])
    elif self._spec is None:
      self._spec = (jax.tree.structure(self.batch_spec), [(tuple(s.shape), jnp.dtype(s.dtype))
                                                          for s in jax.tree.leaves(self.batch_spec)])
    spec_def, spec_leaves = self._spec
    if treedef != spec_def or any(tuple(x.shape) != shape or x.dtype != dtype
                                  for x, (shape, dtype) in zip(leaves, spec_leaves)):
      problems = _shape_mismatches(self.batch_spec, batch)
      if problems:
        raise InputError("batch does not match the train step's batch spec: " + "; ".join(problems))

  @property
  def jitted(self) -> Callable:
    return self._fn

  @property
  def jitted_without_metrics(self) -> Callable | None:
    """The jitted program of ``metrics=False`` calls: ``(state, batch) -> state``."""
    return self._state_only


def make_train_step(loss_fn: LossFn, optimizer: optax.GradientTransformation, *,
                    state_sharding: Any = None, batch_sharding: Any = None,
                    batch_spec: Any = None, skip_nonfinite: bool = True,
                    update_extra: Callable[[TrainState], Any] | None = None,
                    collect: CollectFn | None = None,
                    grad_accum_steps: int = 1, remat: str = "none",
                    compute_dtype: str | None = None,
                    steps_per_call: int = 1, vmap_runs: bool = False,
                    guard: Literal["auto", "cond", "select"] = "auto",
                    donate: bool = True, update_data: UpdateDataFn | None = None) -> TrainStep:
  """Builds the jitted, sharded train step.

  Args:
    loss_fn: ``(params, batch, rng, extra) -> (loss, metrics)``; sees the global batch.
    optimizer: an optax transform. If it is a ``GradientTransformationExtraArgs`` (MoMo,
      ``optax.polyak_sgd``, chains containing them), ``update`` receives ``value=loss``.
    state_sharding: pytree of ``NamedSharding`` for the ``TrainState`` (see ``tree_shardings``;
      with ``vmap_runs`` the leading run axis included); ``None`` lets jit place it.
    batch_sharding: ``NamedSharding`` (or pytree of them) for the batch, usually over "data".
    batch_spec: pytree of ``ShapeDtypeStruct``; batches that differ raise an ``InputError``
      naming expected vs got. ``None`` records the first batch's.
    skip_nonfinite, update_extra, collect, grad_accum_steps, remat, compute_dtype: see
      ``train_step_fn``.
    steps_per_call: run this many steps per call in a ``lax.scan`` (batches stacked on a
      leading axis); for small models whose steps are bound by dispatch.
    vmap_runs: the state (and batch) carry a leading run axis, one independent run each
      (seeds, swept hyper-parameters); shard it over "data" to run them side by side.
    guard: how ``skip_nonfinite`` selects; ``"auto"`` is ``"select"`` under ``vmap_runs``
      (where ``cond`` would compute the update twice) and ``"cond"`` otherwise.
    donate: donate the old state's buffers.
    update_data: ``(new_state, batch, per_sample) -> data_state`` after each update, from the
      loss's ``metrics[PER_SAMPLE]`` (see ``train_step_fn``); needs ``collect``.

  Returns:
    A ``TrainStep``: ``step(state, batch) -> (new_state, metrics)`` (``step(state)`` with
    ``collect``); metrics are scalars (``[runs]`` under ``vmap_runs``), including ``loss``,
    ``grad_norm``, ``nonfinite_skipped`` and the optimizer state's ``opt/<field>``
    (``jaxlab.contract.LOGGED_STATE_FIELDS``: ``opt/step_size``, ``opt/lb`` of MoMo) where it has them.
    ``step(state, batch, metrics=False) -> (new_state, None)`` runs the program without its metrics
    (see ``TrainStep``).
  """
  if guard == "auto":
    guard = "select" if vmap_runs else "cond"
  step = train_step_fn(loss_fn, optimizer, skip_nonfinite=skip_nonfinite, update_extra=update_extra,
                       collect=collect, grad_accum_steps=grad_accum_steps, remat=remat,
                       compute_dtype=compute_dtype, guard=guard, update_data=update_data)
  program = multi_step_fn(step, steps_per_call=steps_per_call, vmap_runs=vmap_runs,
                          batched_data=collect is None)
  jit_kwargs: dict[str, Any] = {"donate_argnums": (0,) if donate else ()}
  sharded = state_sharding is not None or batch_sharding is not None
  if sharded:
    jit_kwargs["in_shardings"] = (state_sharding, batch_sharding if collect is None else None)
  full = jax.jit(program, **jit_kwargs, **({"out_shardings": (state_sharding, None)} if sharded else {}))
  state_only = jax.jit(lambda state, batch: program(state, batch)[0], **jit_kwargs,
                       **({"out_shardings": state_sharding} if sharded else {}))
  return TrainStep(full, batch_spec, takes_batch=collect is None, state_only=state_only)
