"""Zero-shot inference: argmax, OT with a class prior, FGW, and the prior's input checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.ot_clip import inference, selective
from jaxlab.ot_clip.similarity import similarity
from tests.support.tolerances import log_domain_atol, top2_margin

# Two programs' plans (other shapes, shardings or dtypes) differ by float32 rounding (exponents up
# to 2 / epsilon = 40 from 16-term dots) and by the solver's threshold (1e-5 on the marginals).
# Their argmax predictions are equal wherever the top-2 gap of the scores exceeds that; the tests
# check the gap first, so that the equality is a property of the data, not of this machine.
PLAN_TOL = 2 * log_domain_atol(2 / 0.05, 16 + 16) + 1e-4


def _long_tailed(rng, counts, noise=1.0):
  k1, k2 = jax.random.split(rng)
  classes = jax.random.normal(k1, (len(counts), 8))
  labels = jnp.asarray(np.repeat(np.arange(len(counts)), counts))
  images = classes[labels] + noise * jax.random.normal(k2, (len(labels), 8))
  return images, classes, labels, np.asarray(counts) / np.sum(counts)


def test_zero_shot_is_argmax_of_cosine(rng):
  images, classes, labels, _ = _long_tailed(rng, [20, 20, 20], noise=0.1)
  pred = inference.zero_shot_predict(images, classes)
  np.testing.assert_array_equal(pred, labels)


def test_ot_plan_marginals_are_uniform_images_and_the_prior(rng):
  images, classes, _, prior = _long_tailed(rng, [40, 20, 10, 5])
  p = jnp.exp(jax.jit(inference.ot_zero_shot_plan)(images, classes, 0.1, prior))
  np.testing.assert_allclose(p.sum(1), np.full(75, 1 / 75), atol=1e-5)
  np.testing.assert_allclose(p.sum(0), prior, atol=1e-4)


def test_known_prior_beats_uniform_prior_on_long_tailed_data(rng):
  images, classes, labels, prior = _long_tailed(rng, [200, 60, 20, 8, 4, 2], noise=1.2)
  predict = jax.jit(inference.ot_zero_shot)
  acc_uniform = float(jnp.mean(predict(images, classes, 0.05) == labels))
  acc_prior = float(jnp.mean(predict(images, classes, 0.05, prior) == labels))
  assert acc_prior > acc_uniform + 0.05


def test_fgw_inference_with_alpha_zero_is_ot_inference(rng):
  images, classes, _, prior = _long_tailed(rng, [30, 20, 10])
  np.testing.assert_allclose(
      jax.jit(lambda x, t: inference.fgw_zero_shot_plan(x, t, 0.1, prior, alpha=0.0, num_outer=1))(images, classes),
      jax.jit(lambda x, t: inference.ot_zero_shot_plan(x, t, 0.1, prior))(images, classes), atol=1e-4)


@pytest.mark.parametrize("prior, match", [([0.5, 0.5], "shape"), ([0.5, 0.3, 0.1], "sum to 1"),
                                          ([1.2, -0.1, -0.1], "non-negative")])
def test_bad_class_prior_is_named(prior, match):
  with pytest.raises(ValueError, match="class_prior.*" + match if match != "shape" else "class_prior has shape"):
    inference.ot_zero_shot(jnp.ones((4, 3)), jnp.ones((3, 3)), 0.1, class_prior=prior)


def test_mismatched_dimensions_and_bad_epsilon_raise():
  with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 2\)"):
    inference.zero_shot_predict(jnp.ones((4, 3)), jnp.ones((3, 2)))
  with pytest.raises(ValueError, match="epsilon"):
    inference.ot_zero_shot(jnp.ones((4, 3)), jnp.ones((3, 3)), 0.0)


def _problem(n=200, k=10, d=16, noise=1.0, seed=0):
  """n images around k random class embeddings (balanced, label i % k)."""
  k1, k2 = jax.random.split(jax.random.key(seed))
  classes = jax.random.normal(k1, (k, d))
  labels = jnp.arange(n) % k
  return classes[labels] + noise * jax.random.normal(k2, (n, d)), classes, labels


SCORES = {  # what each predictor takes the argmax of (partial OT's plan is internal)
    "argmax": lambda x, t: similarity(x, t, same_batch=False),
    "ot": lambda x, t: inference.ot_zero_shot_plan(x, t, 0.05),
    "ot_prior": lambda x, t: inference.ot_zero_shot_plan(x, t, 0.05, jnp.linspace(1.0, 2.0, 10) / 15.0),
    "fgw": lambda x, t: inference.fgw_zero_shot_plan(x, t, logit_scale=20.0, num_outer=3),
}

PREDICTORS = {
    "argmax": lambda x, t: inference.zero_shot_predict(x, t),
    "ot": lambda x, t: inference.ot_zero_shot(x, t, 0.05),
    "ot_prior": lambda x, t: inference.ot_zero_shot(x, t, 0.05, jnp.linspace(1.0, 2.0, 10) / 15.0),
    "fgw": lambda x, t: inference.fgw_zero_shot(x, t, logit_scale=20.0, num_outer=3),
    "partial_ot": lambda x, t: selective.partial_ot_confidence(x, t, 0.05, 0.7)[0],
}


@pytest.mark.parametrize("method", PREDICTORS)
def test_a_nan_image_gets_minus_one_and_leaves_the_other_predictions_unchanged(method):
  # One NaN image among 200 used to change 18 other OT predictions (its NaN cost row poisoned
  # the column potentials). Now it has no mass: the others are predicted as without it.
  images, classes, _ = _problem()
  predict = jax.jit(PREDICTORS[method])
  bad = images.at[17, 3].set(jnp.nan).at[150].set(jnp.inf)
  keep = np.setdiff1d(np.arange(200), [17, 150])
  pred = np.asarray(predict(bad, classes))
  assert pred[17] == -1 and pred[150] == -1
  if method in SCORES:
    assert top2_margin(SCORES[method](images[keep], classes)) > PLAN_TOL
  np.testing.assert_array_equal(pred[keep], predict(images[keep], classes))


def test_partial_ot_gives_a_nan_image_zero_confidence():
  images, classes, _ = _problem()
  partial = jax.jit(selective.partial_ot_confidence, static_argnums=(3,))
  pred, conf = partial(images.at[5].set(jnp.nan), classes, 0.05, 0.5)
  assert int(pred[5]) == -1 and float(conf[5]) == 0.0 and bool(jnp.all(jnp.isfinite(conf)))


def test_float64_inputs_with_a_class_prior_keep_float64():
  # The prior used to be cast to float32, and ott's scan then failed on mixed dtypes.
  images, classes, _ = _problem(n=100)
  prior = np.full(10, 0.1)
  plan = jax.jit(inference.ot_zero_shot_plan)
  with jax.enable_x64(True):
    log_p = plan(images.astype(jnp.float64), classes.astype(jnp.float64), 0.05, prior)
    assert log_p.dtype == jnp.float64
    np.testing.assert_allclose(jnp.exp(log_p).sum(0), prior, atol=1e-5)
  log_p32 = plan(images, classes, 0.05, prior)
  assert np.mean(np.argmax(np.asarray(log_p), 1) == np.argmax(np.asarray(log_p32), 1)) > 0.99


def test_bfloat16_inference_runs_in_float32():
  images, classes, _ = _problem(n=100)
  xb, tb = images.astype(jnp.bfloat16), classes.astype(jnp.bfloat16)
  plan = jax.jit(inference.ot_zero_shot_plan)
  log_p = plan(xb, tb, 0.05)
  assert log_p.dtype == jnp.float32
  # bf16 math would move each exponent by ~2**-8 * 40 = 0.16; float32 math moves it by rounding.
  np.testing.assert_allclose(log_p, plan(xb.astype(jnp.float32), tb.astype(jnp.float32), 0.05),
                             rtol=0, atol=PLAN_TOL)


@pytest.mark.parametrize("method", PREDICTORS)
def test_inference_on_an_explicit_mesh_equals_one_device(method):
  # jax.make_mesh's default axes are Explicit: x @ t.T of row-sharded arrays is a type error
  # there, so inference all-gathers its inputs as the losses do.
  assert jax.device_count() == 8
  mesh = jax.make_mesh((8,), ("data",))
  assert all(t == jax.sharding.AxisType.Explicit for t in mesh.axis_types)
  images, classes, _ = _problem(n=64, k=8)
  if method == "ot_prior":
    predict = lambda x, t: inference.ot_zero_shot(x, t, 0.05, jnp.linspace(1.0, 2.0, 8) / 12.0)
  else:
    predict = PREDICTORS[method]
  sharding = NamedSharding(mesh, P("data"))
  xs, ts = jax.device_put(images, sharding), jax.device_put(classes, sharding)
  assert len(xs.sharding.device_set) == 8
  expected = jax.jit(predict)(images, classes)
  if method == "ot_prior":
    assert top2_margin(inference.ot_zero_shot_plan(images, classes, 0.05, jnp.linspace(1.0, 2.0, 8) / 12.0)) > PLAN_TOL
  elif method in SCORES:
    assert top2_margin(SCORES[method](images, classes)) > PLAN_TOL
  np.testing.assert_array_equal(jax.jit(predict)(xs, ts), expected)
  if method == "argmax":  # and outside jit
    np.testing.assert_array_equal(predict(xs, ts), expected)


def test_epsilon_and_logit_scale_name_the_same_temperature():
  images, classes, _ = _problem(n=60)
  plan = jax.jit(inference.ot_zero_shot_plan)
  by_eps = plan(images, classes, epsilon=0.05)
  np.testing.assert_allclose(plan(images, classes, logit_scale=20.0), by_eps, atol=PLAN_TOL)  # 1 / 20 vs 0.05
  np.testing.assert_allclose(plan(images, classes, 0.05), by_eps, atol=0)  # positional = epsilon: one program
  assert top2_margin(by_eps) > PLAN_TOL
  np.testing.assert_array_equal(jax.jit(inference.ot_zero_shot)(images, classes, logit_scale=20.0),
                                jnp.argmax(by_eps, axis=1))


def test_a_traced_bad_temperature_or_prior_gives_minus_one_not_a_silent_answer():
  images, classes, _ = _problem(n=60)
  ot = jax.jit(inference.ot_zero_shot)
  assert np.all(np.asarray(ot(images, classes, 0.05)) >= 0)
  assert np.all(np.asarray(ot(images, classes, 14.3)) == -1)  # a logit scale given as epsilon
  assert np.all(np.asarray(ot(images, classes, logit_scale=0.05)) == -1)  # an epsilon given as the scale
  assert np.all(np.asarray(ot(images, classes, 0.05, jnp.full(10, 0.2))) == -1)  # prior sums to 2
  assert np.all(np.asarray(ot(images, classes.at[2, 0].set(jnp.nan), 0.05)) == -1)
  assert np.all(np.asarray(jax.jit(inference.zero_shot_predict)(images, classes.at[2, 0].set(jnp.nan))) == -1)
