"""The DQN agent's Rainbow options: C51 (num_atoms), n-step returns (update_horizon), dueling and
noisy heads, against hand computations; one tiny training run with all of them (and prioritised replay)."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dqn_minatar
from jaxlab.rl import dqn
from jaxlab.rl.networks import QNetwork
from jaxlab.rl.replay import TimeStep, make_replay, n_step_transitions
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train


def _logits_fn(params, obs):
  """Logits [B, A, N] linear in the observation: obs [B, F] @ w [F, A, N]."""
  return jnp.einsum("bf,fan->ban", obs, params["w"]), {}


def _one_transition(action=0, reward=0.5, discount=0.0):
  return SimpleNamespace(obs=jnp.array([[1.0]]), action=jnp.array([action]), reward=jnp.array([reward]),
                         discount=jnp.array([discount]), next_obs=jnp.array([[1.0]]))


def test_c51_loss_at_a_terminal_step_is_the_cross_entropy_to_the_projected_reward():
  support = jnp.array([-1.0, 1.0])
  online = {"w": jnp.array([[[0.0, np.log(3.0)], [0.0, 0.0]]])}  # action 0: p = [1/4, 3/4]
  loss, metrics = dqn.td_loss(_logits_fn, online, online, _one_transition(), gamma=0.9, support=support)
  # Terminal: the target is r = 0.5 projected on {-1, 1}: mass 0.25 at -1, 0.75 at 1.
  expected = -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))
  np.testing.assert_allclose(loss, expected, rtol=1e-6)
  np.testing.assert_allclose(metrics["q_mean"], 0.5, rtol=1e-6)       # E[Z(s, 0)] = -1/4 + 3/4
  np.testing.assert_allclose(metrics["td_abs_error"], 0.0, atol=1e-6)  # the target's mean is 0.5 too


@pytest.mark.parametrize("double", [False, True])
def test_c51_double_dqn_selects_the_next_action_with_the_online_network(double):
  support = jnp.array([0.0, 1.0])
  big = 20.0  # softmax saturates: p = [0, 1] or [1, 0]
  online = {"w": jnp.array([[[0.0, np.log(3.0)], [-big, big]]])}  # online: Q = [0.75, 1]
  target = {"w": jnp.array([[[-big, big], [big, -big]]])}  # target: action 0 has Q = 1, action 1 Q = 0
  loss, metrics = dqn.td_loss(_logits_fn, online, target, _one_transition(discount=1.0, reward=0.0),
                              gamma=1.0, support=support, double_dqn=double)
  # The target distribution is the target network's at a* (reward 0, gamma 1): a* = 0 (its own
  # argmax) puts all mass on z = 1; the online argmax a* = 1 puts it on z = 0. Q(s, 0) = 0.75.
  target_mean = 0.0 if double else 1.0
  np.testing.assert_allclose(metrics["td_abs_error"], abs(0.75 - target_mean), atol=1e-6)
  np.testing.assert_allclose(loss, -np.log(0.25 if double else 0.75), rtol=1e-5)  # p(s, 0) = [1/4, 3/4]


def _steps(rewards, discounts, done):
  b, t = np.shape(rewards)
  obs = jnp.arange(b * t, dtype=jnp.float32).reshape(b, t, 1)
  return TimeStep(obs=obs, action=jnp.zeros((b, t), jnp.int32), reward=jnp.asarray(rewards, jnp.float32),
                  discount=jnp.asarray(discounts, jnp.float32), done=jnp.asarray(done, jnp.bool_))


def test_n_step_transitions_stop_at_terminals_and_drop_truncated_horizons():
  g = 0.5
  steps = _steps(rewards=[[1, 2, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8]],
                 discounts=[[1, 1, 1, 1], [1, 0, 1, 1], [1, 1, 1, 1]],
                 done=[[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 0, 0]])   # row 2 truncates at step 1
  batch = n_step_transitions(steps, g)
  np.testing.assert_allclose(batch.reward, [1 + g * 2 + g * g * 4, 1 + g * 2, 1 + g * 2 + g * g * 4])
  np.testing.assert_array_equal(batch.discount, [1, 0, 1])  # the TD loss multiplies by gamma ** 3
  np.testing.assert_array_equal(batch.weight, [1, 1, 0])
  np.testing.assert_array_equal(batch.next_obs[:, 0], [3, 7, 11])  # slot t + 3 of each row


def test_n_step_td_loss_equals_the_hand_computed_target():
  g, n = 0.9, 3
  steps = _steps(rewards=[[1.0, -1.0, 2.0, 5.0]], discounts=[[1, 1, 1, 1]], done=[[0, 0, 0, 0]])
  batch = n_step_transitions(steps, g)
  params = {"w": jnp.array([[0.5, 0.25]])}  # Q(obs) = obs * w
  loss, _ = dqn.td_loss(lambda p, o: (o @ p["w"], {}), params, params, batch, gamma=g ** n)
  # Q(s, 0) = 0 (obs 0); y = 1 - 0.9 + 0.81 * 2 + 0.729 * max(Q(obs 3)) = 1 - 0.9 + 1.62 + 0.729 * 1.5
  y = 1.0 - 0.9 + 0.81 * 2.0 + 0.729 * 1.5
  np.testing.assert_allclose(loss, y ** 2, rtol=1e-6)


def test_replay_sequences_are_consecutive_slots_of_one_environment():
  replay = make_replay(16, 2, 8, min_size=4, horizon=3)
  example = TimeStep(jnp.zeros(()), jnp.zeros((), jnp.int32), jnp.zeros(()), jnp.zeros(()), jnp.zeros((), jnp.bool_))
  state = replay.init(example)
  for t in range(6):
    code = 100.0 * jnp.arange(2) + t
    state = replay.add(state, TimeStep(code, code.astype(jnp.int32), code, jnp.ones(2), jnp.zeros(2, jnp.bool_)))
  assert int(replay.num_transitions(state)) == 2 * (6 - 3)
  seq = replay.sample_sequences(state, jax.random.key(0))
  assert seq.obs.shape == (8, 4)
  np.testing.assert_array_equal(np.diff(np.asarray(seq.obs), axis=1), 1.0)  # t, t+1, t+2, t+3 of one env


def test_num_atoms_widens_the_q_head_and_one_atom_keeps_dqns_layer():
  obs = jnp.zeros((2, 10, 10, 4))
  plain = QNetwork(num_actions=3, head="dense", width=8).init(jax.random.key(0), obs)["params"]
  c51 = QNetwork(num_actions=3, head="dense", width=8, num_atoms=51)
  params = c51.init(jax.random.key(0), obs)["params"]
  assert params["rainbow_head"]["logits"]["kernel"].shape == (8, 3 * 51)
  assert "rainbow_head" not in plain and plain["Dense_1"]["kernel"].shape == (8, 3)
  logits, _ = c51.apply({"params": params}, obs)
  assert logits.shape == (2, 3, 51)


def test_noisy_head_draws_noise_per_key_and_its_means_when_deterministic():
  obs = jax.random.normal(jax.random.key(1), (2, 10, 10, 4))
  net = QNetwork(num_actions=3, head="dense", width=8, noisy=True, dueling=True)
  params = net.clone(deterministic=True).init(jax.random.key(0), obs)["params"]
  q = lambda key: net.apply({"params": params}, obs, rngs={"noise": key})[0]
  assert q(jax.random.key(2)).shape == (2, 3)
  assert not np.allclose(q(jax.random.key(2)), q(jax.random.key(3)))
  np.testing.assert_array_equal(q(jax.random.key(2)), q(jax.random.key(2)))
  mean = net.clone(deterministic=True).apply({"params": params}, obs)[0]
  assert not np.allclose(mean, q(jax.random.key(2)))


def test_rainbow_options_train_with_finite_losses(tmp_path):
  c = dqn_minatar.get_config("tiny")
  c.network.num_atoms, c.network.dueling, c.network.noisy = 11, True, True
  c.dqn.update_horizon, c.dqn.double_dqn, c.dqn.vmax = 3, True, 5.0
  c.dqn.replay_scheme = "prioritized"
  c.network.head, c.dqn.eval_steps, c.num_steps = "dense", 0, 10  # compile less: the options are the test
  result = train(c, str(tmp_path), devices=jax.devices()[:1], progress=False)
  assert result.state.params["rainbow_head"]["advantage"]["kernel_mu"].shape[-1] == 6 * 11  # breakout: 6 actions
  # The replay takes 3 extra prefill slots so the first n-step run is complete: ceil(64 / 1) + 3 = 67.
  replay = result.state.data_state.replay
  slots = 67 + 4 * result.summary["steps"]
  assert int(replay.buffer.current_index) == slots
  # Prioritised: exactly the complete transitions (all but the newest 3 slots) have a priority, and the
  # updates fed the cross-entropies back (their roots replaced Dopamine's initial 1 in the drawn slots).
  values = np.asarray(replay.priorities.levels[0])
  assert np.count_nonzero(values) == slots - 3 and np.any((values != 1.0) & (values > 0))
  assert float(replay.priorities.max_priority) >= float(values.max()) > 0
  losses = [m["loss"] for m in read_metrics(str(tmp_path)) if "loss" in m]
  assert losses and np.all(np.isfinite(losses)) and result.summary.get("nonfinite_skipped", 0) == 0
