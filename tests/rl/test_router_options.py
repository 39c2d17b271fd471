"""The router options of ``QNetwork`` (position embedding, global average pooling, per-patch tokens,
normalised routing), the router diagnostics (Q spread, Adam's moments against eps) and what a DQN
run logs with them; every option off is the network and the run without it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab.moe import soft_moe
from jaxlab.rl import diagnostics
from jaxlab.rl.networks import QNetwork
from jaxlab.rl.networks_tokens import add_position_embedding, global_average_pool, per_conv
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train
from configs import dqn_minatar
from tests.support.bad_input import assert_one_clear_line
from tests.support.configs import with_overrides
from tests.support.tolerances import EPS32, ops_rtol

OBS_SHAPE = (10, 10, 4)  # MinAtar Breakout: m = 100 tokens of d = 16
M, D, A = 100, 16, 6
OBS = jax.random.bernoulli(jax.random.key(1), 0.3, (5, *OBS_SHAPE))
SMALL = dict(num_experts=2, expert_hidden=8, moe_impl="einsum")  # einsum: "auto"'s function, faster to init
OPTIONS_OFF = dict(normalize=False, position_embedding="none", pooling="flatten", router_diagnostics=False)


def _tiny(**overrides):
  """The dqn_minatar:tiny config with ``overrides`` (dotted keys)."""
  return with_overrides(dqn_minatar.get_config("tiny"), **overrides)


def _encoder(params, obs):
  """The MinAtar encoder's output [b, 10, 10, 16], by hand (XLA's convolution)."""
  conv = params["MinAtarEncoder_0"]["Conv_0"]
  return jax.nn.relu(jax.lax.conv_general_dilated(obs.astype(jnp.float32), conv["kernel"], (1, 1), "SAME",
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC")) + conv["bias"])


def _dense(p, x):
  return x @ p["kernel"] + p["bias"]


def _run(net):
  """The network's variables and ``(q, stats)`` on OBS, both jitted (eager flax compiles op by op: slower)."""
  v = jax.jit(net.init)(jax.random.key(0), OBS)
  return v, jax.jit(net.apply)(v, OBS)


def _soft_moe(p, tokens):
  return jax.jit(lambda p, x: soft_moe(p, x, impl="einsum")[0])(
      {"router": p["SoftMoE_0"]["router"], "experts": p["SoftMoE_0"]["experts"]}, tokens)


def _close(a, b, n=2000):
  """Two float32 routes through the same few hundred-term dots: rounding at the outputs' scale."""
  np.testing.assert_allclose(a, b, rtol=ops_rtol(n), atol=ops_rtol(n) * float(np.max(np.abs(b))))


def test_the_default_network_is_encoder_tokens_soft_moe_flatten_q_and_the_options_off_change_nothing():
  v, (q, stats) = _run(QNetwork(num_actions=A, **SMALL))
  assert set(v["params"]) == {"MinAtarEncoder_0", "SoftMoE_0", "Dense_0"}
  assert set(v["params"]["SoftMoE_0"]["router"]) == {"phi"}  # no scale without normalize
  p = v["params"]
  y = _soft_moe(p, per_conv(_encoder(p, OBS)))
  _close(q, _dense(p["Dense_0"], y.reshape(OBS.shape[0], -1)))
  assert set(stats) == {"dispatch_entropy", "combine_entropy", "dispatch_max", "combine_max", "expert_load"}
  v_off, (q_off, stats_off) = _run(QNetwork(num_actions=A, **SMALL, **OPTIONS_OFF))
  assert jax.tree.structure(v_off) == jax.tree.structure(v)
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(v_off), jax.tree.leaves(v)))
  np.testing.assert_array_equal(q_off, q)  # the same program: bit for bit
  assert stats_off.keys() == stats.keys()


@pytest.mark.parametrize("head", ["softmoe", "token_mlp"])
def test_the_learned_position_embedding_is_added_to_every_token_before_the_layer(head):
  net = QNetwork(num_actions=A, head=head, position_embedding="learned", **SMALL)
  v, (q, _) = _run(net)
  table = v["params"]["position_embedding"]["pos_embedding"]
  assert table.shape == (M, D)
  assert 0.015 < float(jnp.std(table)) < 0.025  # N(0, 0.02^2), vmoe's AddPositionEmbs; 1600 draws: +-2%
  if head == "softmoe":
    p = v["params"]
    tokens = add_position_embedding(per_conv(_encoder(p, OBS)), table)
    np.testing.assert_array_equal(tokens, per_conv(_encoder(p, OBS)) + table[None])  # the same table at every sample
    _close(q, _dense(p["Dense_0"], _soft_moe(p, tokens).reshape(OBS.shape[0], -1)))


