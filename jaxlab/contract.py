"""What a method hands the one train step, and what the step gives back: the names both sides agree on.

The step (``jaxlab.train.step``) and the method packages import these from here, so that a method
never imports the trainer to speak to it:

* a loss is ``loss_fn(params, batch, rng, extra) -> (loss, metrics)`` (:data:`LossFn`); it may
  return per-row values under ``metrics[PER_SAMPLE]`` (e.g. each transition's TD loss), which the
  step takes out of the logged metrics and hands to the task's ``update_data`` (:data:`UpdateDataFn`);
* data made on the device come from ``collect(state, rng) -> (state, batch, metrics)`` (:data:`CollectFn`);
* an optimizer shows the step its scalar state by field name: a 0-d leaf of the optimizer state
  whose field or dict key is in :data:`LOGGED_STATE_FIELDS` is logged as ``opt/<field>``
  (``jaxlab.train.step.optimizer_metrics``). MoMo's states name their adaptive step ``step_size``
  and lower bound ``lb`` for this; ``optax.inject_hyperparams`` keeps ``learning_rate`` in its state.
"""

from __future__ import annotations

from typing import Any, Callable

import jax

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
