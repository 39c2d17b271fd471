"""MoMo / MoMo-Adam: faithfulness to the official code, optax parity, and train-step plumbing.

The reference trajectories in tests/data/momo_reference.npz come from the authors' PyTorch code
run in float64 (scripts/make_momo_fixture.py): a 5-6-3 tanh MLP with 25% label noise, batches
of 16, 50 steps, with params, tau_k and the lower bound recorded after every step.
"""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.errors import InputError
from jaxlab.optim import MomoAdamState, MomoState, make_optimizer, momo, momo_adam, momo_frozen
from tests.support.tolerances import ops_rtol, steps_tol

# One MoMo step on the fixture MLP (5 -> 6 -> 3, batches of 16-64), per parameter: the forward and
# backward dots, the batch mean, and MoMo's global sums <d, x> and ||d||^2 over all 57 parameters:
# ~150 rounded operations. Two programs running the same steps agree to that, step after step.
MOMO_STEP_OPS = 150

_REF = np.load(pathlib.Path(__file__).parents[1] / "data" / "momo_reference.npz")
_META = json.loads(str(_REF["meta"]))["configs"]
_PROB = {k.split("/", 1)[1]: _REF[k] for k in _REF.files if k.startswith("problem/")}
_KEYS = ("w1", "b1", "w2", "b2")
_RENAME = {"lr": "learning_rate", "lb": "lower_bound", "use_fstar": "adapt_lower_bound",
           "betas": None}


def _from_official(name: str) -> optax.GradientTransformationExtraArgs:
  """Our transform for a fixture config, translating the official keyword names."""
  cfg = _META[name]
  kw = {_RENAME.get(k, k): v for k, v in cfg["kwargs"].items()}
  if "divide" in kw:
    kw["weight_decay_mode"] = "divide" if kw.pop("divide") else "adamw"
  return (momo if cfg["optimizer"] == "Momo" else momo_adam)(**kw)


def _mlp_loss(params, x, y):
  logits = jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]
  return jnp.mean(jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, y[:, None], 1)[:, 0])


def _run(opt, dtype=jnp.float32, steps=50):
  """50 steps on the fixture problem under one jit; returns flat params, tau and lb per step."""
  params = {k: jnp.asarray(_PROB[k], dtype) for k in _KEYS}
  x, y = jnp.asarray(_PROB["x"], dtype), jnp.asarray(_PROB["y"])

  def body(carry, idx):
    params, state = carry
    loss, grads = jax.value_and_grad(_mlp_loss)(params, x[idx], y[idx])
    updates, state = opt.update(grads, state, params, value=loss)
    params = optax.apply_updates(params, updates)
    flat = jnp.concatenate([params[k].reshape(-1) for k in _KEYS])
    inner = getattr(state, "inner_state", state)  # under inject_hyperparams
    return (params, state), (flat, getattr(inner, "step_size", loss), inner.lb)

  run = jax.jit(lambda p: jax.lax.scan(body, (p, opt.init(p)), _PROB["batches"][:steps])[1])
  flat, tau, lb = run(params)
  return np.asarray(flat, np.float64), np.asarray(tau, np.float64), np.asarray(lb, np.float64)


def _rel(a, b, axis=None):
  return np.max(np.linalg.norm(a - b, axis=axis) / np.maximum(np.linalg.norm(b, axis=axis), 1e-12))


def _errors(name, got):
  params, tau, lb = got
  ref = lambda k: _REF[f"{name}/{k}"]
  return (_rel(params, ref("params")[1:].astype(np.float64), axis=1),
          np.max(np.abs(tau - ref("tau")) / np.abs(ref("tau"))),
          np.max(np.abs(lb - ref("lb")) / np.maximum(np.abs(ref("lb")), 1e-3)))


@pytest.mark.parametrize("name", sorted(_META))
def test_matches_official_code_in_float64(name):
  # Same arithmetic as the reference: any deviation in the update rule shows up far above 1e-5.
  with jax.enable_x64(True):
    got = _run(_from_official(name), jnp.float64)
  err_params, err_tau, err_lb = _errors(name, got)
  assert err_params <= 1e-5, err_params  # ~3e-8 observed: the fixture stores params in f32.
  assert err_tau <= 1e-5, err_tau
  assert err_lb <= 1e-5, err_lb


