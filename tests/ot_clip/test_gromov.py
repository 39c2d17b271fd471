"""Fused Gromov-Wasserstein: the linearisation against the 4-index sum, limits, gradients."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.ot_clip import gromov, plans
from tests.support.tolerances import log_domain_atol, ops_rtol, top2_margin


def _problem(rng, n=5, m=4, dtype=jnp.float32):
  """Cost and structure features (S = F F^T)."""
  k = jax.random.split(rng, 3)
  x, y = jax.random.normal(k[0], (n, 3), dtype), jax.random.normal(k[1], (m, 2), dtype)
  return jax.random.uniform(k[2], (n, m), dtype), x / 3 ** 0.5, y / 3 ** 0.5


def test_linearization_is_the_gradient_of_the_square_loss_gw_term(rng):
  cost, fx, fy = _problem(rng)
  plan = jax.random.uniform(jax.random.key(7), cost.shape)
  sx, sy, plan = np.asarray(fx @ fx.T), np.asarray(fy @ fy.T), np.asarray(plan)
  # ref[i, j] = sum_kl (sx[i, k] - sy[j, l])^2 plan[k, l], written out as the 4-index sum.
  ref = np.einsum("ijkl,kl->ij", (sx[:, None, :, None] - sy[None, :, None, :]) ** 2, plan)
  # Positive terms: 3-term dots for S, a square, a 20-term sum against the plan (twice that backwards).
  np.testing.assert_allclose(gromov.gw_linearization(plan, fx, fy), ref, rtol=ops_rtol(3 + 4 + 20))
  energy = lambda p: 0.5 * jnp.sum(p * gromov.gw_linearization(p, fx, fy))
  np.testing.assert_allclose(jax.grad(energy)(jnp.asarray(plan)), ref, rtol=ops_rtol(2 * (3 + 4 + 20)))


def test_alpha_zero_is_entropic_ot(rng):
  cost, fx, fy = _problem(rng)
  np.testing.assert_allclose(gromov.fgw_log_plan(cost, fx, fy, 0.1, alpha=0.0, num_outer=2),
                             plans.sinkhorn_log_plan(cost, 0.1), atol=2 * log_domain_atol(1 / 0.1, 2 * 2 * 5 + 2))


def test_structure_term_matches_isomorphic_graphs():
  # Cross-modal cost says nothing (constant); only structure can find the permutation.
  r = np.random.default_rng(0)
  z = r.normal(size=(6, 3))
  perm = np.array([3, 0, 5, 1, 4, 2])
  fx = jnp.asarray(z)
  fy = fx[perm]  # S_y = S_x[perm][:, perm]
  solve = jax.jit(lambda fx, fy: gromov.fgw_log_plan(jnp.ones((6, 6)), fx, fy, 0.02, alpha=1.0,
                                                     num_outer=30, num_iterations=100))
  log_p = solve(fx, fy)
  # Node perm[j] of x corresponds to node j of y.
  match = np.asarray(jnp.argmax(log_p, axis=1))
  assert top2_margin(log_p) > 1.0  # far above rounding: the argmax is a property of the data
  np.testing.assert_array_equal(match[perm], np.arange(6))


def test_unrolled_gradient_matches_finite_differences(rng):
  with jax.enable_x64(True):
    cost, fx, fy = _problem(rng, dtype=jnp.float64)
    f = jax.jit(lambda c: jnp.sum(jnp.diagonal(
        gromov.fgw_log_plan(c, fx, fy, 0.1, alpha=0.5, tau_a=0.9, tau_b=0.9, num_outer=3))))
    d = jax.random.normal(jax.random.key(3), cost.shape, jnp.float64)
    fd = (f(cost + 1e-6 * d) - f(cost - 1e-6 * d)) / 2e-6
    np.testing.assert_allclose(jnp.vdot(jax.grad(f)(cost), d), fd, rtol=1e-5)
