"""The Rainbow / DER network and its noise against Dopamine's definitions (google/dopamine @ 5873f54):
parameter counts from its architecture, the noisy dense baseline, noisy experts that stay noisy in
evaluation, and noise drawn per batch row as its MoE agents draw it."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dqn_atari
from jaxlab.errors import InputError
from jaxlab.rl.agent_loss import AgentNetwork
from jaxlab.rl.distributional import c51_support
from jaxlab.rl.networks import QNetwork, param_count
from jaxlab.rl.rainbow_layers import NoisyDense
from tests.support.tolerances import assert_close_to_scale

PONG_ACTIONS = 6
ATARI = (84, 84, 4)


def _noisy(fan_in, features, noisy=True):
  """Dopamine's NoisyNetwork (jax/networks.py:494-529): kernel_mu, kernel_sigma, bias_mu, bias_sigma;
  nn.Dense (xavier kernel + bias) when not noisy."""
  return (2 if noisy else 1) * (fan_in * features + features)


def _conv(k, c_in, c_out):
  return k * k * c_in * c_out + c_out


def dopamine_der_params(moe_type, num_actions=PONG_ACTIONS, num_experts=4, expert_hidden=512, num_atoms=51):
  """FullRainbowMoENetwork's parameter count with DER.gin's bindings (encoder_type 'CNN', noisy, dueling,
  4 experts of 512), layer by layer from labs/moes/architectures/networks.py:
  RainbowCNNet (462-490): Conv 32 8x8/4, 64 4x4/2, 64 3x3/1, flax SAME padding: 84 -> 21 -> 11 -> 11;
  BASELINE (570-589): feature_layer(noisy) to expert_hidden_units; SOFTMOE (590-631, softmoe.py:43-145):
  PER_PIXEL tokens (121 of 64), phi [d, n, ceil(121 / n)], the always-created `scalar` (1,), and per expert
  ExpertModel(noisy) (44-70): NoisyNetwork(d -> h), Dense(h -> d); then (637-642) the dueling head:
  NoisyNetwork(F -> A * N) and NoisyNetwork(F -> N)."""
  encoder = _conv(8, 4, 32) + _conv(4, 32, 64) + _conv(3, 64, 64)
  tokens, d = 11 * 11, 64
  if moe_type == "BASELINE":
    body, features = _noisy(tokens * d, expert_hidden), expert_hidden
  else:
    slots = math.ceil(tokens / num_experts)
    expert = _noisy(d, expert_hidden) + expert_hidden * d + d
    body, features = d * num_experts * slots + 1 + num_experts * expert, tokens * d
  head = _noisy(features, num_actions * num_atoms) + _noisy(features, num_atoms)
  return encoder + body + head


def _der_network(**changes):
  kw = {k: v for k, v in dqn_atari.get_config("der").network.items()}
  kw.update(changes)
  return kw


def test_der_parameter_counts_equal_dopamines():
  """Dopamine's DER-MoE has 6,013,419 parameters on Pong; ours one fewer: the `scalar` Dopamine's SoftMoE
  creates and never uses without normalization (its gradient is 0; the methods page, "Differences from
  the official code", item 2). The dense DER (BASELINE) has a noisy hidden layer, as Dopamine's."""
  assert dopamine_der_params("SOFTMOE") == 6_013_419
  assert param_count(ATARI, num_actions=PONG_ACTIONS, **_der_network()) == 6_013_419 - 1
  assert dopamine_der_params("BASELINE") == 8_375_146
  assert param_count(ATARI, num_actions=PONG_ACTIONS, **_der_network(head="dense")) == 8_375_146
  # before: plain experts and a plain hidden layer
  assert param_count(ATARI, num_actions=PONG_ACTIONS, **_der_network(noisy_experts=False)) == 5_880_298
  assert param_count(ATARI, num_actions=PONG_ACTIONS, **_der_network(head="dense", noisy_hidden=False)) == 4_409_706


def _agent(**changes):
  kw = dict(num_actions=3, encoder="minatar", head="softmoe", num_experts=2, expert_hidden=8, width=8, num_atoms=5,
            dueling=True, noisy=True, noisy_hidden=True, noisy_experts=True)
  net = QNetwork(**{**kw, **changes})
  agent = AgentNetwork(net, c51_support(5, 10.0), lambda params, obs: obs)
  obs = jax.random.normal(jax.random.key(0), (4, 10, 10, 4))
  return agent, jax.jit(agent.init)(jax.random.key(1), obs[:1]), obs


def _fns(agent):
  """Jitted: the training pass with a key, Dopamine's evaluation with a key, the mean network."""
  return (jax.jit(lambda p, o, k: agent.q_fn(p, o, jax.random.key(k))[0]),
          jax.jit(lambda p, o, k: agent.eval_q_values(p, o, jax.random.key(k))),
          jax.jit(lambda p, o: agent.q_values(p, o)[0]))


def test_the_dense_baselines_hidden_layer_is_noisy():
  agent, params, obs = _agent(head="dense")
  assert "kernel_sigma" in params["NoisyDense_0"]
  train_q, eval_q, _ = _fns(agent)
  hidden_only = AgentNetwork(agent.net.clone(noisy=False), agent.support, agent.prepare)  # a plain head
  hidden_q = _fns(hidden_only)[0]
  p2 = jax.jit(hidden_only.init)(jax.random.key(1), obs[:1])
  assert not np.allclose(hidden_q(p2, obs, 2), hidden_q(p2, obs, 3))
  assert not np.allclose(train_q(params, obs, 2), train_q(params, obs, 3))
  # Dopamine's eval_mode reaches feature_layer: the hidden layer is at its means in evaluation
  np.testing.assert_array_equal(eval_q(params, obs, 2), eval_q(params, obs, 3))


def test_noisy_experts_stay_noisy_in_evaluation_as_dopamines():
  """Dopamine's ExpertModel never gets eval_mode (networks.py:175-182): evaluation keeps the experts' noise
  while the head uses its means; the inference functions' mean network has no noise at all."""
  agent, params, obs = _agent()
  assert set(params["SoftMoE_0"]["experts"]) == {"w1", "b1", "w2", "b2", "w1_sigma", "b1_sigma"}
  _, eval_q, mean_q = _fns(agent)
  assert not np.allclose(eval_q(params, obs, 2), eval_q(params, obs, 3))
  # only the experts: with them at their means the evaluation is the mean network (one program: bit-equal)
  plain = {**params, "SoftMoE_0": {**params["SoftMoE_0"], "experts": {
      k: v for k, v in params["SoftMoE_0"]["experts"].items() if not k.endswith("_sigma")}}}
  means_only = AgentNetwork(agent.net.clone(noisy_experts=False), agent.support, agent.prepare)
  np.testing.assert_array_equal(_fns(means_only)[1](plain, obs, 2), _fns(means_only)[2](plain, obs))
  np.testing.assert_array_equal(mean_q(params, obs), _fns(means_only)[2](plain, obs))
  with pytest.raises(InputError, match="noisy_experts=True with head='top1'"):
    QNetwork(num_actions=3, head="top1", noisy_experts=True).check_config()
  with pytest.raises(InputError, match="noise_per_row=True but the network draws no noise"):
    QNetwork(num_actions=3, noise_per_row=True).check_config()


def test_factorised_noisy_dense_is_the_weight_form():
  """The same function in two groupings; in float64 they agree to ~1e-15 of the output's terms (a
  40-term dot; 1e-12 of the largest output leaves a factor 1,000 for cancellation)."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(3, 40))
  params = {"kernel_mu": rng.uniform(-0.16, 0.16, (40, 7)), "kernel_sigma": np.full((40, 7), 0.5),
            "bias_mu": rng.uniform(-0.16, 0.16, 7), "bias_sigma": np.full(7, 0.5)}  # noise as large as the means
  with jax.enable_x64(True):
    run = jax.jit(lambda f, d: NoisyDense(7, deterministic=d, factorised=f).apply(
        {"params": params}, x, rngs={"noise": jax.random.key(3)}), static_argnums=(0, 1))
    assert_close_to_scale(run(True, False), run(False, False), 1e-12)
    assert not np.allclose(run(True, False), run(False, True))


def test_noise_per_row_draws_one_sample_per_row():
  """Dopamine's MoE agents: rng_online = split(rng1, batch), vmap(q_online)(states, rng_online)
  (full_rainbow_moe_agent.py:85-86): different rows see different noise, and a row is the network on
  that row alone with that row's key. In float64, so that the vmapped and the one-row matmuls, which
  may sum in other orders, agree to ~1e-13 of their terms (sums of <= 3,300 terms; 1e-9 of the largest
  output leaves a factor 2,500 for cancellation)."""
  per_row, params, obs = _agent(noise_per_row=True)
  shared = AgentNetwork(per_row.net.clone(noise_per_row=False), per_row.support, per_row.prepare)
  tol = 1e-9
  with jax.enable_x64(True):
    params, obs = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), (params, obs))
    rows_q, shared_q = _fns(per_row)[0], _fns(shared)[0]
    batch_q = jax.jit(lambda p, o, k: per_row.q_fn(p, o, jax.random.key(k), per_row=False)[0])
    same = jnp.broadcast_to(obs[:1], obs.shape)  # one observation in every row
    rows = rows_q(params, same, 5)
    assert all(not np.allclose(rows[0], rows[i], rtol=1e-3) for i in range(1, 4))
    one = shared_q(params, same, 5)  # one draw: every row the same
    assert_close_to_scale(one, jnp.broadcast_to(one[:1], one.shape), tol)
    keys = jax.random.split(jax.random.key(5), 4)
    alone_q = jax.jit(lambda p, o, k: shared.q_fn(p, o, k)[0])
    alone = jnp.concatenate([alone_q(params, obs[i:i + 1], keys[i]) for i in range(4)])
    assert_close_to_scale(rows_q(params, obs, 5), alone, tol)
    # the passes at s' keep one key for the batch (target_output's in_axes None for the key)
    assert_close_to_scale(batch_q(params, same, 5), one, tol)