@pytest.mark.parametrize("name", ["momo_fstar_bc_wd", "momo_adam_fstar_wd", "momo_adam_wd_adamw"])
def test_matches_official_code_in_float32(name):
  # f32 rounding in h = fbar - gamma + <d, x> (a difference of O(1) terms) is amplified by the
  # min/[.]_+ and by 50 steps; observed up to 4e-5 (params) and 4e-4 (tau) vs the f64 reference.
  err_params, err_tau, err_lb = _errors(name, _run(_from_official(name)))
  assert err_params <= 2e-4 and err_tau <= 3e-3 and err_lb <= 1e-4, (err_params, err_tau, err_lb)


@pytest.mark.parametrize("name", ["momo", "momo_bc", "momo_wd", "momo_adam_wd_divide"])
def test_fixture_exercises_both_branches_of_the_step(name):
  # Otherwise the faithfulness test could pass with the Polyak term (or the cap) broken.
  kw, tau = _META[name]["kwargs"], _REF[f"{name}/tau"]
  bias_corrected = _META[name]["optimizer"] == "MomoAdam" or kw.get("bias_correction", False)
  rho = 1 - 0.9 ** np.arange(1, 51) if bias_corrected else np.ones(50)
  capped = np.isclose(tau, kw["lr"] / rho, rtol=1e-9)
  assert 0 < capped.sum() < 50


def test_lower_bound_estimate_moves_on_noisy_labels():
  lb = _REF["momo_fstar/lb"]
  assert lb.max() > 0.05 and len(np.unique(lb)) > 10


@pytest.mark.parametrize("adapt", [True])  # False is the same code path minus the lb update.
@pytest.mark.parametrize("ours, theirs", [
    (lambda a: momo(learning_rate=5.0, adapt_lower_bound=a),
     lambda a: optax.contrib.momo(learning_rate=5.0, adapt_lower_bound=a)),
    (lambda a: momo_adam(learning_rate=1.0, adapt_lower_bound=a),
     lambda a: optax.contrib.momo_adam(learning_rate=1.0, adapt_lower_bound=a)),
], ids=["momo", "momo_adam"])
def test_equals_optax_contrib_without_weight_decay(ours, theirs, adapt):
  with jax.enable_x64(True):
    a, _, lb = _run(ours(adapt), jnp.float64)
    b, _, lb_b = _run(theirs(adapt), jnp.float64)
  np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(lb, lb_b, rtol=1e-10, atol=1e-12)


def test_weight_decay_is_proximal_not_optax_contrib():
  """x+ = (x - tau d) / (1 + alpha lambda); optax.contrib computes x / (1 + alpha lambda) - tau d."""
  x, g = jnp.array([1.0, -2.0, 3.0]), jnp.array([0.5, 0.5, -1.0])
  lr, wd = 0.5, 0.3
  updates, state = momo(learning_rate=lr, weight_decay=wd).update(
      g, momo(learning_rate=lr, weight_decay=wd).init(x), x, value=2.0)
  tau = state.step_size  # first step: d = g
  np.testing.assert_allclose(x + updates, (x - tau * g) / (1 + lr * wd), rtol=ops_rtol(8))  # a few operations
  theirs = optax.contrib.momo(learning_rate=lr, weight_decay=wd)
  upd_optax, _ = theirs.update(g, theirs.init(x), x, value=2.0)
  assert not np.allclose(updates, upd_optax, rtol=1e-3)


_OPTS = {
    "momo": lambda: momo(learning_rate=1.0),
    "momo_all": lambda: momo(1.0, weight_decay=1e-2, adapt_lower_bound=True, bias_correction=True),
    "momo_adam": lambda: momo_adam(learning_rate=0.1),
    "momo_adam_adamw": lambda: momo_adam(0.1, weight_decay=1e-2, weight_decay_mode="adamw"),
}


def _parabola_step(opt, target):
  def step(x, state):
    sq_dist = lambda x: sum(jnp.sum((a - b) ** 2) for a, b in zip(jax.tree.leaves(x),
                                                                   jax.tree.leaves(target)))
    loss, g = jax.value_and_grad(sq_dist)(x)
    updates, state = opt.update(g, state, x, value=loss, unexpected_extra_arg=1)
    return optax.apply_updates(x, updates), state
  return step


