"""The MoE tests' shared fixture: a Soft MoE layer's params and tokens."""

import jax
import pytest

from jaxlab.moe import init_soft_moe


@pytest.fixture
def soft_setup(rng):
  """Soft MoE params (4 experts, 3 slots each, hidden 8, non-zero biases) and tokens [3, 10, 6]."""
  kp, kx, kb = jax.random.split(rng, 3)
  params = init_soft_moe(kp, token_dim=6, num_experts=4, slots_per_expert=3, expert_hidden=8)
  kb1, kb2 = jax.random.split(kb)
  params["experts"]["b1"] = 0.1 * jax.random.normal(kb1, (4, 8))
  params["experts"]["b2"] = 0.1 * jax.random.normal(kb2, (4, 6))
  return params, 2.0 * jax.random.normal(kx, (3, 10, 6))
