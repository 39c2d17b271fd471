"""Selective classification: risk-coverage, AURC, plan and partial-OT confidences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.ot_clip import selective
from tests.support.tolerances import EPS32


def test_risk_coverage_and_aurc_by_hand():
  conf = jnp.array([0.9, 0.8, 0.7, 0.6])
  correct = jnp.array([True, False, True, False])
  cov, risk = selective.risk_coverage_curve(conf, correct)
  tol = {"rtol": 8 * EPS32, "atol": 0}  # float32 counts, a division and a 4-term mean vs float64
  np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0], **tol)
  np.testing.assert_allclose(risk, [0.0, 0.5, 1 / 3, 0.5], **tol)
  np.testing.assert_allclose(selective.aurc(conf, correct), np.mean([0.0, 0.5, 1 / 3, 0.5]), **tol)
  np.testing.assert_allclose(selective.selective_risk(conf, correct, 0.5), 0.5, **tol)


def test_oracle_confidence_has_lower_aurc_than_reversed():
  correct = jnp.array([True] * 6 + [False] * 4)
  good = jnp.linspace(1, 0, 10)
  assert selective.aurc(good, correct) < selective.aurc(-good, correct)
  assert float(selective.selective_risk(good, correct, 0.5)) == 0.0


def test_plan_confidence_is_row_normalised_max():
  log_p = jnp.log(jnp.array([[0.3, 0.1], [0.05, 0.05]]))
  pred, conf = selective.plan_confidence(log_p)
  np.testing.assert_array_equal(pred, [0, 0])
  np.testing.assert_allclose(conf, [0.75, 0.5], rtol=8 * EPS32)  # exp of a log, a 2-term sum, a division


def test_partial_ot_rejects_the_requested_mass_and_the_off_class_images(rng):
  k1, k2 = jax.random.split(rng)
  classes = jax.random.normal(k1, (3, 8))
  on_class = classes[jnp.arange(30) % 3] + 0.3 * jax.random.normal(k2, (30, 8))
  off_class = jax.random.normal(k2, (30, 8))  # unrelated to any class
  images = jnp.concatenate([on_class, off_class])
  pred, conf = jax.jit(selective.partial_ot_confidence, static_argnums=(3,))(images, classes, 0.05, 0.5)
  np.testing.assert_allclose(jnp.mean(conf), 0.5, atol=1e-3)  # transported share = coverage
  assert float(jnp.mean(conf[:30])) > float(jnp.mean(conf[30:])) + 0.3
  np.testing.assert_array_equal(pred[:30], jnp.arange(30) % 3)


@pytest.mark.parametrize("coverage", [0.0, 1.5])
def test_bad_coverage_raises(coverage):
  with pytest.raises(ValueError, match="coverage"):
    selective.selective_risk(jnp.ones(3), jnp.ones(3, bool), coverage)
