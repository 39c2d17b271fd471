"""Soft MoE layer: equations (float64 numpy), the fast kernel's VJP, the implementation switch, stats and input checks."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.moe import combine_spread, init_soft_moe, num_slots, soft_moe, soft_moe_einsum, soft_moe_stats
from tests.support.export import ACCELERATORS, BARRIER, export_for
from tests.support.moe import numpy_soft_moe, soft_moe_tol
from tests.support.xla import AS_USERS_COMPILE
from tests.support.tolerances import assert_close_to_scale, ops_rtol


@pytest.mark.parametrize("single_exponential", [False, True])
def test_matches_float64_equations(soft_setup, single_exponential):
  params, x = soft_setup
  y, _ = jax.jit(lambda p, x: soft_moe(p, x, single_exponential=single_exponential, impl="cpu_kernel"))(params, x)
  chex.assert_shape(y, x.shape)
  assert_close_to_scale(y, numpy_soft_moe(params, x), soft_moe_tol(params, x))
  assert_close_to_scale(jax.jit(soft_moe_einsum)(params, x), numpy_soft_moe(params, x), soft_moe_tol(params, x))


def test_normalized_routing_matches_equations(soft_setup):
  params, x = soft_setup
  params = dict(params, router=dict(params["router"], scale=jnp.asarray(3.0)))
  y, _ = jax.jit(lambda p, x: soft_moe(p, x, normalize=True))(params, x)
  assert_close_to_scale(y, numpy_soft_moe(params, x, normalize=True), soft_moe_tol(params, x, normalize=True))


@pytest.mark.parametrize("single_exponential", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_kernel_gradients_equal_autodiff_of_einsum(soft_setup, single_exponential, normalize):
  params, x = soft_setup
  if normalize:
    params = dict(params, router=dict(params["router"], scale=jnp.asarray(2.0)))
  cot = jax.random.normal(jax.random.key(5), x.shape)
  fast = lambda p, x: jnp.sum(soft_moe(p, x, normalize=normalize, single_exponential=single_exponential,
                                       impl="cpu_kernel")[0] * cot)
  slow = lambda p, x: jnp.sum(soft_moe_einsum(p, x, normalize=normalize) * cot)
  g_fast = jax.jit(jax.grad(fast, argnums=(0, 1)))(params, x)
  g_slow = jax.jit(jax.grad(slow, argnums=(0, 1)))(params, x)
  # Two float32 routes; the backward pass rounds about as often again as the forward.
  assert_close_to_scale(g_fast, g_slow, 4 * soft_moe_tol(params, x, normalize))


@pytest.mark.parametrize("impl", ["auto", "einsum"])  # "cpu_kernel": test_kernel_gradients_equal_autodiff_of_einsum
def test_every_impl_equals_the_einsum_definition_forward_and_gradient(soft_setup, impl):
  """Both paths of ``impl`` run on CPU ("auto" is the kernel here) against the einsum definition."""
  params, x = soft_setup
  cot = jax.random.normal(jax.random.key(5), x.shape)
  y = jax.jit(lambda p, x: soft_moe(p, x, impl=impl)[0])(params, x)
  assert_close_to_scale(y, numpy_soft_moe(params, x), soft_moe_tol(params, x))
  grad = lambda f: jax.jit(jax.grad(lambda p, x: jnp.sum(f(p, x) * cot), argnums=(0, 1)))(params, x)
  # Two float32 routes; the backward pass rounds about as often again as the forward.
  assert_close_to_scale(grad(lambda p, x: soft_moe(p, x, impl=impl)[0]), grad(soft_moe_einsum),
                        4 * soft_moe_tol(params, x))


def test_auto_is_the_cpu_kernel_on_cpu_and_the_einsum_on_gpu_and_tpu(soft_setup):
  """The choice is made when lowering: the CPU module has the kernel's optimization barriers, the
  cuda/tpu module (lowered here, on a CPU host) has none; and on CPU "auto" compiles to the same
  program as the kernel called directly (the other branch costs nothing)."""
  params, x = soft_setup
  loss = lambda impl: jax.jit(jax.grad(lambda p, x: jnp.sum(soft_moe(p, x, impl=impl)[0] ** 2)))
  assert BARRIER in export_for(loss("auto"), params, x, platforms=("cpu",)).mlir_module()
  assert BARRIER not in export_for(loss("auto"), params, x, platforms=ACCELERATORS).mlir_module()
  auto, kernel = (loss(impl).lower(params, x).compile(AS_USERS_COMPILE) for impl in ("auto", "cpu_kernel"))
  assert auto.cost_analysis()["flops"] == kernel.cost_analysis()["flops"]
  assert auto.memory_analysis().temp_size_in_bytes == kernel.memory_analysis().temp_size_in_bytes


def test_one_module_for_cpu_cuda_and_tpu_runs_here(soft_setup):
  """A module exported for several platforms picks its branch when it is compiled: run on CPU it
  gives the equations' values (through the kernel)."""
  params, x = soft_setup
  exported = export_for(lambda p, x: soft_moe(p, x)[0], params, x, platforms=("cpu",) + ACCELERATORS)
  assert BARRIER in exported.mlir_module()
  assert_close_to_scale(exported.call(params, x), numpy_soft_moe(params, x), soft_moe_tol(params, x))


