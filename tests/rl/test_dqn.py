"""DQN: the TD loss and schedule against hand computations; the MinAtar task through the trainer."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import dqn_minatar
from jaxlab.errors import InputError
from jaxlab.rl import dqn
from jaxlab.rl.envs import make_env
from jaxlab.rl.networks import QNetwork
from tests.support.tolerances import ops_rtol, steps_tol
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.train.state import make_init_fn
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.experiment import train
from tests.support.configs import with_overrides


def _linear_q(params, obs):
  return obs @ params["w"], {}


def _batch():
  return SimpleNamespace(obs=jnp.array([[1.0, 0.0], [0.0, 1.0]]), action=jnp.array([0, 1]),
                         reward=jnp.array([1.0, -1.0]), discount=jnp.array([1.0, 0.0]),
                         next_obs=jnp.array([[0.0, 1.0], [1.0, 1.0]]))


@pytest.mark.parametrize("double", [False, True])
def test_td_loss_matches_a_hand_computation(double):
  online = {"w": jnp.array([[1.0, 2.0, 0.0], [3.0, -1.0, 0.5]])}
  target = {"w": jnp.array([[0.5, 0.0, 1.0], [2.0, 1.0, 0.0]])}
  loss, metrics = dqn.td_loss(_linear_q, online, target, _batch(), gamma=0.9, double_dqn=double, loss="mse")
  # Sample 0: Q(s,a=0) = 1; s' = [0, 1]: target Q = [2, 1, 0]; online Q = [3, -1, 0.5].
  next_value = 2.0 if not double else 2.0  # both pick action 0 here
  y0 = 1.0 + 0.9 * next_value
  # Sample 1: Q(s,a=1) = -1; terminal (discount 0): y = -1.
  expected = ((1.0 - y0) ** 2 + (-1.0 - (-1.0)) ** 2) / 2  # Dopamine's mse_loss: err**2, not halved
  np.testing.assert_allclose(loss, expected, rtol=1e-6)
  np.testing.assert_allclose(metrics["q_mean"], 0.0, atol=1e-6)


def test_double_dqn_uses_the_online_argmax():
  online = {"w": jnp.array([[0.0, 5.0], [0.0, 5.0]])}    # online prefers action 1 everywhere
  target = {"w": jnp.array([[3.0, 1.0], [3.0, 1.0]])}    # target prefers action 0
  batch = SimpleNamespace(obs=jnp.array([[1.0, 0.0]]), action=jnp.array([0]), reward=jnp.array([0.0]),
                          discount=jnp.array([1.0]), next_obs=jnp.array([[1.0, 0.0]]))
  _, plain = dqn.td_loss(_linear_q, online, target, batch, gamma=1.0, double_dqn=False, loss="mse")
  _, double = dqn.td_loss(_linear_q, online, target, batch, gamma=1.0, double_dqn=True, loss="mse")
  np.testing.assert_allclose(plain["td_abs_error"], 3.0)   # |0 - (0 + max target)| = 3
  np.testing.assert_allclose(double["td_abs_error"], 1.0)  # |0 - target[argmax online]| = 1


def _reward_only_batch(rewards):
  """Terminal transitions (discount 0) with a zero network: the TD error is exactly -reward."""
  n = len(rewards)
  return SimpleNamespace(obs=jnp.ones((n, 2)), action=jnp.zeros(n, jnp.int32), reward=jnp.asarray(rewards),
                         discount=jnp.zeros(n), next_obs=jnp.ones((n, 2)))


def test_mse_is_dopamines_unhalved_squared_error():
  zeros = {"w": jnp.zeros((2, 2))}
  loss, metrics = dqn.td_loss(_linear_q, zeros, zeros, _reward_only_batch([0.5, 3.0]), gamma=0.99, loss="mse")
  # errors -0.5 and -3: mean(err**2) = (0.25 + 9) / 2 = 4.625 (dopamine/jax/losses.py mse_loss), not 2.3125.
  # Every intermediate is exact in float32; 4 ulps of slack.
  np.testing.assert_allclose(loss, 4.625, rtol=4 * 2.0 ** -23)
  assert float(metrics["td_loss"]) == float(loss)  # no auxiliary loss: the loss is the TD loss


def test_weighted_batches_average_over_the_weighted_rows():
  """The frame replay marks a row it could not fill with a valid transition weight 0."""
  zeros = {"w": jnp.zeros((2, 2))}
  plain = _reward_only_batch([0.5, 3.0])
  weighted = SimpleNamespace(**vars(plain), weight=jnp.array([1.0, 0.0]))
  loss, metrics = dqn.td_loss(_linear_q, zeros, zeros, weighted, gamma=0.99)
  assert float(loss) == 0.25 and float(metrics["td_abs_error"]) == 0.5  # row 0 only: (-0.5)**2, exact
  none, _ = dqn.td_loss(_linear_q, zeros, zeros, SimpleNamespace(**vars(plain), weight=jnp.zeros(2)), gamma=0.99)
  assert float(none) == 0.0  # no valid row: no loss, no gradient (not 0/0)


def test_td_loss_default_is_dopamines_mse():
  zeros = {"w": jnp.zeros((2, 2))}
  batch = _reward_only_batch([0.5, 3.0])
  default, _ = dqn.td_loss(_linear_q, zeros, zeros, batch, gamma=0.99)
  mse, _ = dqn.td_loss(_linear_q, zeros, zeros, batch, gamma=0.99, loss="mse")
  assert float(default) == float(mse)  # the same code path (JaxDQNAgent's loss_type='mse')


def test_huber_is_quadratic_then_linear():
  online, target = {"w": jnp.zeros((2, 2))}, {"w": jnp.zeros((2, 2))}
  batch = SimpleNamespace(obs=jnp.ones((2, 2)), action=jnp.array([0, 0]), reward=jnp.array([0.5, 3.0]),
                          discount=jnp.zeros(2), next_obs=jnp.ones((2, 2)))
  loss, _ = dqn.td_loss(_linear_q, online, target, batch, gamma=0.99, loss="huber")
  np.testing.assert_allclose(loss, (0.5 * 0.5 ** 2 + (3.0 - 0.5)) / 2, rtol=1e-6)


def test_routing_metrics_log_each_expert_load_and_the_balance():
  load = jnp.array([0.7, 0.1, 0.1, 0.1])
  q_fn = lambda params, obs: (obs @ params["w"], {"expert_load": load, "router_entropy": jnp.asarray(0.5)})
  zeros = {"w": jnp.zeros((2, 2))}
  _, metrics = dqn.td_loss(q_fn, zeros, zeros, _reward_only_batch([1.0]), gamma=0.99)
  # The old metric, mean(load), was 1/n whatever the routing did.
  assert [float(metrics[f"moe/expert_load/{i}"]) for i in range(4)] == [float(x) for x in load]
  assert "moe/expert_load" not in metrics and float(metrics["moe/router_entropy"]) == 0.5
  entropy = -(0.7 * np.log(0.7) + 3 * 0.1 * np.log(0.1)) / np.log(4)
  np.testing.assert_allclose(metrics["moe/expert_load_entropy"], entropy, rtol=1e-5)  # a few float32 ulps of 4 logs
  np.testing.assert_allclose(metrics["moe/expert_load_max_share"], 2.8, rtol=1e-6)


@pytest.mark.parametrize("head", ["softmoe", "top1"])
def test_moe_networks_log_per_expert_loads(head):
  net = QNetwork(num_actions=6, head=head, num_experts=4, expert_hidden=8)
  obs = jax.random.bernoulli(jax.random.key(0), 0.3, (8, 10, 10, 4)).astype(jnp.float32)
  params = net.init(jax.random.key(1), obs)["params"]
  q_fn = lambda p, o: net.apply({"params": p}, o)
  batch = SimpleNamespace(obs=obs, action=jnp.zeros(8, jnp.int32), reward=jnp.ones(8), discount=jnp.ones(8),
                          next_obs=obs)
  _, metrics = jax.jit(lambda p: dqn.td_loss(q_fn, p, p, batch, gamma=0.99))(params)
  loads = np.array([metrics[f"moe/expert_load/{i}"] for i in range(4)])
  assert np.all(loads >= 0)
  np.testing.assert_allclose(loads.sum(), 1.0, atol=100 * 2.0 ** -23)  # shares of 100 tokens' weight, float32 sums
  assert 0.0 <= float(metrics["moe/expert_load_entropy"]) <= 1.0 + 1e-6
  assert 1.0 - 1e-6 <= float(metrics["moe/expert_load_max_share"]) <= 4.0 + 1e-6


def test_log_routing_off_drops_the_statistics_but_keeps_the_auxiliary_losses():
  stats = {"expert_load": jnp.array([0.5, 0.5]), "combine_entropy": jnp.asarray(0.9),
           "importance_loss": jnp.asarray(0.25)}
  q_fn = lambda params, obs: (obs @ params["w"], stats)
  zeros = {"w": jnp.zeros((2, 2))}
  batch = _reward_only_batch([1.0])
  loss_on, on = dqn.td_loss(q_fn, zeros, zeros, batch, gamma=0.99, aux_weights={"importance_loss": 2.0})
  loss_off, off = dqn.td_loss(q_fn, zeros, zeros, batch, gamma=0.99, aux_weights={"importance_loss": 2.0},
                              log_routing=False)
  assert float(loss_on) == float(loss_off)  # the loss itself does not change
  assert "moe/combine_entropy" in on and "moe/expert_load/0" in on
  assert not any(k.startswith("moe/") for k in off if k != "moe/importance_loss")
  assert float(off["moe/importance_loss"]) == 0.25 and float(off["aux_loss"]) == 0.5


def test_soft_moe_agent_logs_routing_from_its_acting_passes():
  config = _tiny(**{"network.head": "softmoe", "network.num_experts": 2})
  task = make_task(config, task_context(config))
  state = jax.jit(make_init_fn(task.init_params, optax.adam(1e-3), task.init_extra, task.init_data))(
      jax.random.key(0))
  _, batch, collected = jax.jit(task.collect)(state, jax.random.key(1))
  _, from_loss = jax.jit(task.loss_fn)(state.params, batch, None, state.extra)
  assert not any(k.startswith("moe/") for k in from_loss)  # not recomputed over the replay batch
  loads = [float(collected[f"moe/expert_load/{i}"]) for i in range(2)]
  np.testing.assert_allclose(sum(loads), 1.0, atol=1e-5)  # two shares of 100 tokens' combine weight
  assert 0.0 < float(collected["moe/dispatch_entropy"]) <= 1.0 + 1e-6


def _top1_task_and_batch(**overrides):
  config = _tiny(**{"network.head": "top1", "network.num_experts": 4, **overrides})
  task = make_task(config, task_context(config))
  params = task.init_params(jax.random.key(0))
  obs = jax.random.bernoulli(jax.random.key(1), 0.3, (32, 10, 10, 4))
  batch = SimpleNamespace(obs=obs, action=jnp.arange(32, dtype=jnp.int32) % 6, reward=jnp.ones(32),
                          discount=jnp.ones(32), next_obs=jnp.roll(obs, 1, axis=0))
  return task, params, batch


@pytest.mark.parametrize("key,name", [("importance_weight", "importance_loss"),
                                      ("load_balancing_weight", "load_balancing_loss")])
def test_top1_auxiliary_loss_weight_adds_weight_times_aux(key, name):
  off_task, params, batch = _top1_task_and_batch()
  on_task, _, _ = _top1_task_and_batch(**{f"network.{key}": 0.5})
  off, m_off = jax.jit(lambda p: off_task.loss_fn(p, batch, None, p))(params)
  on, m_on = jax.jit(lambda p: on_task.loss_fn(p, batch, None, p))(params)
  aux = float(m_on[f"moe/{name}"])
  assert aux > 0 and float(m_off["aux_loss"]) == 0.0
  np.testing.assert_allclose(float(m_on["aux_loss"]), 0.5 * aux, rtol=2 * 2.0 ** -23)  # one float32 product
  # Same params and batch, but two programs (XLA may fuse the TD part differently): a 32-sample
  # mean of squared errors of the Q network's outputs, within rounding.
  np.testing.assert_allclose(float(m_on["td_loss"]), float(m_off["td_loss"]), rtol=ops_rtol(2 * 400 + 32))
  # on = td + 0.5 aux: one float32 addition of two positive terms; allow 4 ulps of the sum.
  np.testing.assert_allclose(float(on) - float(off), 0.5 * aux, atol=4 * 2.0 ** -23 * float(on))
  grads = lambda task: jax.grad(lambda p: task.loss_fn(p, batch, None, p)[0])(params)
  router = lambda g: g["Top1MoE_0"]["router"]["kernel"]
  assert not np.allclose(router(grads(on_task)), router(grads(off_task)))  # the aux loss trains the router


def test_linear_epsilon_is_dopamines_schedule():
  eps = lambda f: float(dqn.linear_epsilon(jnp.asarray(f), decay_frames=1000, warmup_frames=200, end=0.01))
  assert eps(0) == 1.0 and eps(200) == 1.0
  np.testing.assert_allclose(eps(700), 0.01 + 0.99 * 0.5, rtol=1e-6)
  assert eps(1200) == pytest.approx(0.01) and eps(10_000) == pytest.approx(0.01)


def test_epsilon_greedy_extremes():
  q = jnp.array([[0.0, 1.0, 0.0]] * 2000)
  greedy = dqn.epsilon_greedy(q, jax.random.key(0), jnp.asarray(0.0))
  assert np.all(np.asarray(greedy) == 1)
  random = np.asarray(dqn.epsilon_greedy(q, jax.random.key(1), jnp.asarray(1.0)))
  assert set(np.unique(random)) == {0, 1, 2} and abs(np.mean(random == 1) - 1 / 3) < 0.05


# --- the task through the trainer ---------------------------------------------------------------

def _tiny(**overrides):
  return with_overrides(dqn_minatar.get_config("tiny"), **overrides)


@pytest.mark.parametrize("num_envs", [1, 2, 4])
def test_num_envs_does_not_change_the_update_to_data_ratio(num_envs):
  config = _tiny(**{"env.num_envs": num_envs})
  task = make_task(config, task_context(config))
  assert task.throughput == {"frames": 4}  # update_period 4: 1/4 updates per frame, Dopamine's


def test_two_envs_act_update_period_frames_per_update(tmp_path):
  result = train(_tiny(**{"env.num_envs": 2}), str(tmp_path), devices=jax.devices()[:1], progress=False)
  # Vector steps taken: prefill ceil(64 / 2) + 1 = 33, then 4 frames / 2 envs = 2 per update.
  assert int(result.state.data_state.replay.current_index) == 33 + 2 * result.summary["steps"]
  assert read_metrics(str(tmp_path))[-1]["frames"] == 33 * 2 + 4 * result.summary["steps"]


def _evaluate(config, params_seed=0, rng=jax.random.key(7)):
  task = make_task(config, task_context(config))
  params = task.init_params(jax.random.key(params_seed))
  return task, params, jax.jit(lambda p, k: task.evaluate(SimpleNamespace(params=p), k))(params, rng)


@pytest.mark.slow  # a whole Freeway episode at the default cap: ~25 s (make test-slow)
def test_freeway_evaluation_at_the_default_cap_is_finite():
  """Freeway episodes are always 2500 steps: the old 2000-step window saw none (NaN)."""
  config = _tiny(**{"env.name": "freeway", "dqn.eval_envs": 2,
                    "dqn.eval_steps": dqn_minatar.get_config().dqn.eval_steps})
  _, _, out = _evaluate(config)
  assert np.isfinite(out["eval_return"]) and int(out["eval_episodes"]) == 2
  assert int(out["eval_steps_run"]) == 2500 and int(out["eval_capped"]) == 0


def test_evaluation_is_the_mean_of_one_full_episode_per_env():
  config = _tiny(**{"dqn.eval_envs": 4, "dqn.eval_steps": 5000})
  task, params, out = _evaluate(config)
  # Reference: the same keys, stepped one at a time; each env's FIRST finished episode only.
  env, d = make_env("breakout"), config.dqn
  net = QNetwork(num_actions=6, **dict(config.network))  # a network config is QNetwork's kwargs
  k_reset, k_run = jax.random.split(jax.random.key(7))
  state, obs = env.reset(k_reset, 4)

  @jax.jit
  def one(state, obs, t):
    k_act, k_env = jax.random.split(jax.random.fold_in(k_run, t))
    q = net.apply({"params": params}, obs.astype(jnp.float32))[0]
    state, obs, _, done, _ = env.step(state, dqn.epsilon_greedy(q, k_act, d.eval_epsilon), k_env)
    return state, obs, done

  first = {}
  t = 0
  while len(first) < 4:
    state, obs, done = one(state, obs, t)
    t += 1
    for i in np.flatnonzero(np.asarray(done)):
      first.setdefault(int(i), float(state.stats.last_return[i]))
  assert int(out["eval_episodes"]) == 4 and int(out["eval_capped"]) == 0 and int(out["eval_steps_run"]) == t
  # Returns are small integers: the float32 sum is exact, then one division.
  np.testing.assert_allclose(float(out["eval_return"]), np.mean(list(first.values())), rtol=2 * 2.0 ** -23)


def test_evaluation_reports_the_cap():
  _, _, out = _evaluate(_tiny(**{"dqn.eval_envs": 4, "dqn.eval_steps": 3}))  # no Breakout episode ends in 3 steps
  assert int(out["eval_steps_run"]) == 3 and int(out["eval_capped"]) == 1 and int(out["eval_episodes"]) == 0
  assert np.isnan(out["eval_return"])


@pytest.mark.parametrize("overrides,match", [
    ({"env.name": "pong"}, "unknown MinAtar environment 'pong'"),
    ({"dqn.replay_capacity": 16}, "batch_size=32 is larger than the replay"),
    ({"network.tokenizer": "per_pixel"}, "tokenizer='per_pixel'"),
    ({"network.num_experts": 0}, "num_experts"),
    ({"dqn.target_update_period": 6}, "target_update_period=6 frames must be a multiple of the 4 frames"),
    ({"env.num_envs": 0}, "env.num_envs=0"),
])
def test_bad_rl_input_is_one_clear_line(tmp_path, overrides, match):
  with pytest.raises(InputError, match=match):
    train(_tiny(**overrides), str(tmp_path), devices=jax.devices()[:1], progress=False)
