"""Flax and haiku modules are thin wrappers over the same pure functions and parameter layout."""

from __future__ import annotations

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.moe import SoftMoE, Top1MoE, haiku_modules, soft_moe, top1_moe
from jaxlab.sharding import path_name
from tests.support.moe import soft_moe_tol, top1_moe_tol
from tests.support.tolerances import assert_close_to_scale

# A thin wrapper traces the same operations; its program may still be fused differently, so the
# two agree to the layer's rounding bound (bit equality is not XLA's promise across programs).


@pytest.fixture
def tokens(rng):
  return jax.random.normal(rng, (2, 10, 6))


def _paths(tree):
  return sorted(path_name(p) for p, _ in jax.tree_util.tree_leaves_with_path(tree))


def test_flax_soft_moe_is_the_pure_function(tokens):
  module = SoftMoE(num_experts=4, expert_hidden=8, capacity_factor=1.0)
  variables = module.init(jax.random.key(1), tokens)
  assert _paths(variables) == ["params/experts/b1", "params/experts/b2", "params/experts/w1",
                               "params/experts/w2", "params/router/phi"]
  chex.assert_shape(variables["params"]["router"]["phi"], (6, 4, 3))  # p = ceil(10 / 4)
  y, stats = jax.jit(module.apply)(variables, tokens)
  y_ref, stats_ref = jax.jit(soft_moe)(variables["params"], tokens)
  assert_close_to_scale((y, stats), (y_ref, stats_ref), 2 * soft_moe_tol(variables["params"], tokens))


def test_flax_normalized_soft_moe_has_a_scale_and_num_slots_override(tokens):
  module = SoftMoE(num_experts=2, expert_hidden=4, num_slots=5, normalize=True)
  params = module.init(jax.random.key(1), tokens)["params"]
  chex.assert_shape(params["router"]["phi"], (6, 2, 5))
  np.testing.assert_array_equal(params["router"]["scale"], 1.0)


def test_haiku_soft_moe_is_the_pure_function(tokens):
  fn = hk.transform(lambda x: haiku_modules.SoftMoE(num_experts=4, expert_hidden=8)(x))
  params = fn.init(jax.random.key(1), tokens)
  assert _paths(params) == ["soft_moe/experts/b1", "soft_moe/experts/b2", "soft_moe/experts/w1",
                            "soft_moe/experts/w2", "soft_moe/router/phi"]
  y, _ = jax.jit(fn.apply)(params, None, tokens)
  pure = {"router": params["soft_moe/router"], "experts": params["soft_moe/experts"]}
  assert_close_to_scale(y, jax.jit(soft_moe)(pure, tokens)[0], 2 * soft_moe_tol(pure, tokens))


def test_flax_and_haiku_top1_are_the_pure_function(tokens):
  module = Top1MoE(num_experts=3, expert_hidden=5)
  variables = module.init(jax.random.key(1), tokens)
  assert "params/router/kernel" in _paths(variables)
  y, aux = jax.jit(module.apply)(variables, tokens)
  assert_close_to_scale((y, aux), jax.jit(top1_moe)(variables["params"], tokens),
                        2 * top1_moe_tol(variables["params"], tokens))
  fn = hk.transform(lambda x: haiku_modules.Top1MoE(num_experts=3, expert_hidden=5)(x))
  params = fn.init(jax.random.key(1), tokens)
  pure = {"router": params["top1_moe/router"], "experts": params["top1_moe/experts"]}
  assert_close_to_scale(jax.jit(fn.apply)(params, None, tokens), jax.jit(top1_moe)(pure, tokens),
                        2 * top1_moe_tol(pure, tokens))
