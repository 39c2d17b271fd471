"""The train state: one pytree holding everything a step reads and writes."""

from __future__ import annotations

from typing import Any, Callable

import flax.struct
import jax
import jax.numpy as jnp
import optax


class TrainState(flax.struct.PyTreeNode):
  """Everything a step reads and writes, as one pytree (checkpointed whole).

  ``extra`` is what the loss reads besides params (e.g. DQN target params); ``data_state`` is
  what a task's on-device ``collect`` owns (environment states, a replay buffer). ``rng`` is raw
  ``uint32[2]`` key data rather than a typed key so that checkpoints need no special handling;
  ``step_rng`` turns it into this step's key. Under a run axis (vmapped runs) every leaf has a
  leading ``[runs]`` dimension.
  """
  step: jax.Array            # int32 []
  params: Any
  opt_state: optax.OptState
  rng: jax.Array             # uint32 [2]
  extra: Any = ()
  nonfinite_skipped: jax.Array = flax.struct.field(default_factory=lambda: jnp.zeros((), jnp.int32))
  data_state: Any = ()

  @classmethod
  def create(cls, params: Any, optimizer: optax.GradientTransformation, rng: jax.Array,
             extra: Any = (), data_state: Any = ()) -> "TrainState":
    if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key):
      rng = jax.random.key_data(rng)
    state = cls(step=jnp.zeros((), jnp.int32), params=params, opt_state=optimizer.init(params),
                rng=rng, extra=extra, nonfinite_skipped=jnp.zeros((), jnp.int32),
                data_state=data_state)
    # Own every buffer: the train step donates the state, which would otherwise delete arrays
    # the caller still holds (``params``) or fail on leaves that share one buffer.
    return jax.tree.map(lambda x: jnp.array(x, copy=True), state)

  def step_rng(self) -> jax.Array:
    """A fresh key per step, derived from (seed, step) so a resumed run draws the same numbers."""
    return jax.random.fold_in(jax.random.wrap_key_data(self.rng), self.step)


def make_init_fn(init_params: Callable[[jax.Array], Any], optimizer: optax.GradientTransformation,
                 init_extra: Callable[[Any], Any] | None = None,
                 init_data: Callable[[Any, jax.Array], Any] | None = None
                 ) -> Callable[[jax.Array], TrainState]:
  """``rng -> TrainState``; jit it with ``out_shardings`` to create the state already sharded.

  ``init_data(params, rng)`` builds the on-device data state (e.g. environments and a replay
  buffer prefilled by a random policy); its rng is independent of the params' and the steps'.
  """
  def init(rng: jax.Array) -> TrainState:
    params_rng, state_rng = jax.random.split(rng)
    params = init_params(params_rng)
    extra = init_extra(params) if init_extra is not None else ()
    data_state = init_data(params, jax.random.fold_in(rng, 1)) if init_data is not None else ()
    return TrainState.create(params, optimizer, state_rng, extra, data_state)
  return init
