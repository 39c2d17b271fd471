"""Step options of Foundation v2: on-device data, scanned and vmapped steps, accumulation, remat, dtypes."""

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.errors import InputError
from jaxlab.optim import momo_adam
from jaxlab.train import TrainState, make_mesh, make_train_step, tree_shardings
from tests.support.tolerances import steps_tol

# One step of the MLP below, per parameter: a 6-term and a 16-term dot, tanh, a mean over up to
# 64 samples, the same backwards and the optimizer's few operations: ~100 rounded operations.
# Two programs computing the same steps (accumulated, scanned, vmapped, sharded, rematerialised)
# differ by at most the rounding of each, carried into the next step; parameters are O(1).
MLP_STEP_OPS = 100


def _steps_tol(steps):
  return steps_tol(steps, MLP_STEP_OPS)


def _mlp_loss(params, batch, rng, extra):
  del rng, extra
  h = jnp.tanh(batch["x"] @ params["w1"])
  err = h @ params["w2"] - batch["y"]
  return jnp.mean(err ** 2), {"mae": jnp.mean(jnp.abs(err))}


def _params(seed=0, d=6, h=16):
  r = np.random.default_rng(seed)
  return {"w1": jnp.asarray(r.normal(size=(d, h)) / np.sqrt(d), jnp.float32),
          "w2": jnp.asarray(r.normal(size=(h, 1)) / np.sqrt(h), jnp.float32)}


def _batch(n=32, d=6, seed=1):
  r = np.random.default_rng(seed)
  x = r.normal(size=(n, d)).astype(np.float32)
  return {"x": x, "y": np.sin(x[:, :1]).astype(np.float32)}


def _state(opt, seed=0):
  return TrainState.create(_params(seed), opt, jax.random.key(seed))


class _ValueState(NamedTuple):
  step_size: jax.Array  # [] the value passed to update, surfaced as opt/step_size


def _record_value():
  def update(u, s, p=None, *, value, **kw):
    return jax.tree.map(lambda g: -0.1 * g, u), _ValueState(value)
  return optax.GradientTransformationExtraArgs(lambda p: _ValueState(jnp.zeros(())), update)


# --- gradient accumulation --------------------------------------------------------------------

def test_grad_accumulation_equals_one_big_batch_and_passes_mean_loss_as_value():
  opt = optax.chain(_record_value())
  batch = _batch(32)
  out = {}
  for m in (1, 4):
    step = make_train_step(_mlp_loss, opt, grad_accum_steps=m)
    state, metrics = step(_state(opt), batch)
    out[m] = (jax.tree.map(np.asarray, state.params), jax.device_get(metrics))
  chex.assert_trees_all_close(out[1][0], out[4][0], **_steps_tol(1))
  np.testing.assert_allclose(out[4][1]["loss"], out[1][1]["loss"], **_steps_tol(1))
  # The optimizer's value is the mean micro-batch loss (== the full-batch mean loss here).
  np.testing.assert_allclose(out[4][1]["opt/step_size"], out[1][1]["loss"], **_steps_tol(1))
  np.testing.assert_allclose(out[4][1]["mae"], out[1][1]["mae"], **_steps_tol(1))


def test_grad_accumulation_on_8_devices_equals_one_device():
  opt = momo_adam(1e-2)
  batch = _batch(64)
  results = []
  for devices in (jax.devices()[:1], jax.devices()):
    mesh = make_mesh((("data", -1),), devices)
    ss = tree_shardings(_state(opt), mesh)
    bs = NamedSharding(mesh, P("data"))
    step = make_train_step(_mlp_loss, opt, state_sharding=ss, batch_sharding=bs, grad_accum_steps=4)
    state = jax.device_put(_state(opt), ss)
    for _ in range(3):
      state, _ = step(state, jax.device_put(batch, bs))
    results.append(jax.tree.map(np.asarray, state.params))
  chex.assert_trees_all_close(*results, **_steps_tol(3))


def test_grad_accumulation_that_does_not_divide_the_batch_is_one_clear_error():
  step = make_train_step(_mlp_loss, optax.sgd(0.1), grad_accum_steps=5)
  with pytest.raises(InputError, match=r"grad_accum_steps=5 does not divide the batch dimension 32"):
    step(_state(optax.sgd(0.1)), _batch(32))


# --- remat and dtype policy -------------------------------------------------------------------

@pytest.mark.parametrize("remat", ["full", "dots", "dots_no_batch"])
def test_remat_gives_the_same_step(remat):
  opt = optax.adam(1e-2)
  plain = make_train_step(_mlp_loss, opt)(_state(opt), _batch())
  rematted = make_train_step(_mlp_loss, opt, remat=remat)(_state(opt), _batch())
  chex.assert_trees_all_close(jax.device_get(plain[0].params), jax.device_get(rematted[0].params),
                              **_steps_tol(1))


def test_bf16_compute_keeps_f32_params_moments_and_grad_norm():
  opt = momo_adam(1e-2)
  step = make_train_step(_mlp_loss, opt, compute_dtype="bfloat16")
  state, metrics = step(_state(opt), _batch())
  chex.assert_trees_all_equal_dtypes(state.params, _params())
  assert state.opt_state.exp_avg_sq["w1"].dtype == jnp.float32
  assert metrics["loss"].dtype == jnp.float32 and metrics["grad_norm"].dtype == jnp.float32
  f32_state, f32_metrics = make_train_step(_mlp_loss, opt)(_state(opt), _batch())
  np.testing.assert_allclose(metrics["loss"], f32_metrics["loss"], rtol=2e-2)
  assert float(metrics["loss"]) != float(f32_metrics["loss"])  # it did compute in bf16


