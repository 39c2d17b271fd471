"""Expert parallelism: the stacked expert axis sharded over a mesh axis gives the same layer and
gradients as one device (8 virtual CPU devices, sharding from jaxlab.sharding rules)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.moe import EXPERT_PARALLEL_RULES, SoftMoE, Top1MoE
from jaxlab.train.mesh import make_mesh
from jaxlab.sharding import tree_shardings
from tests.support.moe import soft_moe_tol, top1_moe_tol
from tests.support.tolerances import assert_close_to_scale

_RULES = ((r"router/phi", (None, "expert")),) + EXPERT_PARALLEL_RULES


@pytest.mark.parametrize("module", [SoftMoE(num_experts=8, expert_hidden=16),
                                    Top1MoE(num_experts=8, expert_hidden=16)],
                         ids=["soft", "top1"])
@pytest.mark.parametrize("axes", [(("expert",), (8,)), (("data", "expert"), (2, 4))],
                         ids=["expert8", "data2xexpert4"])
def test_sharded_layer_and_gradients_equal_unsharded(module, axes, rng):
  names, sizes = axes
  mesh = make_mesh(tuple(zip(names, sizes)))  # Auto axes: GSPMD propagates the sharding
  x = jax.random.normal(rng, (4, 24, 8))
  variables = module.init(jax.random.key(1), x)
  cot = jax.random.normal(jax.random.key(2), x.shape)

  def loss(v, x):
    y, aux = module.apply(v, x)
    return jnp.sum(y * cot) + 0.1 * aux.get("importance_loss", 0.0)

  fn = jax.value_and_grad(loss, argnums=(0, 1))
  want = jax.jit(fn)(variables, x)
  shardings = tree_shardings(variables, mesh, _RULES)
  w1 = shardings["params"]["experts"]["w1"]
  assert w1.spec == P("expert") and shardings["params"]["experts"]["b2"].spec == P("expert")
  x_sharding = NamedSharding(mesh, P("data" if "data" in names else None))
  sharded = jax.jit(fn, in_shardings=(shardings, x_sharding),
                    out_shardings=(NamedSharding(mesh, P()), (shardings, x_sharding)))
  got = sharded(jax.device_put(variables, shardings), jax.device_put(x, x_sharding))
  local = got[1][0]["params"]["experts"]["w1"].addressable_shards[0].data.shape
  assert local[0] == 8 // dict(zip(names, sizes))["expert"]  # each device holds its experts only
  # The same layer, value and gradients summed in another order: within twice the layer's rounding
  # bound for the value, four times for the gradients (the backward pass rounds as often again).
  p = variables["params"]
  tol = soft_moe_tol(p, x) if "phi" in p["router"] else top1_moe_tol(p, x)
  assert_close_to_scale(got[0], want[0], 2 * tol)
  assert_close_to_scale(got[1], want[1], 4 * tol)
