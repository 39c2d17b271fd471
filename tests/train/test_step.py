"""The one train step: the loss shapes it must serve, value passing, guards and input checks."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.errors import InputError
from jaxlab.train import TrainState, batch_sharding, make_mesh, make_train_step, tree_shardings
from tests.support.tolerances import ops_rtol

# The linear problem's loss: 32 squared errors of 4-term dot products, their mean.
LOSS_RTOL = ops_rtol(4 + 1 + 32)


class _RecordValueState(NamedTuple):
  step_size: jax.Array  # [] the value the step passed, surfaced as opt/step_size
  lb: jax.Array         # []


def _record_value() -> optax.GradientTransformationExtraArgs:
  def init(params):
    del params
    return _RecordValueState(jnp.zeros(()), jnp.zeros(()))

  def update(updates, state, params=None, *, value, **extra):
    del params, extra
    return jax.tree.map(lambda g: -0.1 * g, updates), _RecordValueState(value, state.lb - 1.0)

  return optax.GradientTransformationExtraArgs(init, update)


def _linear_loss(params, batch, rng, extra):
  del rng, extra
  err = batch["x"] @ params["w"] - batch["y"]
  return jnp.mean(err ** 2), {"abs_err": jnp.mean(jnp.abs(err))}


def _linear_problem(n=32, d=4, seed=0):
  r = np.random.default_rng(seed)
  x = r.normal(size=(n, d)).astype(np.float32)
  return {"x": x, "y": (x @ r.normal(size=(d,))).astype(np.float32)}


def _state(optimizer, d=4, extra=()):
  return TrainState.create({"w": jnp.zeros(d)}, optimizer, jax.random.key(0), extra)


def test_extra_args_optimizer_receives_value_and_state_scalars_become_metrics():
  opt = _record_value()
  step = make_train_step(_linear_loss, opt)
  state, batch = _state(opt), _linear_problem()
  loss0, _ = _linear_loss(state.params, batch, None, ())
  state, metrics = step(state, batch)
  # loss0 op by op, the step's inside its program: rounding apart.
  np.testing.assert_allclose(state.opt_state.step_size, loss0, rtol=LOSS_RTOL)
  np.testing.assert_allclose(metrics["opt/step_size"], loss0, rtol=LOSS_RTOL)
  assert float(metrics["opt/lb"]) == -1.0
  assert {"loss", "grad_norm", "nonfinite_skipped", "abs_err"} <= set(metrics)


def test_value_reaches_transform_inside_a_chain():
  opt = optax.chain(optax.clip_by_global_norm(1.0), _record_value())
  step = make_train_step(_linear_loss, opt)
  state, metrics = step(_state(opt), _linear_problem())
  assert float(metrics["opt/step_size"]) > 0


def test_plain_transform_and_no_recompile_on_second_call():
  opt = optax.sgd(0.1)
  step = make_train_step(_linear_loss, opt)
  state, batch = _state(opt), _linear_problem()
  losses = []
  for _ in range(3):
    state, metrics = step(state, batch)
    losses.append(float(metrics["loss"]))
  assert losses[2] < losses[0]
  assert step.jitted._cache_size() == 1
  assert int(state.step) == 3


def _poisonable_loss(params, batch, rng, extra):
  loss, m = _linear_loss(params, batch, rng, extra)
  return jnp.where(batch["poison"], jnp.nan, loss), m


@pytest.mark.parametrize("guard", ["cond", "select"])
def test_nonfinite_step_keeps_params_and_moments_but_advances_counters(guard):
  opt = optax.adam(0.1)
  step = make_train_step(_poisonable_loss, opt, guard=guard)
  batch = _linear_problem()
  state, _ = step(_state(opt), {**batch, "poison": np.array(False)})
  before = jax.tree.map(np.asarray, state)
  state, metrics = step(state, {**batch, "poison": np.array(True)})
  assert int(metrics["nonfinite_skipped"]) == 1 and int(state.step) == 2
  # Bit equality is the guard's contract: a skipped step selects the old buffers unchanged.
  np.testing.assert_array_equal(before.params["w"], state.params["w"])
  np.testing.assert_array_equal(before.opt_state[0].mu["w"], state.opt_state[0].mu["w"])
  np.testing.assert_array_equal(before.opt_state[0].nu["w"], state.opt_state[0].nu["w"])
  assert int(state.opt_state[0].count) == 2  # the counter follows state.step


def test_schedule_stays_aligned_with_the_step_after_skips():
  """Skipped steps advance the optimizer's counters: the schedule is evaluated at state.step."""
  schedule = optax.linear_schedule(1.0, 0.0, 10)
  opt = optax.inject_hyperparams(optax.sgd)(learning_rate=schedule)
  step = make_train_step(_poisonable_loss, opt)
  state, batch = _state(opt), _linear_problem()
  for i in range(6):
    state, metrics = step(state, {**batch, "poison": np.array(i in (1, 2, 4))})
  assert int(metrics["nonfinite_skipped"]) == 3
  assert int(state.opt_state.count) == int(state.step) == 6
  # The last (unskipped) step used the rate for count 5, as a run without skips would.
  np.testing.assert_allclose(metrics["opt/learning_rate"], schedule(5), rtol=ops_rtol(4))