@pytest.mark.parametrize("name", sorted(_OPTS))
def test_no_recompile_on_second_call_and_extra_args_accepted(name):
  opt = _OPTS[name]()
  step = jax.jit(_parabola_step(opt, jnp.array([1.0, -1.0, 1.0])))
  x = jnp.array([-1.0, 10.0, 1.0])
  state = opt.init(x)
  for _ in range(3):
    x, state = step(x, state)
  assert step._cache_size() == 1


@pytest.mark.parametrize("name", sorted(_OPTS))
def test_converges_under_scan(name):
  opt, target = _OPTS[name](), jnp.array([1.0, -1.0, 1.0])
  step = _parabola_step(opt, target)
  x0 = jnp.array([-1.0, 10.0, 1.0])
  (x, _), _ = jax.lax.scan(lambda c, _: (step(*c), None), (x0, opt.init(x0)), length=300)
  # Started 11 away; weight decay shifts the minimiser a little.
  np.testing.assert_allclose(x, target, atol=0.05)


@pytest.mark.parametrize("name", sorted(_OPTS))
def test_bf16_params_keep_state_dtypes(name):
  opt = _OPTS[name]()
  params = {"w": jnp.linspace(-1.0, 1.0, 12, dtype=jnp.bfloat16).reshape(3, 4),
            "b": jnp.zeros(4, jnp.float32)}  # mixed dtypes on purpose
  target = jnp.ones((3, 4), jnp.bfloat16)
  loss_fn = lambda p: jnp.sum((p["w"].astype(jnp.float32) - target) ** 2) + jnp.sum(p["b"] ** 2)

  @jax.jit
  def step(p, s):
    loss, g = jax.value_and_grad(loss_fn)(p)
    u, s = opt.update(g, s, p, value=loss)
    return optax.apply_updates(p, u), s, u, loss

  state0 = opt.init(params)
  spec = lambda t: jax.tree.map(lambda a: (a.shape, a.dtype, getattr(a, "weak_type", False)), t)
  p, s, losses = params, state0, []
  for _ in range(10):
    p, s, u, loss = step(p, s)
    losses.append(float(loss))
  assert spec(s) == spec(state0)
  assert jax.tree.map(lambda a: a.dtype, u) == jax.tree.map(lambda a: a.dtype, params)
  assert s.step_size.dtype == s.lb.dtype == jnp.float32 and s.step_size.shape == ()
  assert losses[-1] < 0.5 * losses[0]
  assert step._cache_size() == 1


@pytest.mark.parametrize("factory, kwargs", [
    (momo, dict(learning_rate=5.0, beta=0.9, weight_decay=0.05, adapt_lower_bound=True)),
    (momo_adam, dict(learning_rate=1.0, b1=0.9, weight_decay=0.05, weight_decay_mode="adamw")),
])
def test_inject_hyperparams_matches_plain_and_lr_can_change(factory, kwargs):
  injected = optax.inject_hyperparams(factory)(**kwargs)
  np.testing.assert_allclose(_run(injected, steps=10)[0], _run(factory(**kwargs), steps=10)[0],
                             **steps_tol(10, MOMO_STEP_OPS))
  # Setting the learning rate to zero in the state freezes the params.
  params = {k: jnp.asarray(_PROB[k]) for k in _KEYS}
  state = injected.init(params)
  state.hyperparams["learning_rate"] = jnp.zeros([])
  loss, g = jax.jit(jax.value_and_grad(_mlp_loss))(params, _PROB["x"], _PROB["y"])
  updates, state = jax.jit(injected.update)(g, state, params, value=loss)
  assert all(float(jnp.abs(u).max()) == 0.0 for u in jax.tree.leaves(updates))


@pytest.mark.parametrize("factory", [momo, momo_adam])
def test_learning_rate_schedule_is_evaluated_at_the_step_count(factory):
  sched = lambda count: jnp.where(count < 3, 0.0, 0.5)
  flat = _run(factory(learning_rate=sched), steps=6)[0]
  init = np.concatenate([_PROB[k].reshape(-1) for k in _KEYS])
  np.testing.assert_array_equal(flat[:3], np.broadcast_to(init, (3, init.size)))  # lr 0: x - 0 * d is x, exactly
  assert not np.allclose(flat[3], flat[2])


