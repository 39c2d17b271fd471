"""The ablation switches of "Don't flatten, tokenize!" (Sokar et al., ICLR 2025) on ``QNetwork``:
the scaled single expert, the tokenised heads without a router, the flatten tokenizer, and the
``diagnostics`` flag (off: bit-identical to the network without it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs import rl_expert_scaling
from jaxlab.errors import InputError
from jaxlab.moe import experts as experts_lib
from jaxlab.tasks.dqn_config import q_network_from_config
from jaxlab.rl.networks import ACTIVATIONS, QNetwork, param_count, scaled_single_expert
from jaxlab.rl.networks_tokens import per_conv
from tests.support.bad_input import assert_one_clear_line

OBS_SHAPE = (10, 10, 4)  # MinAtar Breakout: the encoder gives m = 100 tokens of d = 16
M, D, A = 100, 16, 6
CONV = 3 * 3 * 4 * 16 + 16  # the MinAtar encoder's parameters
OBS = jax.random.bernoulli(jax.random.key(1), 0.3, (5, *OBS_SHAPE))


def _count(**kw) -> int:
  return param_count(OBS_SHAPE, num_actions=A, **kw)


def _tokens(params, obs):
  """The MinAtar encoder's per-position tokens [b, m, d], by hand (XLA's convolution)."""
  conv = params["MinAtarEncoder_0"]["Conv_0"]
  enc = jax.nn.relu(jax.lax.conv_general_dilated(obs.astype(jnp.float32), conv["kernel"], (1, 1), "SAME",
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC")) + conv["bias"])
  return per_conv(enc)


def _expert(h: int) -> int:
  return D * h + h + h * D + D  # Dense(h) -> ReLU -> Dense(d)


def test_scaled_single_expert_is_one_expert_n_times_as_wide_with_the_n_experts_mlp_parameters():
  h, n = 16, 8
  assert scaled_single_expert(n, h) == {"num_experts": 1, "expert_hidden": n * h}
  scaled = _count(head="softmoe", **scaled_single_expert(n, h))
  many = _count(head="softmoe", num_experts=n, expert_hidden=h)
  assert scaled == CONV + D * M + _expert(n * h) + M * D * A + A  # router phi [d, 1, m]: m slots
  slots = n * -(-M // n)  # n * ceil(m / n) = 104 slots for 8 experts
  assert many == CONV + D * slots + n * _expert(h) + M * D * A + A
  # the same MLP parameters but the n - 1 extra output biases; the router differs by the 4 extra slots
  assert many - scaled == (n - 1) * D + D * (slots - M)
  # the preset of the study is this switch
  cell = rl_expert_scaling.get_config("tokenize").cells["softmoe_1_scaled"].set.network
  assert (cell.num_experts, cell.expert_hidden) == (1, 8 * 128)


def test_token_mlp_is_one_soft_moe_expert_on_every_token_without_a_router():
  h = 16
  net = QNetwork(num_actions=A, head="token_mlp", expert_hidden=h)
  params = net.init(jax.random.key(0), OBS)["params"]
  assert _count(head="token_mlp", expert_hidden=h) == _count(head="softmoe", num_experts=1, expert_hidden=h) - D * M
  experts = params["TokenMLP_0"]["experts"]
  assert {k: v.shape for k, v in experts.items()} == {"w1": (1, D, h), "b1": (1, h), "w2": (1, h, D), "b2": (1, D)}
  # the Q-values are the expert's MLP applied to each token (identity dispatch and combine), flattened
  q, stats = net.apply({"params": params}, OBS)
  assert stats == {}
  y = experts_lib.apply_experts(experts, _tokens(params, OBS).reshape(1, -1, D)).reshape(OBS.shape[0], -1)
  want = y @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"]
  np.testing.assert_allclose(q, want, rtol=2e-5, atol=2e-5)


def test_token_dense_is_the_baselines_layer_on_every_token_then_flattened():
  w = 8
  assert _count(head="token_dense", width=w, width_multiplier=2) == CONV + D * 2 * w + 2 * w + M * 2 * w * A + A
  assert _count(head="dense", width=w, width_multiplier=2) == CONV + M * D * 2 * w + 2 * w + 2 * w * A + A
  net = QNetwork(num_actions=A, head="token_dense", width=w)
  v = net.init(jax.random.key(0), OBS)
  assert v["params"]["TokenDense_0"]["Dense_0"]["kernel"].shape == (D, w)
  q, _ = net.apply(v, OBS)
  p = v["params"]
  layer = p["TokenDense_0"]["Dense_0"]
  hidden = jax.nn.relu(_tokens(p, OBS) @ layer["kernel"] + layer["bias"])  # [b, m, w]: one layer, every token
  want = hidden.reshape(OBS.shape[0], -1) @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]
  np.testing.assert_allclose(q, want, rtol=2e-5, atol=2e-5)


def test_flatten_tokenizer_gives_the_moe_one_token_of_every_feature():
  net = QNetwork(num_actions=A, head="softmoe", tokenizer="flatten", num_experts=4, expert_hidden=8)
  v = jax.eval_shape(net.init, jax.random.key(0), OBS)
  soft = v["params"]["SoftMoE_0"]
  assert soft["router"]["phi"].shape == (M * D, 4, 1)  # one token of m*d: one slot per expert
  assert soft["experts"]["w1"].shape == (4, M * D, 8)
  assert jax.eval_shape(net.apply, v, OBS)[0].shape == (OBS.shape[0], A)
  vec = jnp.ones((2, 5))  # vector observations take it too: [b, 1, F]
  net = QNetwork(num_actions=A, encoder="mlp", mlp_features=(7,), tokenizer="flatten", num_experts=2, expert_hidden=4,
                 moe_impl="einsum")
  v = net.init(jax.random.key(0), vec)
  assert v["params"]["SoftMoE_0"]["router"]["phi"].shape == (7, 2, 1)
  q, stats = net.apply(v, vec)
  assert q.shape == (2, A) and np.all(np.isfinite(q)) and float(stats["dispatch_max"]) == 1.0  # one token


# moe_impl="einsum": the same function as "auto" (tests/moe), which initialises many times slower outside jit
@pytest.mark.parametrize("kw", [dict(head="softmoe", num_experts=2, expert_hidden=8, moe_impl="einsum"),
                                dict(head="dense", width=8), dict(head="none"),
                                dict(head="top1", num_experts=2, expert_hidden=8),
                                dict(head="token_dense", width=8), dict(head="token_mlp", expert_hidden=8)],
                         ids=lambda kw: kw["head"])
def test_diagnostics_add_activations_and_change_nothing_else(kw):
  off, on = QNetwork(num_actions=A, **kw), QNetwork(num_actions=A, diagnostics=True, **kw)
  v_off, v_on = off.init(jax.random.key(0), OBS), on.init(jax.random.key(0), OBS)
  (q_off, s_off), (q_on, s_on) = off.apply(v_off, OBS), on.apply(v_on, OBS)
  assert jax.tree.structure(v_off) == jax.tree.structure(v_on)
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(v_off), jax.tree.leaves(v_on)))
  np.testing.assert_array_equal(q_off, q_on)
  assert not any(k.startswith(ACTIVATIONS) for k in s_off)
  assert {k: v for k, v in s_on.items() if not k.startswith(ACTIVATIONS)}.keys() == s_off.keys()
  acts = {k[len(ACTIVATIONS):]: v.shape for k, v in s_on.items() if k.startswith(ACTIVATIONS)}
  b = OBS.shape[0]
  assert acts["encoder"] == (b, 10, 10, 16)
  width = {"softmoe": M * D, "top1": M * D, "dense": 8, "none": M * D, "token_dense": M * 8, "token_mlp": M * D}
  assert acts["features"] == (b, width[kw["head"]])
  if kw["head"] in ("dense", "token_dense", "token_mlp"):
    assert acts["penultimate"] == ((b, 8) if kw["head"] == "dense" else (b, M, 8))
  else:
    assert "penultimate" not in acts


def test_network_config_keys_reach_the_network_and_a_task_without_diagnostics_refuses_them():
  net, _ = q_network_from_config(ml_collections.ConfigDict({"head": "token_mlp", "diagnostics": True}), 6,
                                 diagnostics=True)
  assert net.head == "token_mlp" and net.diagnostics
  assert_one_clear_line("network config", "diagnostics in a task without them", lambda: q_network_from_config(
      ml_collections.ConfigDict({"diagnostics": True}), 6), "network.diagnostics=True: this task does not log")


@pytest.mark.parametrize("call,fragment", [
    (lambda: QNetwork(A, head="tokenize").check_config(), "QNetwork.head='tokenize'; choose one of"),
    (lambda: QNetwork(A, tokenizer="flat").check_config(), "QNetwork.tokenizer='flat'; choose one of"),
    (lambda: QNetwork(A, diagnostics="yes").check_config(), "QNetwork.diagnostics='yes'; must be True or False"),
    (lambda: QNetwork(A, head="token_dense", width=0).check_config(), "QNetwork.width=0; must be an int >= 1"),
    (lambda: jax.eval_shape(QNetwork(A, head="token_mlp", expert_hidden=0).init, jax.random.key(0), OBS),
     "QNetwork.expert_hidden=0; must be an int >= 1"),
    (lambda: scaled_single_expert(0, 16), "scaled_single_expert num_experts=0; must be an int >= 1"),
    (lambda: scaled_single_expert(8, 2.5), "scaled_single_expert expert_hidden=2.5; must be an int >= 1"),
], ids=["head", "tokenizer", "diagnostics", "token_dense width", "token_mlp hidden", "scaled n", "scaled h"])
def test_bad_ablation_settings_are_one_clear_line(call, fragment):
  assert_one_clear_line("Q-network ablations", fragment, call, fragment)


# The tokenize study's cells on MinAtar (h = 128), as docs/methods/soft_moe_rl.md lists them.
TOKENIZE_COUNTS = {"dense": 206_294, "dense_x8": 1_646_166, "token_dense": 79_574, "token_mlp": 14_438,
                   "softmoe_1": 16_038, "softmoe_1_scaled": 45_606, "softmoe_8": 45_782, "softmoe_8_flatten": 3_313_622}


def test_the_tokenize_cells_have_the_documented_parameter_counts():
  cells = rl_expert_scaling.get_config("tokenize").cells
  assert {name: _count(**cells[name].set.network.to_dict()) for name in cells} == TOKENIZE_COUNTS
  doc = (__import__("pathlib").Path(__file__).parents[2] / "docs/methods/soft_moe_rl.md").read_text()
  section = doc.split("## Ablations of \"Don't flatten, tokenize!\"")[1].split("\n## ")[0]
  assert all(f"| {n:,} |" in section for n in TOKENIZE_COUNTS.values())