def test_auto_under_vmap_and_grad_equals_each_run_alone(soft_setup):
  """Runs vmapped (the trainer's seeds) through "auto": each run's gradient as if alone."""
  params, x = soft_setup
  runs = jax.tree.map(lambda a: jnp.stack([a, 0.5 * a]), params)
  xs = jnp.stack([x, -x])
  grad = jax.grad(lambda p, x: jnp.sum(jnp.sin(soft_moe(p, x)[0])))
  batched = jax.jit(jax.vmap(grad))(runs, xs)
  for i in range(2):
    one = jax.jit(grad)(jax.tree.map(lambda a: a[i], runs), xs[i])
    # the same float32 computation batched differently: rounding of the backward pass only
    assert_close_to_scale(jax.tree.map(lambda a: a[i], batched), one, 4 * soft_moe_tol(params, xs[i]))


def test_gradients_match_finite_differences_in_float64(soft_setup):
  params, x = soft_setup
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), params)
    direction = jax.tree.map(lambda a: jax.random.normal(jax.random.key(1), a.shape, a.dtype), p64)

    @jax.jit
    def check(p, x, v):
      f = lambda p: jnp.sum(jnp.sin(soft_moe(p, x)[0]))
      eps = 1e-6
      shift = lambda sgn: jax.tree.map(lambda a, u: a + sgn * eps * u, p, v)
      analytic = sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(jax.grad(f)(p)),
                                                      jax.tree.leaves(v)))
      return analytic, (f(shift(1.0)) - f(shift(-1.0))) / (2 * eps)

    analytic, fd = check(p64, jnp.asarray(x, jnp.float64), direction)
    np.testing.assert_allclose(analytic, fd, rtol=1e-6)


def test_wide_logit_range_stays_exact_by_default(soft_setup):
  """Logits spanning ~hundreds: the two-exponential default is exact; the single-exponential
  option is documented to fail there (dispatch normalisers underflow)."""
  params, x = soft_setup
  x = x.at[0, 0].multiply(60.0)  # one huge token in sample 0
  ref = numpy_soft_moe(params, x)
  assert np.ptp(np.einsum("md,dnp->mnp", x[0], params["router"]["phi"])) > 150
  y, _ = jax.jit(soft_moe)(params, x)
  assert_close_to_scale(y, ref, soft_moe_tol(params, x))
  g = jax.jit(jax.grad(lambda p: jnp.sum(soft_moe(p, x)[0])))(params)
  assert all(bool(jnp.all(jnp.isfinite(a))) for a in jax.tree.leaves(g))