def test_states_are_namedtuples_with_metric_fields():
  x = jnp.zeros(3)
  for opt, cls in [(momo(), MomoState), (momo_adam(), MomoAdamState)]:
    state = opt.init(x)
    assert isinstance(state, cls)
    assert {"step_size", "lb"} <= set(cls._fields)
  assert float(momo(lower_bound=0.3).init(x).lb) == pytest.approx(0.3)


@pytest.mark.parametrize("factory", [momo, momo_adam])
def test_state_leaves_are_distinct_buffers_so_they_can_be_donated(factory):
  state = factory(lower_bound=0.0).init({"w": jnp.zeros(3)})
  leaves = [leaf for leaf in jax.tree.leaves(state)]
  assert len({id(leaf) for leaf in leaves}) == len(leaves)
  step = jax.jit(lambda s: jax.tree.map(lambda a: a + 1, s), donate_argnums=0)
  jax.block_until_ready(step(state))  # raises if two leaves share a buffer


def test_registry_builds_ours():
  opt = make_optimizer("momo", learning_rate=1.0)
  assert isinstance(opt.init(jnp.zeros(2)), MomoState)
  assert isinstance(make_optimizer("momo_adam").init(jnp.zeros(2)), MomoAdamState)


@pytest.mark.parametrize("factory", [momo, momo_adam])
def test_update_without_value_or_params_raises(factory):
  opt, x = factory(), jnp.ones(3)
  state = opt.init(x)
  with pytest.raises(ValueError, match="value=loss"):
    opt.update(x, state, x)
  with pytest.raises(ValueError, match="params"):
    opt.update(x, state, None, value=1.0)
  with pytest.raises(ValueError, match="scalar"):
    opt.update(x, state, x, value=jnp.ones(2))


@pytest.mark.parametrize("build, match", [
    (lambda: momo(beta=1.0), r"beta.*got 1\.0"),
    (lambda: momo(beta=-0.1), r"beta.*got -0\.1"),
    (lambda: momo(learning_rate=-1.0), r"learning_rate.*got -1\.0"),
    (lambda: momo(learning_rate=float("nan")), r"learning_rate.*got nan"),
    (lambda: momo(weight_decay=-1e-3), r"weight_decay.*got -0\.001"),
    (lambda: momo_adam(learning_rate=-1e-3), r"learning_rate.*got -0\.001"),
    (lambda: momo_adam(b1=1.0), r"b1.*got 1\.0"),
    (lambda: momo_adam(b2=1.5), r"b2.*got 1\.5"),
    (lambda: momo_adam(eps=-1e-8), r"eps.*got -1e-08"),
    (lambda: momo_adam(weight_decay_mode="decoupled"), r"weight_decay_mode.*decoupled"),
])
def test_bad_hyperparameters_raise_naming_the_value(build, match):
  with pytest.raises(ValueError, match=match):
    build()


@pytest.mark.parametrize("factory", [momo, momo_adam])
def test_params_sharded_over_8_devices_match_unsharded(factory):
  opt = factory(learning_rate=0.5, weight_decay=0.01)
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]), ("data",))
  r = np.random.default_rng(0)
  params = {"w": jnp.asarray(r.normal(size=(16, 8)), jnp.float32), "b": jnp.zeros(8)}
  target = jnp.asarray(r.normal(size=(16, 8)), jnp.float32)
  step = jax.jit(_parabola_step(opt, {"w": target, "b": jnp.ones(8)}))

  def run(p):
    s = opt.init(p)
    for _ in range(5):
      p, s = step(p, s)
    return p, s

  sharded = {"w": jax.device_put(params["w"], NamedSharding(mesh, P("data"))),
             "b": jax.device_put(params["b"], NamedSharding(mesh, P()))}
  (p1, s1), (p8, s8) = run(params), run(sharded)
  assert p8["w"].sharding.spec == P("data")
  # 8 shards sum <d, x> and ||d||^2 over 136 parameters in another order: 5 steps of ~150 operations.
  np.testing.assert_allclose(p8["w"], p1["w"], **steps_tol(5, MOMO_STEP_OPS))
  np.testing.assert_allclose(s8.step_size, s1.step_size, rtol=steps_tol(5, MOMO_STEP_OPS)["rtol"])


