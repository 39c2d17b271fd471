"""Top-1 MoE: routing, capacity dropping, gate scaling, auxiliary losses, input checks."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.moe import apply_experts, capacity, init_top1_moe, top1_moe
from tests.support.moe import top1_moe_tol
from tests.support.tolerances import assert_close_to_scale, ops_rtol


@pytest.fixture
def setup(rng):
  params = init_top1_moe(rng, token_dim=5, num_experts=4, expert_hidden=7)
  return params, jax.random.normal(jax.random.key(3), (2, 12, 5))


def test_each_token_gets_its_top_expert_scaled_by_the_gate(setup):
  params, x = setup
  y, aux = jax.jit(lambda p, x: top1_moe(p, x, capacity_factor=4.0))(params, x)  # nothing dropped
  chex.assert_shape(y, x.shape)
  assert float(aux["dropped_fraction"]) == 0.0
  probs = jax.nn.softmax(x @ params["router"]["kernel"], -1)
  top, gate = jnp.argmax(probs, -1), jnp.max(probs, -1)
  every = apply_experts(params["experts"], jnp.broadcast_to(x.reshape(1, -1, 5), (4, 24, 5)))
  expected = jnp.take_along_axis(every, top.reshape(1, -1, 1), 0)[0].reshape(x.shape)
  assert_close_to_scale(y, expected * gate[..., None], 2 * top1_moe_tol(params, x))  # two float32 routes


def test_overflow_tokens_are_dropped_in_token_order(setup):
  params, x = setup
  params = dict(params, router={"kernel": jnp.zeros((5, 4)).at[:, 2].set(0.0)})
  x = x.at[..., 0].set(jnp.abs(x[..., 0]) + 1.0)
  params["router"]["kernel"] = params["router"]["kernel"].at[0, 2].set(50.0)  # all to expert 2
  y, aux = jax.jit(top1_moe)(params, x)  # capacity ceil(12 / 4) = 3
  kept = np.asarray(jnp.any(y != 0, axis=-1))
  np.testing.assert_array_equal(kept, np.tile(np.arange(12) < 3, (2, 1)))
  np.testing.assert_allclose(aux["dropped_fraction"], 9 / 12, rtol=1e-6)
  np.testing.assert_allclose(aux["expert_load"], [0, 0, 1, 0], atol=1e-6)
  np.testing.assert_allclose(aux["load_balancing_loss"], 4.0, rtol=1e-4)  # n * 1 * 1: collapsed


def test_balanced_router_has_minimal_auxiliary_losses(setup):
  params, x = setup
  params = dict(params, router={"kernel": jnp.zeros((5, 4))})  # uniform probabilities
  _, aux = jax.jit(top1_moe)(params, x)
  np.testing.assert_allclose(aux["importance_loss"], 0.0, atol=1e-10)
  # Means over 24 tokens and sums over 4 experts (with a log each for the entropy).
  np.testing.assert_allclose(aux["load_balancing_loss"], 1.0, rtol=ops_rtol(30))  # sum_i f_i = 1, P = 1/n
  np.testing.assert_allclose(aux["router_entropy"], 1.0, rtol=ops_rtol(60))


def test_auxiliary_losses_are_differentiable_and_push_towards_balance(setup):
  params, x = setup
  loss = lambda p: top1_moe(p, x)[1]["importance_loss"]
  g = jax.jit(jax.grad(loss))(params)
  assert float(jnp.abs(g["router"]["kernel"]).sum()) > 0
  stepped = jax.tree.map(lambda a, b: a - 0.5 * b, params, g)
  assert float(loss(stepped)) < float(loss(params))


@pytest.mark.parametrize("call, match", [
    (lambda: capacity(10, 0), "num_experts=0"),
    (lambda: capacity(10, 4, capacity_factor=-1.0), "capacity_factor=-1.0"),
    (lambda: init_top1_moe(jax.random.key(0), 5, 0, 7), "num_experts=0"),
])
def test_bad_hyperparameters_raise(call, match):
  with pytest.raises(InputError, match=match):
    call()


def test_bad_inputs_raise(setup):
  params, x = setup
  with pytest.raises(InputError, match="tokens have dim 4 but the router kernel"):
    top1_moe(params, x[..., :4])
  with pytest.raises(InputError, match=r"need \[batch, tokens, dim\]"):
    top1_moe(params, x[0])