@pytest.mark.parametrize("kwargs,match", [
    ({"grad_accum_steps": 0}, "grad_accum_steps must be an integer >= 1, got 0"),
    ({"remat": "everything"}, "remat must be one of .* got 'everything'"),
    ({"compute_dtype": "bf16"}, "compute_dtype must be one of .* got 'bf16'"),
    ({"steps_per_call": 0}, "steps_per_call must be an integer >= 1, got 0"),
])
def test_bad_step_options_are_one_line_errors(kwargs, match):
  with pytest.raises(InputError, match=match):
    make_train_step(_mlp_loss, optax.sgd(0.1), **kwargs)


# --- on-device data (collect) and steps_per_call ---------------------------------------------

def _collect(state, rng):
  """Data made on the device: a fresh regression batch each step; counts the samples drawn."""
  x = jax.random.normal(rng, (16, 6))
  batch = {"x": x, "y": jnp.sin(x[:, :1])}
  drawn = state.data_state["drawn"] + 16
  return state.replace(data_state={"drawn": drawn}), batch, {"drawn": drawn}


def _collect_state(opt, seed=0):
  return TrainState.create(_params(seed), opt, jax.random.key(seed), data_state={"drawn": jnp.zeros((), jnp.int32)})


def test_collect_runs_before_the_loss_and_its_state_is_carried():
  opt = optax.adam(1e-2)
  step = make_train_step(_mlp_loss, opt, collect=_collect)
  state = _collect_state(opt)
  losses = []
  for _ in range(30):
    state, metrics = step(state)
    losses.append(float(metrics["loss"]))
  assert int(state.data_state["drawn"]) == 30 * 16 == int(metrics["drawn"])
  assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_steps_per_call_equals_single_steps():
  opt = optax.adam(1e-2)
  single = make_train_step(_mlp_loss, opt, collect=_collect)
  scanned = make_train_step(_mlp_loss, opt, collect=_collect, steps_per_call=5)
  a, b = _collect_state(opt), _collect_state(opt)
  for _ in range(10):
    a, ma = single(a)
  for _ in range(2):
    b, mb = scanned(b)
  chex.assert_trees_all_close(jax.device_get(a), jax.device_get(b), **_steps_tol(10))
  assert int(mb["drawn"]) == 160  # integer metrics: the last step's value
  assert scanned.jitted._cache_size() == 1


def test_host_batches_stacked_for_steps_per_call():
  opt = optax.sgd(0.1)
  batches = [_batch(16, seed=i) for i in range(4)]
  single = make_train_step(_mlp_loss, opt)
  scanned = make_train_step(_mlp_loss, opt, steps_per_call=4)
  a = _state(opt)
  for b in batches:
    a, _ = single(a, b)
  b, metrics = scanned(_state(opt), jax.tree.map(lambda *x: np.stack(x), *batches))
  chex.assert_trees_all_close(jax.device_get(a.params), jax.device_get(b.params), **_steps_tol(4))
  assert metrics["loss"].shape == ()


# --- vmapped runs -----------------------------------------------------------------------------

def _stack(states):
  return jax.tree.map(lambda *x: jnp.stack(x), *states)


def test_vmapped_runs_equal_separate_runs_and_shard_over_data():
  opt = optax.inject_hyperparams(optax.adam)(learning_rate=1e-2)
  lrs = [1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 3e-2, 5e-2, 1e-1]  # stable: runs compare to rounding
  states = []
  for i, lr in enumerate(lrs):
    s = _collect_state(opt, seed=i)
    s.opt_state.hyperparams["learning_rate"] = jnp.asarray(lr, jnp.float32)
    states.append(s)
  separate = []
  step = make_train_step(_mlp_loss, opt, collect=_collect, donate=False)
  for s in states:
    for _ in range(4):
      s, _ = step(s)
    separate.append(jax.device_get(s))

  mesh = make_mesh((("data", -1),))
  stacked = _stack(states)
  ss = tree_shardings(stacked, mesh, run_axis="data")
  vstep = make_train_step(_mlp_loss, opt, collect=_collect, vmap_runs=True, steps_per_call=2,
                          state_sharding=ss)
  state = jax.device_put(stacked, ss)
  assert state.params["w1"].sharding.spec == P("data")
  for _ in range(2):
    state, metrics = vstep(state)
  assert metrics["loss"].shape == (8,)
  chex.assert_trees_all_close(jax.device_get(state), _stack(separate), **_steps_tol(4))


def test_vmapped_guard_counts_skips_per_run():
  opt = optax.sgd(0.1)

  def loss_fn(params, batch, rng, extra):
    loss, m = _mlp_loss(params, batch, rng, extra)
    return jnp.where(batch["poison"], jnp.nan, loss), m

  batch = _batch(16)
  runs = _stack([_state(opt, 0), _state(opt, 1)])
  step = make_train_step(loss_fn, opt, vmap_runs=True)
  poisoned = {**jax.tree.map(lambda x: np.stack([x, x]), batch), "poison": np.array([False, True])}
  before = jax.device_get(runs.params)
  state, metrics = step(runs, poisoned)
  np.testing.assert_array_equal(metrics["nonfinite_skipped"], [0, 1])
  np.testing.assert_array_equal(jax.device_get(state.params)["w1"][1], before["w1"][1])
  assert not np.array_equal(jax.device_get(state.params)["w1"][0], before["w1"][0])


def test_reusing_a_donated_state_is_refused_with_a_clear_message():
  opt = optax.sgd(0.1)
  step = make_train_step(_mlp_loss, opt)
  state = _state(opt)
  step(state, _batch())
  with pytest.raises(InputError, match="donated to an earlier step call"):
    step(state, _batch())