def test_trains_through_the_shared_train_step_on_8_devices():
  from jaxlab.train import TrainState, batch_sharding, make_mesh, make_train_step, tree_shardings

  opt = momo(learning_rate=5.0, adapt_lower_bound=True)
  params = {k: jnp.asarray(_PROB[k]) for k in _KEYS}
  loss_fn = lambda p, batch, rng, extra: (_mlp_loss(p, batch["x"], batch["y"]), {})
  init = TrainState.create(jax.tree.map(jnp.copy, params), opt, jax.random.key(0))
  mesh = make_mesh((("data", -1),))
  ss, bs = tree_shardings(init, mesh), batch_sharding(mesh)
  step = make_train_step(loss_fn, opt, state_sharding=ss, batch_sharding=bs)  # donates state
  state = jax.device_put(init, ss)
  batch = jax.device_put({"x": _PROB["x"], "y": _PROB["y"]}, bs)  # 64 samples over 8 devices
  losses = []
  for _ in range(30):
    state, metrics = step(state, batch)
    losses.append(float(metrics["loss"]))
  assert losses[-1] < 0.8 * losses[0]
  assert {"opt/step_size", "opt/lb"} <= set(metrics)
  assert float(metrics["opt/step_size"]) > 0 and float(metrics["opt/lb"]) > 0
  assert step.jitted._cache_size() == 1
  # Same numbers as driving the transform by hand on one device.
  x, y = jnp.asarray(_PROB["x"]), jnp.asarray(_PROB["y"])

  @jax.jit
  def by_hand(p, s):
    loss, g = jax.value_and_grad(_mlp_loss)(p, x, y)
    u, s = opt.update(g, s, p, value=loss)
    return optax.apply_updates(p, u), s

  p, s = params, opt.init(params)
  for _ in range(30):
    p, s = by_hand(p, s)
  np.testing.assert_allclose(state.params["w1"], p["w1"], **steps_tol(30, MOMO_STEP_OPS))


def test_f32_moments_with_bf16_params_let_the_second_moment_decay():
  """With bf16 moments v cannot decay (0.999 is below bf16's resolution); mu_dtype=f32 fixes it."""
  params = {"w": jnp.ones(3, jnp.bfloat16)}
  out = {}
  for mu_dtype in (None, jnp.float32):
    opt = momo_adam(learning_rate=1e-3, mu_dtype=mu_dtype)
    state = opt.init(params)
    p = params
    u, state = opt.update({"w": jnp.full(3, 1.0, jnp.bfloat16)}, state, p, value=jnp.asarray(1.0))
    for _ in range(200):
      u, state = opt.update({"w": jnp.zeros(3, jnp.bfloat16)}, state, p, value=jnp.asarray(1.0))
    out[mu_dtype] = float(state.exp_avg_sq["w"][0])
    assert u["w"].dtype == jnp.bfloat16
  # 200 float32 products by float32(0.999), itself rounded: 400 roundings.   # 8.19e-4
  np.testing.assert_allclose(out[jnp.float32], 1e-3 * 0.999 ** 200, rtol=ops_rtol(400))
  assert out[None] > 9.9e-4                                                      # stuck near 1e-3


@pytest.mark.parametrize("factory", [momo, momo_adam])
def test_all_true_mask_equals_no_mask_and_all_false_equals_no_decay(factory):
  params = {"a": jnp.linspace(-1.0, 1.0, 6).reshape(2, 3), "b": jnp.linspace(0.5, 1.5, 3)}
  grads = jax.tree.map(lambda x: jnp.cos(3 * x), params)

  def run(**kw):
    opt = factory(learning_rate=0.5, **kw)
    state = opt.init(params)
    p = params
    for i in range(5):
      u, state = opt.update(grads, state, p, value=jnp.asarray(2.0 - 0.1 * i))
      p = optax.apply_updates(p, u)
    return p

  full = run(weight_decay=0.3)
  tol = steps_tol(5, 20)  # 5 steps on 9 parameters: ~20 operations each
  chex_close = lambda a, b: jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, **tol), a, b)
  chex_close(run(weight_decay=0.3, mask={"a": True, "b": True}), full)
  chex_close(run(weight_decay=0.3, mask=lambda p: {"a": False, "b": False}), run())
  partial = run(weight_decay=0.3, mask={"a": True, "b": False})
  assert not np.allclose(partial["a"], run()["a"]) and not np.allclose(partial["b"], full["b"])


