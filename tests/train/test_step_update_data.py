"""The step's ``update_data`` hook: the loss's per-sample values reach the data state after the update."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab.errors import InputError
from jaxlab.train import TrainState, make_train_step
from jaxlab.train.step import PER_SAMPLE
from jaxlab.train.task import Task

X = jnp.arange(24, dtype=jnp.float32).reshape(8, 3) / 10


def _loss(params, batch, rng, extra):
  rows = (batch["x"] @ params["w"] - batch["y"]) ** 2
  return jnp.mean(rows), {"mean_row": jnp.mean(rows), PER_SAMPLE: {"rows": rows, "id": batch["id"]}}


def _collect(state, rng):
  """The batch comes from the data state (as a replay's); ``id`` tells the rows apart."""
  return state, {"x": X, "y": jnp.ones(8), "id": jnp.arange(8, dtype=jnp.float32)}, {}


def _update_data(state, batch, per_sample):
  return {"rows": per_sample["rows"], "id": per_sample["id"], "step": state.step}


def _state():
  opt = optax.sgd(0.1)
  params = {"w": jnp.full((3,), 0.5)}
  data = {"rows": jnp.zeros(8), "id": jnp.zeros(8), "step": jnp.zeros((), jnp.int32)}
  return opt, TrainState.create(params, opt, jax.random.key(0), data_state=data)


@pytest.mark.parametrize("accum", [1, 2, 4])
def test_per_sample_values_reach_update_data_in_batch_order_and_are_not_logged(accum):
  opt, state = _state()
  step = make_train_step(_loss, opt, collect=_collect, update_data=_update_data, grad_accum_steps=accum)
  before = state.params["w"]
  want = np.asarray((X @ before - 1.0) ** 2)  # the loss's rows at the params the update started from
  state, metrics = step(state)
  np.testing.assert_allclose(state.data_state["rows"], want, rtol=1e-6)
  np.testing.assert_array_equal(state.data_state["id"], np.arange(8))  # micro-batches put back in order
  assert int(state.data_state["step"]) == 1  # it sees the state after the update
  assert PER_SAMPLE not in metrics and "mean_row" in metrics


def test_a_loss_without_per_sample_values_is_refused_in_one_line():
  opt, state = _state()
  step = make_train_step(lambda p, b, r, e: (jnp.mean(b["x"] @ p["w"]), {}), opt, collect=_collect,
                         update_data=_update_data)
  with pytest.raises(InputError, match=r"update_data needs per-sample values from the loss"):
    step(state)


def test_a_task_with_update_data_needs_collect():
  with pytest.raises(TypeError, match="update_data .* needs collect"):
    Task(init_params=lambda rng: {}, loss_fn=_loss, host_batch=lambda s, r, seed: {}, update_data=_update_data)