def test_global_average_pooling_replaces_the_flatten_before_the_q_head():
  v, (q, _) = _run(QNetwork(num_actions=A, pooling="gap", **SMALL))
  p = v["params"]
  assert p["Dense_0"]["kernel"].shape == (D, A)  # the Q head reads d features, not m * d
  _close(q, _dense(p["Dense_0"], jnp.mean(_soft_moe(p, per_conv(_encoder(p, OBS))), axis=1)))
  # the dense baseline: encoder -> GAP -> Dense -> ReLU -> Q (Sokar & Castro's placement)
  v, (q, _) = _run(QNetwork(num_actions=A, head="dense", width=8, pooling="gap"))
  p = v["params"]
  assert p["Dense_0"]["kernel"].shape == (D, 8)
  hidden = jax.nn.relu(_dense(p["Dense_0"], jnp.mean(_encoder(p, OBS), axis=(1, 2))))
  _close(q, _dense(p["Dense_1"], hidden))
  np.testing.assert_array_equal(global_average_pool(jnp.arange(8.0).reshape(1, 2, 2, 2)), [[3.0, 4.0]])


def test_per_patch_tokens_are_dopamines_strided_valid_patch_convolution():
  """Dopamine's PER_PATCH (labs/moes/architectures/networks.py:423-441 @ 5873f54): nn.Conv(embedding_size,
  patch, strides=patch, VALID, flax's default init, named ``embedding``), then one token per patch."""
  v, (q, _) = _run(QNetwork(num_actions=A, tokenizer="per_patch", patch_size=(2, 2), embedding_size=12, **SMALL))
  conv = v["params"]["PerPatch_0"]["embedding"]
  assert conv["kernel"].shape == (2, 2, D, 12) and not np.any(conv["bias"])  # flax's default: zero bias
  assert v["params"]["SoftMoE_0"]["router"]["phi"].shape == (12, 2, 13)  # 25 tokens of 12: ceil(25 / 2) slots
  p = v["params"]
  patches = jax.lax.conv_general_dilated(_encoder(p, OBS), conv["kernel"], (2, 2), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC")) + conv["bias"]
  y = _soft_moe(p, patches.reshape(OBS.shape[0], 25, 12))
  _close(q, _dense(p["Dense_0"], y.reshape(OBS.shape[0], -1)))


def test_normalized_routing_has_vmoes_learned_scale_starting_at_one():
  v = jax.jit(QNetwork(num_actions=A, normalize=True, **SMALL).init)(jax.random.key(0), OBS)
  scale = v["params"]["SoftMoE_0"]["router"]["scale"]
  assert scale.shape == () and float(scale) == 1.0


def test_router_diagnostics_keep_the_combine_spread_and_change_nothing_else():
  v, (q_off, s_off) = _run(QNetwork(num_actions=A, **SMALL))
  q_on, s_on = jax.jit(QNetwork(num_actions=A, router_diagnostics=True, **SMALL).apply)(v, OBS)
  # two programs (one returns a statistic more): the same Q-values within rounding
  _close(q_on, q_off)
  assert set(s_on) - set(s_off) == {"combine_spread"} and float(s_on["combine_spread"]) > 0


def test_q_spread_over_states_and_actions():
  q = jnp.array([[1.0, 2.0, 6.0], [3.0, 2.0, 0.0]])
  out = diagnostics.q_spread(q)
  np.testing.assert_allclose(out["q_spread_states"], np.mean(np.std(np.asarray(q), axis=0)), rtol=ops_rtol(10))
  np.testing.assert_allclose(out["q_spread_actions"], np.mean(np.std(np.asarray(q), axis=1)), rtol=ops_rtol(10))
  assert float(diagnostics.q_spread(jnp.ones((4, 3)))["q_spread_states"]) == 0.0


def _adam_after(grads_list, inject=False, **adam):
  params = {"SoftMoE_0": {"router": {"phi": jnp.zeros(3)}, "experts": {"w1": jnp.zeros(2)}}, "Dense_0": jnp.zeros(2)}
  opt = optax.inject_hyperparams(optax.adam)(**adam) if inject else optax.adam(**adam)
  state = opt.init(params)
  for g in grads_list:
    _, state = opt.update(g, state, params)
  return state


def test_adam_moments_are_the_bias_corrected_gradient_rms_against_eps():
  rng = np.random.default_rng(0)
  grads = [{"SoftMoE_0": {"router": {"phi": jnp.asarray(1e-5 * rng.normal(size=3), jnp.float32)},
                          "experts": {"w1": jnp.asarray(rng.normal(size=2), jnp.float32)}},
            "Dense_0": jnp.asarray(rng.normal(size=2), jnp.float32)} for _ in range(5)]
  eps, b2 = 1.5e-4, 0.999
  m = diagnostics.adam_moments(_adam_after(grads, learning_rate=1e-3, eps=eps), eps=eps, b2=b2)
  phi = np.stack([np.asarray(g["SoftMoE_0"]["router"]["phi"], np.float64) for g in grads])  # [steps, 3]
  b2_32 = float(np.float32(b2))  # the beta_2 Adam runs with
  weights = (1 - b2_32) * b2_32 ** np.arange(4, -1, -1)  # the EMA's weights of steps 1..5
  v_hat = (weights[:, None] * phi ** 2).sum(0) / (1 - b2_32 ** 5)
  # ~10 float32 roundings per coordinate (the EMA, the correction, a 3-term mean, a sqrt), and the
  # correction 1 - b2^5 = 0.005 loses log2(1 / 0.005) bits to cancellation: EPS32 / 0.005 relative
  rtol = ops_rtol(30) + 2 * EPS32 / (1 - b2_32 ** 5)
  np.testing.assert_allclose(m["router/grad_rms"], np.sqrt(v_hat.mean()), rtol=rtol)
  np.testing.assert_allclose(m["router/grad_rms_over_eps"], np.sqrt(v_hat.mean()) / eps, rtol=rtol)
  np.testing.assert_allclose(m["router/step_fraction"], np.mean(np.sqrt(v_hat) / (np.sqrt(v_hat) + eps)), rtol=rtol)
  assert float(m["router/step_fraction"]) < 0.1 < float(m["adam/step_fraction"])  # eps eats the router's step
  assert set(m) == {f"{g}/{k}" for g in ("adam", "router") for k in ("grad_rms", "grad_rms_over_eps", "step_fraction")}
  # before the first update: zeros, not 0 / 0
  assert all(float(x) == 0.0 for x in diagnostics.adam_moments(_adam_after([], learning_rate=1e-3), 1e-8, b2).values())
  # a swept (injected) eps is the one Adam uses
  injected = diagnostics.adam_moments(_adam_after(grads, learning_rate=1e-3, eps=1e-6, inject=True), eps=eps, b2=b2)
  np.testing.assert_allclose(injected["router/grad_rms_over_eps"], np.sqrt(v_hat.mean()) / float(np.float32(1e-6)),
                             rtol=rtol)


def test_adam_moments_without_an_adam_state_is_one_clear_line():
  state = optax.sgd(0.1).init({"router": jnp.zeros(2)})
  assert_one_clear_line("router diagnostics", "no Adam state",
                        lambda: diagnostics.adam_moments(state, 1e-8, 0.999, where="network.router_diagnostics=True"),
                        "network.router_diagnostics=True: the optimizer state holds 0 Adam states")


def test_a_dqn_run_with_router_diagnostics_logs_them(tmp_path):
  train(_tiny(**{"network.router_diagnostics": True, "num_steps": 10, "dqn.eval_steps": 0}), str(tmp_path / "on"),
        devices=jax.devices()[:1], progress=False)
  rows = read_metrics(str(tmp_path / "on"))
  last = [r for r in rows if "moe/combine_spread" in r][-1]
  assert 0.0 <= float(np.mean(last["moe/combine_spread"]))
  assert 0.0 < float(np.mean(last["router/step_fraction"])) <= 1.0
  assert 0.0 < float(np.mean(last["router/grad_rms_over_eps"])) < np.inf
  assert float(np.mean(last["q_spread_states"])) >= 0.0 and float(np.mean(last["q_spread_actions"])) >= 0.0


def test_the_default_runs_metrics_are_those_of_the_config_without_the_router_keys(tmp_path):
  """The keys present and off (configs/dqn_minatar.py) train what a config without them trained."""
  short = {"num_steps": 10, "dqn.eval_steps": 0}  # two calls of 5 updates
  with_keys = _tiny(**short)
  without = _tiny(**short)
  with without.network.unlocked():
    for key in ("normalize", "position_embedding", "pooling", "router_diagnostics", "patch_size"):
      del without.network[key]
  a = train(with_keys, str(tmp_path / "a"), devices=jax.devices()[:1], progress=False)
  b = train(without, str(tmp_path / "b"), devices=jax.devices()[:1], progress=False)
  ra, rb = read_metrics(str(tmp_path / "a")), read_metrics(str(tmp_path / "b"))
  drop = ("time", "steps_per_sec", "frames_per_sec", "wall")  # timings differ run to run
  assert len(ra) == len(rb) and all(x.keys() == y.keys() for x, y in zip(ra, rb))
  assert not any(k.startswith(("router/", "adam/", "q_spread")) or k == "moe/combine_spread" for r in ra for k in r)
  for x, y in zip(ra, rb):  # the same program twice on one machine: bit for bit (NaN where no episode ended)
    for k in x:
      if not k.startswith(drop):
        np.testing.assert_array_equal(x[k], y[k], err_msg=k)
  assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a.state.params), jax.tree.leaves(b.state.params)))
