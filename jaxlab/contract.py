"""What a method hands the one train step, and what the step gives back: the names both sides agree on.

The step (``jaxlab.train.step``) and the method packages import these from here, so that a method
never imports the trainer to speak to it:

* a loss is ``loss_fn(params, batch, rng, extra) -> (loss, metrics)`` (:data:`LossFn`); it may
  return per-row values under ``metrics[PER_SAMPLE]`` (e.g. each transition's TD loss), which the
  step takes out of the logged metrics and hands to the task's ``update_data`` (:data:`UpdateDataFn`);
* data made on the device come from ``collect(state, rng) -> (state, batch, metrics)`` (:data:`CollectFn`);
* an optimizer shows the step its scalar state by field name: a 0-d leaf of the optimizer state
  whose field or dict key is in :data:`LOGGED_STATE_FIELDS` is logged as ``opt/<field>``
  (:func:`logged_state_metrics`). MoMo's states name their adaptive step ``step_size`` and lower
  bound ``lb`` for this; ``optax.inject_hyperparams`` keeps ``learning_rate`` in its state.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxlab.sharding import path_name

#: ``(params, batch, rng, extra) -> (loss, metrics)``: the loss of one step on the global batch.
LossFn = Callable[[Any, Any, jax.Array, Any], tuple[jax.Array, dict[str, jax.Array]]]
#: ``(state, rng) -> (state, batch, metrics)``: data made on the device, in the step's program.
CollectFn = Callable[[Any, jax.Array], tuple[Any, Any, dict[str, jax.Array]]]
#: ``(new_state, batch, per_sample) -> data_state``: what the loss learned, back into the data.
UpdateDataFn = Callable[[Any, Any, Any], Any]
#: The step's metrics: scalars by name (``[runs]`` under vmapped runs).
Metrics = dict[str, jax.Array]

#: The loss-metrics key of per-sample values for ``update_data`` (taken out of the logged metrics).
PER_SAMPLE = "per_sample"

#: Scalar optimizer-state fields (or dict keys) the step logs as ``opt/<field>``.
LOGGED_STATE_FIELDS = ("step_size", "lb", "learning_rate")


def logged_state_metrics(opt_state: Any) -> Metrics:
  """``opt/<field>`` for every 0-d leaf of ``opt_state`` whose field or key is in :data:`LOGGED_STATE_FIELDS`.

  Several such states (e.g. inside a chain) are kept apart by their path (``opt/<path>``).

  Args:
    opt_state: an optax optimizer state.

  Returns:
    ``{"opt/<field>": leaf}``.

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> from jaxlab.contract import logged_state_metrics
    >>> opt = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1)
    >>> {k: round(float(v), 3) for k, v in logged_state_metrics(opt.init(jnp.zeros(2))).items()}
    {'opt/learning_rate': 0.1}
  """
  out = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
    field = (getattr(path[-1], "name", None) or getattr(path[-1], "key", None)) if path else None
    if field in LOGGED_STATE_FIELDS and jnp.ndim(leaf) == 0:
      key = f"opt/{field}"
      if key in out:  # several such states (e.g. inside a chain): keep them apart by path
        key = f"opt/{path_name(path)}"
      out[key] = leaf
  return out
