"""Faithfulness to dopamine's MoE code (google/dopamine labs/moes), via a stored fixture.

tests/data/soft_moe_reference.npz holds parameters, inputs, outputs and gradients of dopamine's
``SoftMoE`` (plain, normalised, capacity 2), its top-1 ``MoE`` and a Nature-DQN Soft-MoE network,
all run per sample and vmapped over a batch of 3 (2 frames for the network); written by
scripts/make_soft_moe_fixture.py from a checkout outside the repo.
"""

from __future__ import annotations

import pathlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.moe import soft_moe, top1_moe
from jaxlab.rl.networks import QNetwork
from tests.support.moe import soft_moe_tol, top1_moe_tol
from tests.support.tolerances import assert_close_to_scale, ops_rtol

_REF = np.load(pathlib.Path(__file__).parents[1] / "data" / "soft_moe_reference.npz")
# The fixtures are dopamine's float32 results: two float32 computations of one layer, each within
# the layer's rounding bound (tests/support/moe.py), compared at the scale of the largest entry.


def _experts(get):
  """dopamine's ExpertModel: ``net`` = Dense(h) (d -> h), ``Dense_0`` = Dense(d) (h -> d)."""
  return {"w1": get("module/net/kernel"), "b1": get("module/net/bias"),
          "w2": get("module/Dense_0/kernel"), "b2": get("module/Dense_0/bias")}


def _soft_params(case: str, normalize: bool):
  get = lambda k: jnp.asarray(_REF[f"{case}/params/{k}"])
  router = {"phi": get("phi_weights")}
  if normalize:
    router["scale"] = get("scalar").reshape(())
  return {"router": router, "experts": _experts(get)}


@pytest.mark.parametrize("case, normalize", [("soft", False), ("soft_normalized", True),
                                             ("soft_capacity2", False)])
def test_soft_moe_outputs_and_gradients_match_dopamine(case, normalize):
  params = _soft_params(case, normalize)
  x, cot = jnp.asarray(_REF[f"{case}/x"]), jnp.asarray(_REF[f"{case}/cotangent"])
  tol = 2 * soft_moe_tol(params, x, normalize)
  loss = lambda p, x: jnp.sum(soft_moe(p, x, normalize=normalize)[0] * cot)
  y = jax.jit(lambda p, x: soft_moe(p, x, normalize=normalize)[0])(params, x)
  assert_close_to_scale(y, _REF[f"{case}/y"], tol)
  g_params, g_x = jax.jit(jax.grad(loss, argnums=(0, 1)))(params, x)
  assert_close_to_scale(g_x, _REF[f"{case}/grad_x"], 2 * tol)
  get = lambda k: _REF[f"{case}/grads/{k}"]
  assert_close_to_scale(g_params["router"]["phi"], get("phi_weights"), 2 * tol)
  if normalize:
    assert_close_to_scale(g_params["router"]["scale"], get("scalar")[0], 2 * tol)
  else:  # dopamine creates the scale even when unused; its gradient is then zero
    np.testing.assert_array_equal(get("scalar"), 0.0)
  assert_close_to_scale(g_params["experts"], _experts(lambda k: get(k)), 2 * tol)  # backward: ~2x the roundings


def test_top1_moe_outputs_and_gradients_match_dopamine():
  get = lambda k: jnp.asarray(_REF[f"top1/params/{k}"])
  params = {"router": {"kernel": get("router/Dense_0/kernel")}, "experts": _experts(get)}
  x, cot = jnp.asarray(_REF["top1/x"]), jnp.asarray(_REF["top1/cotangent"])
  y, aux = jax.jit(top1_moe)(params, x)
  tol = 2 * top1_moe_tol(params, x)
  assert_close_to_scale(y, _REF["top1/y"], tol)
  assert float(aux["dropped_fraction"]) > 0  # capacity 3 of 10 tokens x 4 experts drops some
  g_params, g_x = jax.jit(jax.grad(lambda p, x: jnp.sum(top1_moe(p, x)[0] * cot),
                                   argnums=(0, 1)))(params, x)
  assert_close_to_scale(g_x, _REF["top1/grad_x"], 2 * tol)
  gref = lambda k: _REF[f"top1/grads/{k}"]
  assert_close_to_scale(g_params["router"]["kernel"], gref("router/Dense_0/kernel"), 2 * tol)
  assert_close_to_scale(g_params["experts"], _experts(gref), 2 * tol)


def test_nature_softmoe_network_matches_dopamine():
  """QNetwork(encoder="nature", head="softmoe", per-conv tokens) = dopamine's NatureDQNMoE."""
  get = lambda k: jnp.asarray(_REF[f"net_softmoe/params/{k}"])
  net = QNetwork(num_actions=6, encoder="nature", head="softmoe", tokenizer="per_conv",
                 num_experts=4, expert_hidden=16)
  frames = jnp.asarray(_REF["net_softmoe/frames"])  # uint8: the encoder divides by 255
  variables = jax.eval_shape(net.init, jax.random.key(0), frames)
  params = {
      "NatureEncoder_0": {f"Conv_{i}": {"kernel": get(f"Conv_{i}/kernel"),
                                        "bias": get(f"Conv_{i}/bias")} for i in range(3)},
      "SoftMoE_0": {"router": {"phi": get("SoftMoE_0/phi_weights")},
                    "experts": _experts(lambda k: get(k.replace("module/", "ExpertModel_0/")))},
      "Dense_0": {"kernel": get("Dense_0/kernel"), "bias": get("Dense_0/bias")},
  }
  chex.assert_trees_all_equal_shapes(params, variables["params"])
  q, stats = jax.jit(net.apply)({"params": params}, frames)
  # Three convolutions (8x8x4, 4x4x32, 3x3x64 terms), the Soft MoE, the Q head: ~1500 roundings.
  assert_close_to_scale(q, _REF["net_softmoe/q"], 2 * ops_rtol(1500))
  chex.assert_shape(stats["expert_load"], (4,))