@pytest.mark.parametrize("build,match", [
    (lambda: momo(lower_bound=float("nan")), "lower_bound must be finite, got nan"),
    (lambda: momo(adapt_lower_bound="no"), "adapt_lower_bound must be True or False, got 'no'"),
    (lambda: momo_adam(adapt_lower_bound=1), "adapt_lower_bound must be True or False, got 1"),
    (lambda: momo(learning_rate=float("inf")), "learning_rate must be a finite number >= 0.0, got inf"),
    (lambda: momo(learning_rate="fast"), "learning_rate must be a number, got 'fast'"),
])
def test_more_bad_hyperparameters(build, match):
  with pytest.raises(InputError, match=match):
    build()


def test_integer_params_are_refused():
  with pytest.raises(InputError, match="params must be floating point, got a int32 leaf"):
    momo().init({"w": jnp.ones(3, jnp.int32)})


def test_eps_zero_is_refused_as_it_puts_nan_on_a_zero_gradient():
  with pytest.raises(InputError, match=r"momo_adam: eps must be a finite number > 0 \(added to sqrt\(v\): 0 gives 0/0"):
    momo_adam(eps=0.0)
  opt, x = momo_adam(eps=1e-12), jnp.array([1.0, 2.0])
  g = jnp.array([0.5, 0.0])  # the second coordinate's gradient is zero: 0 / (0 + eps) = 0
  u, _ = jax.jit(lambda g, s, x: opt.update(g, s, x, value=jnp.ones(())))(g, opt.init(x), x)
  assert np.isfinite(np.asarray(u)).all() and float(u[1]) == 0.0


@pytest.mark.parametrize("factory", [momo, momo_adam])
def test_a_schedule_turning_negative_is_refused_when_built(factory):
  name = factory.__name__
  with pytest.raises(InputError, match=rf"^{name}: learning_rate \(a schedule\) gives -0.5 at step 100000; must be "):
    factory(learning_rate=optax.linear_schedule(1.0, -0.5, 50_000))
  with pytest.raises(InputError, match=r"gives nan at step 0"):
    factory(learning_rate=lambda count: jnp.nan * count)
  factory(learning_rate=optax.cosine_decay_schedule(1.0, 100))  # >= 0 everywhere: accepted
  # a schedule of traced values (the transform built inside jit) cannot be checked there, and passes
  jax.jit(lambda lr: factory(learning_rate=lambda count: -lr).init(jnp.ones(2)))(1.0)


@pytest.mark.parametrize("factory", [momo, momo_adam])
def test_a_lower_bound_above_the_loss_is_flagged_in_the_state_and_warned_once_eagerly(factory):
  x = jnp.ones(3)
  loss, g = jax.value_and_grad(lambda x: jnp.sum(x**2))(x)  # 3.0
  frozen = factory(lower_bound=5.0)
  step = jax.jit(lambda g, s, x, loss: frozen.update(g, s, x, value=loss))
  _, state = step(g, frozen.init(x), x, loss)
  assert float(state.step_size) == 0.0 and bool(jax.jit(momo_frozen)(state, loss))
  with pytest.warns(RuntimeWarning, match=rf"{factory.__name__}: step_size=0 with lower bound lb=5 above the loss 3") as seen:
    state = frozen.init(x)
    for _ in range(3):
      _, state = frozen.update(g, state, x, value=loss)
  assert len([w for w in seen if issubclass(w.category, RuntimeWarning)]) == 1  # once per transform
  moving = factory(lower_bound=0.0)
  _, state = moving.update(g, moving.init(x), x, value=loss)
  assert float(state.step_size) > 0 and not bool(momo_frozen(state, loss))
