"""Zero-shot inference: argmax, OT with a class prior, FGW, and the prior's input checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.ot_clip import inference


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