def test_select_guard_equals_cond_guard_over_a_run_with_skips():
  opt = optax.adam(0.05)
  batch = _linear_problem()
  out = {}
  for guard in ("cond", "select"):
    step = make_train_step(_poisonable_loss, opt, guard=guard)
    state = _state(opt)
    for i in range(8):
      state, _ = step(state, {**batch, "poison": np.array(i % 3 == 1)})
    out[guard] = jax.tree.map(np.asarray, state)
  # Same arithmetic in two programs (a cond branch is compiled on its own, so XLA may fuse it
  # differently): 8 Adam steps, each ~50 rounded operations per parameter, apart at most.
  assert jax.tree.structure(out["cond"]) == jax.tree.structure(out["select"])
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=ops_rtol(8 * 50), atol=0.1 * ops_rtol(8 * 50)),
               out["cond"], out["select"])
  assert int(out["cond"].step) == int(out["select"].step) == 8


def test_wrong_batch_shape_names_expected_and_got():
  opt = optax.sgd(0.1)
  batch = _linear_problem()
  step = make_train_step(_linear_loss, opt, batch_spec=jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), batch))
  bad = {"x": batch["x"][:, :3], "y": batch["y"]}
  with pytest.raises(InputError, match=r"batch\['x'\]: expected float32\[32, 4\], got float32\[32, 3\]"):
    step(_state(opt), bad)


def test_td_loss_with_target_params_in_extra():
  """RL shape: the loss reads target params from ``extra``; ``update_extra`` syncs them."""
  period = 3

  def td_loss(params, batch, rng, target):
    q = batch["x"] @ params["w"]
    target_q = batch["y"] + 0.9 * jax.lax.stop_gradient(batch["x"] @ target["w"])
    return jnp.mean((q - target_q) ** 2), {}

  def sync(state):
    return jax.tree.map(lambda t, p: jnp.where(state.step % period == 0, p, t),
                        state.extra, state.params)

  opt = optax.sgd(0.05)
  state = _state(opt, extra={"w": jnp.zeros(4)})
  step = make_train_step(td_loss, opt, update_extra=sync)
  batch = _linear_problem()
  for i in range(1, 7):
    state, _ = step(state, batch)
    if i % period == 0:
      np.testing.assert_array_equal(state.extra["w"], state.params["w"])  # a copy: bit-equal
    else:
      assert not np.allclose(state.extra["w"], state.params["w"])


def _contrastive_loss(params, batch, rng, extra):
  """CLIP shape: every row's loss depends on every other row of the *global* batch."""
  del rng, extra
  a = batch["x"] @ params["w"]
  b = batch["x2"] @ params["w"]
  logits = a @ b.T
  labels = jnp.arange(a.shape[0])
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), {}


def _relative_l2_loss(params, batch, rng, extra):
  """PDE shape: ||pred - y|| / ||y|| per sample, averaged."""
  del rng, extra
  pred = batch["x"] @ params["w"]
  num = jnp.linalg.norm(pred - batch["y"], axis=-1)
  return jnp.mean(num / jnp.linalg.norm(batch["y"], axis=-1)), {}


@pytest.mark.parametrize("loss_fn", [_contrastive_loss, _relative_l2_loss])
def test_global_batch_losses_equal_on_1_and_8_devices(loss_fn):
  r = np.random.default_rng(1)
  batch = {"x": r.normal(size=(16, 6)).astype(np.float32),
           "x2": r.normal(size=(16, 6)).astype(np.float32),
           "y": r.normal(size=(16, 3)).astype(np.float32)}
  opt = optax.adam(1e-2)
  init = TrainState.create({"w": jnp.asarray(r.normal(size=(6, 3)), jnp.float32)}, opt, jax.random.key(0))

  def run(devices):
    mesh = make_mesh((("data", -1),), devices)
    ss = tree_shardings(init, mesh)
    bs = batch_sharding(mesh)
    step = make_train_step(loss_fn, opt, state_sharding=ss, batch_sharding=bs, donate=False)
    state = jax.device_put(init, ss)
    b = jax.device_put(batch, bs)
    for _ in range(5):
      state, m = step(state, b)
    return np.asarray(state.params["w"]), float(m["loss"])

  w1, l1 = run(jax.devices()[:1])
  w8, l8 = run(jax.devices())
  # 8 devices sum the gradient in another order: 5 Adam steps, each apart by the rounding of the
  # gradient's 16-term sums and the loss's ~20 operations (errors carried from step to step add up;
  # the gradient entries are O(1), far from the zero where Adam's normalisation would amplify them).
  np.testing.assert_allclose(w8, w1, rtol=ops_rtol(5 * 40), atol=0.1 * ops_rtol(5 * 40))
  np.testing.assert_allclose(l8, l1, rtol=ops_rtol(5 * 40))


def test_create_owns_its_buffers_so_donation_leaves_caller_arrays_alive():
  params = {"w": jnp.ones(4)}
  shared = jnp.zeros(())
  aliasing = optax.GradientTransformation(lambda p: (shared, shared), lambda u, s, p=None: (u, s))
  opt = optax.chain(optax.sgd(0.1), aliasing)
  step = make_train_step(_linear_loss, opt)
  step(TrainState.create(params, opt, jax.random.key(0)), _linear_problem())
  np.testing.assert_array_equal(params["w"], np.ones(4))  # still alive after donation


def test_inject_hyperparams_learning_rate_is_a_metric():
  opt = optax.inject_hyperparams(optax.sgd)(learning_rate=optax.linear_schedule(0.1, 0.0, 10))
  step = make_train_step(_linear_loss, opt)
  state = _state(opt)
  for _ in range(2):
    state, metrics = step(state, _linear_problem())
  np.testing.assert_allclose(metrics["opt/learning_rate"], 0.09, rtol=ops_rtol(4))