def test_stats_are_in_range_and_uniform_routing_is_maximal(soft_setup):
  params, x = soft_setup
  _, stats = jax.jit(soft_moe)(params, x)
  for k in ("dispatch_entropy", "combine_entropy", "dispatch_max", "combine_max"):
    assert 0.0 <= float(stats[k]) <= 1.0 + 1e-6, (k, stats[k])
  chex.assert_shape(stats["expert_load"], (4,))
  # Sums and means over the 3 x 10 tokens and 12 slots: ~50 roundings; entropies add a log each.
  np.testing.assert_allclose(jnp.sum(stats["expert_load"]), 1.0, rtol=ops_rtol(50))
  uniform = jax.jit(soft_moe_stats)(jnp.zeros((2, 10, 4, 3)))
  np.testing.assert_allclose(uniform["dispatch_entropy"], 1.0, rtol=ops_rtol(100))
  np.testing.assert_allclose(uniform["combine_entropy"], 1.0, rtol=ops_rtol(100))
  np.testing.assert_allclose(uniform["expert_load"], 0.25, rtol=ops_rtol(50))
  peaked = jax.jit(soft_moe_stats)(jnp.zeros((1, 10, 4, 3)).at[:, :, 1, 0].set(1e4))
  np.testing.assert_allclose(peaked["combine_max"], 1.0, rtol=ops_rtol(50))
  np.testing.assert_allclose(peaked["expert_load"], [0, 1, 0, 0], atol=1e-6)


def test_combine_spread_is_zero_for_equal_rows_and_the_logit_spread_while_logits_are_small():
  # one mixture everywhere: 0, up to the rounding of the equal weights 1/12 (a few ulps, times s = 12)
  assert 0.0 <= float(jax.jit(soft_moe_stats)(jnp.zeros((2, 10, 4, 3)))["combine_spread"]) <= ops_rtol(12)
  np.testing.assert_allclose(combine_spread(jnp.eye(6)[None]), np.sqrt(5.0), rtol=ops_rtol(50))  # one-hot rows
  # small logits L: C_ij ~ (1 + L_ij - mean_j L_ij) / s, so the spread ~ mean_j std_i (L_ij - rowmean_i)
  logits = 1e-3 * jax.random.normal(jax.random.key(0), (3, 10, 4, 3))
  l64 = np.asarray(logits, np.float64).reshape(3, 10, 12)
  centred = l64 - l64.mean(axis=2, keepdims=True)
  want = np.mean(centred.std(axis=1))
  got = float(soft_moe_stats(logits)["combine_spread"])
  # second-order terms of exp are ~|L| = 1e-3 relative; float32 adds ~1e-7 absolute on weights ~1/12
  np.testing.assert_allclose(got, want, rtol=1e-2)
  # numpy's definition on random weights: s * mean over slots of the std over positions
  c = jax.nn.softmax(jax.random.normal(jax.random.key(1), (2, 7, 5)), axis=-1)
  np.testing.assert_allclose(combine_spread(c), 5 * np.asarray(c, np.float64).std(axis=1).mean(), rtol=ops_rtol(100))


def test_num_slots_rule():
  assert num_slots(100, 8) == 13  # ceil(100 / 8)
  assert num_slots(121, 4) == 31
  assert num_slots(10, 3, capacity_factor=2.0) == 7
  assert num_slots(1, 8) == 1  # one token per sample: every expert still gets a slot


@pytest.mark.parametrize("call, match", [
    (lambda: num_slots(10, 0), "num_experts=0"),
    (lambda: num_slots(10, 4, capacity_factor=0.0), "capacity_factor=0.0"),
    (lambda: init_soft_moe(jax.random.key(0), 6, 4, 0, 8), "slots_per_expert=0"),
    (lambda: init_soft_moe(jax.random.key(0), 6, -1, 3, 8), "num_experts=-1"),
    (lambda: init_soft_moe(jax.random.key(0), 6, 4, 3, 0), "hidden_dim=0"),
])
def test_bad_hyperparameters_raise_one_line_input_errors(call, match):
  with pytest.raises(InputError, match=match) as err:
    call()
  assert "\n" not in str(err.value)


def test_bad_inputs_raise_input_errors(soft_setup):
  params, x = soft_setup
  with pytest.raises(InputError, match="tokens have dim 5 but router phi expects dim 6"):
    soft_moe(params, x[..., :5])
  with pytest.raises(InputError, match=r"need \[batch, tokens, dim\]"):
    soft_moe(params, x[0])
  with pytest.raises(InputError, match="normalize=True needs"):
    soft_moe(params, x, normalize=True)
  bad = dict(params, experts=dict(params["experts"], b1=jnp.zeros((3, 8))))
  with pytest.raises(InputError, match="expert param shapes"):
    soft_moe(bad, x)
