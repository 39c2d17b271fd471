"""The NNX Soft MoE and Top-1 MoE against the linen modules: parameter tree, outputs, training.

Run op by op, both call the same pure function on the same arrays: bit-equal by construction
(tests/support/nnx_training.py).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxlab.errors import InputError
from jaxlab.moe import EXPERT_PARALLEL_RULES, SoftMoE, Top1MoE
from jaxlab.moe import nnx as moe_nnx
from jaxlab.sharding import path_name
from jaxlab.train import make_mesh, tree_shardings
from tests.support.nnx_training import linen_params, load, mean_square, train_both


@pytest.fixture
def tokens(rng):
  return jax.random.normal(rng, (2, 10, 6))


def _paths(tree):
  return sorted(path_name(p) for p, _ in jax.tree_util.tree_leaves_with_path(tree))


@pytest.mark.parametrize("settings", [
    {}, {"normalize": True, "num_slots": 2}, {"impl": "einsum", "capacity_factor": 2.0},
    {"impl": "cpu_kernel", "single_exponential": True},
])
def test_nnx_soft_moe_equals_linen(tokens, settings):
  linen = SoftMoE(num_experts=4, expert_hidden=8, **settings)
  variables = {"params": linen_params(linen, tokens)}
  model = load(lambda: moe_nnx.SoftMoE(6, 4, 8, num_tokens=10, **settings, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(tokens), linen.apply(variables, tokens))


def test_nnx_noisy_experts_equal_linen(tokens):
  noise = (jax.random.normal(jax.random.key(3), (6, 1)), jax.random.normal(jax.random.key(4), (1, 8)))
  linen = SoftMoE(num_experts=4, expert_hidden=8, noisy_experts=True)
  variables = {"params": linen_params(linen, tokens)}
  assert {"w1_sigma", "b1_sigma"} <= set(variables["params"]["experts"])
  model = load(lambda: moe_nnx.SoftMoE(6, 4, 8, num_tokens=10, noisy_experts=True, rngs=nnx.Rngs(0)),
               variables["params"])
  for draw in (noise, None):  # one draw shared by every expert; None: the means
    chex.assert_trees_all_equal(model(tokens, expert_noise=draw), linen.apply(variables, tokens, expert_noise=draw))
  with pytest.raises(InputError, match="SoftMoE got expert_noise but noisy_experts=False"):
    moe_nnx.SoftMoE(6, 4, 8, num_tokens=10, rngs=nnx.Rngs(0))(tokens, expert_noise=noise)


def test_nnx_soft_moe_initialises_as_linen(tokens):
  """Same tree, shapes and dtypes as the linen init, from the same initialisers: the random values
  differ (NNX draws from ``rngs.params()``), their distribution does not (router LeCun normal, expert
  biases zero)."""
  linen_params = SoftMoE(num_experts=4, expert_hidden=8).init(jax.random.key(1), tokens)["params"]
  model = moe_nnx.SoftMoE(6, 4, 8, num_tokens=10, rngs=nnx.Rngs(0))
  chex.assert_trees_all_equal_shapes_and_dtypes(model.linen_params(), linen_params)
  assert _paths(nnx.as_pure(nnx.state(model, nnx.Param))) == _paths(linen_params)
  mesh = make_mesh((("data", -1), ("expert", 4)))
  shardings = tree_shardings(nnx.as_pure(nnx.state(model, nnx.Param)), mesh, rules=EXPERT_PARALLEL_RULES)
  assert tuple(shardings["experts"]["w1"].spec) == ("expert",) and tuple(shardings["router"]["phi"].spec) == ()
  np.testing.assert_array_equal(model.experts["b1"][...], 0.0)
  assert float(jnp.std(model.router["phi"][...])) > 0.1


def test_nnx_top1_equals_linen(tokens):
  linen = Top1MoE(num_experts=3, expert_hidden=5, capacity_factor=0.5)
  variables = {"params": linen_params(linen, tokens)}
  model = load(lambda: moe_nnx.Top1MoE(6, 3, 5, capacity_factor=0.5, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(tokens), linen.apply(variables, tokens))


def test_nnx_soft_moe_trains_with_momo_adam_as_linen(tokens):
  linen = SoftMoE(num_experts=4, expert_hidden=8)
  params = linen_params(linen, tokens)
  model = load(lambda: moe_nnx.SoftMoE(6, 4, 8, num_tokens=10, rngs=nnx.Rngs(0)), params)
  apply = lambda p, x: linen.apply({"params": p}, x)
  # per step and parameter: the layer's forward chain (soft_moe_tol's d + m + 2np + d + h = 54 roundings),
  # its backward (about as long again), the batch mean and the optimizer: 4 x 54
  train_both(apply, params, model, mean_square, (tokens,), ops_per_step=4 * 54)


def test_load_linen_params_names_the_mismatch(tokens):
  params = linen_params(SoftMoE(num_experts=4, expert_hidden=8), tokens)
  with pytest.raises(InputError, match="linen param 'router/phi' has shape \\(6, 4, 3\\) and dtype float32; "
                                       "SoftMoE has \\(6, 4, 2\\)"):
    nnx.eval_shape(lambda: moe_nnx.SoftMoE(6, 4, 8, num_slots=2, rngs=nnx.Rngs(0))).load_linen_params(params)
  with pytest.raises(InputError, match="linen params have no 'router/scale'"):
    nnx.eval_shape(lambda: moe_nnx.SoftMoE(6, 4, 8, num_tokens=10, normalize=True, rngs=nnx.Rngs(0))).load_linen_params(params)
  with pytest.raises(InputError, match="SoftMoE needs num_tokens"):
    moe_nnx.SoftMoE(6, 4, 8, rngs=nnx.Rngs(0))
  with pytest.raises(InputError, match="SoftMoE.num_experts=0"):
    moe_nnx.SoftMoE(6, 0, 8, num_tokens=4, rngs=nnx.Rngs(0))
