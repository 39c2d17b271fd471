"""Transport plans: closed form, agreement with ott, exact iteration counts, gradients, DBOT bounds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.ot_clip import plans
from tests.support.tolerances import log_domain_atol, ops_rtol

# Float32 plans are exp of log-domain values: with exponents up to max(cost) / epsilon, a plan
# entry carries log_domain_atol(...) as a relative error; atol values of 1e-5 and above on plans
# solved to a threshold are the solver's convergence tolerance, not rounding.


def _cost(rng, n=7, m=5, dtype=jnp.float32):
  return jax.random.uniform(rng, (n, m), dtype)


def test_one_sided_plan_is_row_softmax_with_exact_row_marginal(rng):
  c = _cost(rng)
  log_p = plans.one_sided_log_plan(c, 0.1)
  rel = 2 * log_domain_atol(1 / 0.1, 3)  # c / eps and a 5-term log-sum-exp, by two routes
  np.testing.assert_allclose(jnp.exp(log_p), jax.nn.softmax(-c / 0.1, axis=1) / 7, rtol=rel)
  np.testing.assert_allclose(jnp.exp(log_p).sum(1), np.full(7, 1 / 7), rtol=rel + ops_rtol(5))
  np.testing.assert_allclose(jnp.exp(plans.one_sided_log_plan(c, 0.1, axis=0)).sum(0), np.full(5, 1 / 5),
                             rtol=rel + ops_rtol(7))


@pytest.mark.parametrize("tau", [1.0, 0.7])
@pytest.mark.parametrize("num_iterations", [1, 5])
def test_unrolled_matches_ott_forward(rng, tau, num_iterations):
  with jax.enable_x64(True):
    c = _cost(rng, dtype=jnp.float64)
    solve = jax.jit(plans.sinkhorn_log_plan, static_argnames=("num_iterations", "use_ott", "tau_a", "tau_b"))
    ours = solve(c, 0.05, tau_a=tau, tau_b=tau, num_iterations=num_iterations)
    ott = solve(c, 0.05, tau_a=tau, tau_b=tau, num_iterations=num_iterations, use_ott=True)
    np.testing.assert_allclose(ours, ott, atol=1e-10)


def test_ott_solver_runs_exactly_the_requested_iterations(rng):
  # ott's default inner_iterations=10 would run max_iterations // 10 == 0 blocks here.
  c = _cost(rng)
  solve = jax.jit(plans.sinkhorn_log_plan, static_argnames=("num_iterations", "use_ott"))
  p5 = solve(c, 0.05, num_iterations=5, use_ott=True)
  p4 = solve(c, 0.05, num_iterations=4, use_ott=True)
  p5_ref = plans.unrolled_sinkhorn_log_plan(-c / 0.05, jnp.log(jnp.full(7, 1 / 7)),
                                            jnp.log(jnp.full(5, 1 / 5)), num_iterations=5)
  np.testing.assert_allclose(p5, p5_ref, atol=2 * log_domain_atol(1 / 0.05, 2 * 5 + 2))  # same 5 iterations, two codes
  assert np.abs(p5 - p4).max() > 1e-3
  assert np.abs(p5 + c / 0.05).max() > 1e-2  # potentials moved off their zero initialisation


def test_converged_plan_has_both_marginals(rng):
  c = _cost(rng)
  p = jnp.exp(jax.jit(lambda c: plans.sinkhorn_log_plan(c, 0.1, implicit=True, threshold=1e-7))(c))
  np.testing.assert_allclose(p.sum(1), np.full(7, 1 / 7), atol=1e-5)
  np.testing.assert_allclose(p.sum(0), np.full(5, 1 / 5), atol=1e-5)


def _fd_check(f, c, seed=3, h=1e-6):
  f = jax.jit(f)
  d = jax.random.normal(jax.random.key(seed), c.shape, c.dtype)
  fd = (f(c + h * d) - f(c - h * d)) / (2 * h)
  np.testing.assert_allclose(jnp.vdot(jax.grad(f)(c), d), fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("mode", [{}, {"use_ott": True}, {"tau_a": 0.8, "tau_b": 0.6}])
def test_unrolled_gradient_matches_finite_differences(rng, mode):
  # Guards against ott 0.6's fixed-count (min == max) backward pass, which replays its
  # checkpoints in the wrong order.
  with jax.enable_x64(True):
    c = _cost(rng, dtype=jnp.float64)
    _fd_check(lambda c: jnp.sum(jnp.diagonal(plans.sinkhorn_log_plan(c, 0.1, num_iterations=5, **mode))), c)


def test_dbot_gradient_matches_finite_differences(rng):
  with jax.enable_x64(True):
    c = jnp.concatenate([jnp.zeros((7, 1)), _cost(rng, 7, 4, dtype=jnp.float64) + 1.0], axis=1)
    _fd_check(lambda c: jnp.sum(jnp.diagonal(plans.dbot_log_plan(c, 0.1, lower=0.5, upper=1.5))), c)


def test_implicit_gradient_matches_finite_differences_at_convergence(rng):
  with jax.enable_x64(True):
    c = _cost(rng, 6, 6, dtype=jnp.float64)
    f = lambda c: jnp.sum(jnp.diagonal(plans.sinkhorn_log_plan(c, 0.2, implicit=True, threshold=1e-12)))
    _fd_check(f, c)


def test_dbot_respects_bounds_and_row_marginal(rng):
  c = jnp.concatenate([jnp.zeros((7, 1)), _cost(rng, 7, 4) + 1.0], axis=1)  # column 0 attracts all mass
  p = jnp.exp(plans.dbot_log_plan(c, 0.05, lower=0.5, upper=1.5, num_iterations=500))
  # The last update normalises rows exactly up to rounding: exponents up to 2 / 0.05, 5-term sums.
  np.testing.assert_allclose(p.sum(1), np.full(7, 1 / 7), rtol=log_domain_atol(2 / 0.05, 4) + ops_rtol(5))
  col = np.asarray(p.sum(0)) * 5
  assert col.max() <= 1.5 + 1e-3 and col.min() >= 0.5 - 1e-3
  assert col[0] > 1.5 - 1e-3  # the bound is active where the unconstrained plan exceeds it


def test_dbot_with_loose_bounds_is_one_sided_and_with_tight_bounds_is_sinkhorn(rng):
  c = _cost(rng, 6, 6)
  np.testing.assert_allclose(plans.dbot_log_plan(c, 0.5, lower=1e-3, upper=1e3),
                             plans.one_sided_log_plan(c, 0.5), atol=2 * log_domain_atol(1 / 0.5, 2 * 5 + 2))
  np.testing.assert_allclose(plans.dbot_log_plan(c, 0.5, lower=1.0, upper=1.0, num_iterations=50),
                             plans.sinkhorn_log_plan(c, 0.5, num_iterations=50),
                             atol=2 * log_domain_atol(1 / 0.5, 2 * 50 + 2))


@pytest.mark.parametrize("call", [
    lambda c: plans.sinkhorn_log_plan(c, 0.0),
    lambda c: plans.sinkhorn_log_plan(c, -0.1),
    lambda c: plans.one_sided_log_plan(c, 0.0),
    lambda c: plans.dbot_log_plan(c, 0.1, lower=1.2, upper=2.0),
    lambda c: plans.sinkhorn_log_plan(c, 0.1, num_iterations=0),
])
def test_bad_arguments_raise(rng, call):
  with pytest.raises(ValueError):
    call(_cost(rng))


def test_unbalanced_unrolled_plan_is_exact_at_small_epsilon(rng):
  # At eps = 1e-3 the unbalanced plan's row/column masses underflow float32 (the absorbed
  # matrix-vector form returned NaN); the log-domain updates match float64 ott.
  c = _cost(rng, 12, 10) * 2.0
  ours = plans.sinkhorn_log_plan(c, 1e-3, tau_a=0.9, tau_b=0.9, num_iterations=5)
  assert bool(jnp.all(jnp.isfinite(ours)))
  with jax.enable_x64(True):
    ref = plans.sinkhorn_log_plan(c.astype(jnp.float64), 1e-3, tau_a=0.9, tau_b=0.9, num_iterations=5,
                                  use_ott=True)
  # log P values are O(1e3): float32 against float64, exponents up to 2 / 1e-3, 5 iterations.
  np.testing.assert_allclose(ours, ref, rtol=0, atol=log_domain_atol(2 / 1e-3, 2 * 5 + 2))
