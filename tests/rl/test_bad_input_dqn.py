"""Bad input to the dqn_minatar task and the TD loss: each case ends in ONE line naming the bad value.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. The checks run when
the task is built, before anything is initialised or compiled, so every case takes milliseconds.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from configs import dqn_minatar as dqn_config  # noqa: E402
from jaxlab.rl import dqn  # noqa: E402
from jaxlab.experiment import task_context  # noqa: E402
from jaxlab.tasks import make_task  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]


def _task(**overrides: Any) -> Callable[[], Any]:
  def build():
    # Not type-safe: a config file may set any value; the task's own checks must catch it.
    c = ml_collections.ConfigDict(dqn_config.get_config("tiny").to_dict(), type_safe=False)
    for key, value in overrides.items():
      node = c
      *parents, leaf = key.split(".")
      for p in parents:
        node = node[p]
      with node.unlocked():
        node[leaf] = value
    return make_task(c, task_context(c))
  return build


def _td_loss(action: Any = None, gamma: Any = 0.99, double_dqn: Any = False, **aux_weights: float
             ) -> Callable[[], Any]:
  zeros = {"w": jnp.zeros((2, 2))}  # 2 actions
  action = jnp.zeros(1, jnp.int32) if action is None else action
  batch = SimpleNamespace(obs=jnp.ones((1, 2)), action=action, reward=jnp.ones(1),
                          discount=jnp.ones(1), next_obs=jnp.ones((1, 2)))
  return lambda: dqn.td_loss(lambda p, o: (o @ p["w"], {}), zeros, zeros, batch, gamma=gamma,
                             double_dqn=double_dqn, aux_weights=aux_weights)


NAN = float("nan")
# (key, bad value, fragment): every numeric / flag / name key of env.* and dqn.* the task reads.
KEY_CASES = [
    ("dqn.gamma", 1.5, "dqn.gamma=1.5; must be a number in [0, 1] (the discount factor"),
    ("dqn.gamma", -0.1, "dqn.gamma=-0.1; must be a number in [0, 1]"),
    ("dqn.gamma", NAN, "dqn.gamma=nan; must be a number in [0, 1]"),
    ("dqn.gamma", "0.99", "dqn.gamma='0.99'; must be a number in [0, 1]"),
    ("dqn.epsilon_end", 1.5, "dqn.epsilon_end=1.5; must be a number in [0, 1]"),
    ("dqn.epsilon_end", -0.01, "dqn.epsilon_end=-0.01; must be a number in [0, 1]"),
    ("dqn.epsilon_end", NAN, "dqn.epsilon_end=nan; must be a number in [0, 1]"),
    ("dqn.epsilon_decay_frames", 0,
     "dqn.epsilon_decay_frames=0 frames (1 = straight to dqn.epsilon_end); must be an int >= 1"),
    ("dqn.epsilon_decay_frames", -400, "dqn.epsilon_decay_frames=-400 frames"),
    ("dqn.epsilon_decay_frames", 2.5, "dqn.epsilon_decay_frames=2.5 frames"),
    ("dqn.epsilon_decay_frames", 2**40,
     "dqn.epsilon_decay_frames=1099511627776 frames (1 = straight to dqn.epsilon_end); must be < 2**31"),
    ("dqn.eval_epsilon", 1.5, "dqn.eval_epsilon=1.5; must be a number in [0, 1] (the exploration rate of evaluation)"),
    ("dqn.eval_epsilon", -0.001, "dqn.eval_epsilon=-0.001; must be a number in [0, 1]"),
    ("dqn.eval_epsilon", NAN, "dqn.eval_epsilon=nan; must be a number in [0, 1]"),
    ("dqn.eval_steps", True, "dqn.eval_steps=True; must be an int >= 0"),
    ("dqn.eval_steps", 2**40, "dqn.eval_steps=1099511627776; must be < 2**31"),
    ("dqn.eval_envs", True, "dqn.eval_envs=True; must be an int >= 1"),
    ("dqn.eval_envs", 0, "dqn.eval_envs=0; must be an int >= 1"),
    ("dqn.target_update_period", -4, "dqn.target_update_period=-4 frames; must be an int >= 1"),
    ("dqn.target_update_period", 0, "dqn.target_update_period=0 frames; must be an int >= 1"),
    ("dqn.target_update_period", 16.0, "dqn.target_update_period=16.0 frames; must be an int >= 1"),
    ("dqn.target_update_period", "16", "dqn.target_update_period='16' frames; must be an int >= 1"),
    ("dqn.min_replay_history", 0, "dqn.min_replay_history=0 frames of random play; must be an int >= 1"),
    ("dqn.min_replay_history", 64.0, "dqn.min_replay_history=64.0 frames of random play; must be an int >= 1"),
    ("dqn.min_replay_history", 600, "dqn.min_replay_history=600 is more than the replay can hold: 511 transitions "
     "(dqn.replay_capacity=512, env.num_envs=1)"),
    ("dqn.replay_capacity", 0, "dqn.replay_capacity=0 transitions; must be an int >= 1"),
    ("dqn.replay_capacity", 512.0, "dqn.replay_capacity=512.0 transitions; must be an int >= 1"),
    ("dqn.replay_capacity", 2**40, "dqn.replay_capacity=1099511627776 transitions; must be < 2**31"),
    ("dqn.replay_capacity", 1, "dqn.replay_capacity=1 with env.num_envs=1 leaves 1 slots per env"),
    ("dqn.update_period", True, "dqn.update_period=True environment frames per update; must be an int >= 1"),
    ("dqn.double_dqn", "yes", "dqn.double_dqn='yes'; must be True or False"),
    ("dqn.loss", "l2", "dqn.loss='l2'; choose one of ('huber', 'mse')"),
    ("env.num_envs", True, "env.num_envs=True; must be an int >= 1"),
    ("env.name", ["breakout"], "unknown MinAtar environment ['breakout'] (env.name); valid: asterix, breakout"),
    ("env.name", "pong", "unknown MinAtar environment 'pong' (env.name)"),
    ("env.sticky_action_prob", 1.0, "env.sticky_action_prob=1.0; must be a number in [0, 1)"),
    ("env.sticky_action_prob", NAN, "env.sticky_action_prob=nan; must be a number in [0, 1)"),
    ("env.sticky_action_prob", "0.1", "env.sticky_action_prob='0.1'; must be a number in [0, 1)"),
    ("batch_size", 1000, "batch_size=1000 is larger than the replay's 511 transitions (dqn.replay_capacity=512, "
     "env.num_envs=1)"),
    ("batch_size", 2.0, "batch_size=2.0; must be an int >= 1"),
    ("num_steps", 2**30, "num_steps=1073741824 updates x dqn.update_period=4 frames (+65 of random play) exceed "
     "2**31 - 1, the int32 frame counter"),
]


CASES: list[Case] = [
    ("dqn task", "negative importance weight", _task(**{"network.head": "top1", "network.importance_weight": -0.1}),
     "network.importance_weight=-0.1; must be a finite number >= 0"),
    ("dqn task", "negative load-balancing weight",
     _task(**{"network.head": "top1", "network.load_balancing_weight": -1.0}),
     "network.load_balancing_weight=-1.0; must be a finite number >= 0"),
    ("dqn task", "NaN auxiliary weight", _task(**{"network.head": "top1", "network.importance_weight": float("nan")}),
     "network.importance_weight=nan; must be a finite number >= 0"),
    ("dqn task", "auxiliary weight on a Soft-MoE head", _task(**{"network.importance_weight": 1.0}),
     "network.importance_weight=1.0 but network.head='softmoe'; only head='top1'"),
    ("dqn task", "update ratio 0 (update_period 0)", _task(**{"dqn.update_period": 0}),
     "dqn.update_period=0 environment frames per update; must be an int >= 1"),
    ("dqn task", "update ratio < 0 (update_period -4)", _task(**{"dqn.update_period": -4}),
     "dqn.update_period=-4 environment frames per update; must be an int >= 1"),
    ("dqn task", "num_envs that cannot hold the ratio", _task(**{"env.num_envs": 8}),
     "env.num_envs=8 does not divide dqn.update_period=4"),
    ("dqn task", "num_envs 3 with update_period 4", _task(**{"env.num_envs": 3}),
     "allowed env.num_envs: [1, 2, 4]"),
    ("dqn task", "evaluation cap below a Freeway episode", _task(**{"env.name": "freeway", "dqn.eval_steps": 2000}),
     "dqn.eval_steps=2000 is shorter than one freeway episode (2500 steps); allowed: 0 (no evaluation) or >= 2500"),
    ("dqn task", "negative evaluation cap", _task(**{"dqn.eval_steps": -1}), "dqn.eval_steps=-1; must be an int >= 0"),
    ("dqn task", "fractional update period", _task(**{"dqn.update_period": 2.5}),
     "dqn.update_period=2.5 environment frames per update; must be an int >= 1"),
    ("dqn task", "clip_rewards not a bool", _task(**{"dqn.clip_rewards": "yes"}),
     "dqn.clip_rewards='yes'; must be True or False"),
    *[("dqn task", f"{key}={value!r}", _task(**{key: value}), fragment) for key, value, fragment in KEY_CASES],
    ("td_loss", "NaN gamma", _td_loss(gamma=NAN), "gamma=nan; must be a number in [0, 1] (the discount factor)"),
    ("td_loss", "gamma > 1", _td_loss(gamma=1.01), "gamma=1.01; must be a number in [0, 1]"),
    ("td_loss", "double_dqn not a bool", _td_loss(double_dqn="no"), "double_dqn='no'; must be True or False"),
    ("td_loss", "float actions", _td_loss(action=jnp.zeros(1)),
     "batch.action of dtype float32; must be an integer dtype"),
    ("td_loss", "actions of shape [B, 1]", _td_loss(action=jnp.zeros((1, 1), jnp.int32)),
     "batch.action of shape (1, 1); must be [1], one per transition"),
    ("td_loss", "concrete action = num_actions", _td_loss(action=jnp.array([2])),
     "batch.action in [2, 2]; must be in [0, 2)"),
    ("td_loss", "concrete negative action", _td_loss(action=jnp.array([-1])),
     "batch.action in [-1, -1]; must be in [0, 2)"),
    ("td_loss", "concrete action closed over by jit", lambda: jax.jit(_td_loss(action=jnp.array([5])))(),
     "batch.action in [5, 5]; must be in [0, 2)"),
    ("epsilon schedule", "decay over 0 frames", lambda: dqn.linear_epsilon(jnp.zeros((), jnp.int32), 0, 10, 0.01),
     "epsilon decay_frames=0; must be an int >= 1"),
    ("epsilon schedule", "end > 1", lambda: dqn.linear_epsilon(jnp.zeros((), jnp.int32), 100, 10, 1.5),
     "epsilon end=1.5; must be a number in [0, 1]"),
    ("epsilon schedule", "negative warm-up", lambda: dqn.linear_epsilon(jnp.zeros((), jnp.int32), 100, -1, 0.01),
     "epsilon warmup_frames=-1; must be an int >= 0"),
    ("epsilon-greedy", "NaN epsilon", lambda: dqn.epsilon_greedy(jnp.zeros((2, 3)), jax.random.key(0), NAN),
     "epsilon=nan; must be a number in [0, 1]"),
    ("epsilon-greedy", "q_values of one state", lambda: dqn.epsilon_greedy(jnp.zeros(3), jax.random.key(0), 0.1),
     "q_values of shape (3,); must be [N, num_actions]"),
    ("target sync", "period True", lambda: dqn.periodic_sync(True), "target update period=True; must be an int >= 1"),
    ("dqn task", "zero atoms", _task(**{"network.num_atoms": 0}), "QNetwork.num_atoms=0; must be an int >= 1"),
    ("dqn task", "fractional atoms", _task(**{"network.num_atoms": 2.5}), "QNetwork.num_atoms=2.5; must be an int"),
    ("dqn task", "dueling not a bool", _task(**{"network.dueling": "yes"}),
     "QNetwork.dueling='yes'; must be True or False"),
    ("dqn task", "noisy not a bool", _task(**{"network.noisy": 1}), "QNetwork.noisy=1; must be True or False"),
    ("dqn task", "negative vmax", _task(**{"network.num_atoms": 51, "dqn.vmax": -1.0}),
     "dqn.vmax=-1.0; must be a finite number > 0"),
    ("dqn task", "vmin above vmax", _task(**{"network.num_atoms": 51, "dqn.vmin": 20.0}),
     "dqn.vmin=20.0; must be None (= -dqn.vmax) or a finite number below dqn.vmax=10.0"),
    ("dqn task", "router diagnostics without Adam", _task(**{"network.router_diagnostics": True,
                                                            "optimizer.name": "sgd"}),
     "network.router_diagnostics=True with optimizer.name='sgd'; the router diagnostics read Adam's second moments"),
    ("dqn task", "unknown replay scheme", _task(**{"dqn.replay_scheme": "rank"}),
     "dqn.replay_scheme='rank'; choose one of ('uniform', 'prioritized')"),
    ("dqn task", "zero update horizon", _task(**{"dqn.update_horizon": 0}),
     "dqn.update_horizon=0; must be an int in [1, 1000]"),
    ("dqn task", "horizon longer than the replay's rows", _task(**{"dqn.update_horizon": 600}),
     "dqn.replay_capacity=512 with env.num_envs=1 leaves 512 slots per env; a transition needs 601"),
    ("dqn task", "horizon that leaves fewer transitions than a batch", _task(**{"dqn.update_horizon": 500}),
     "dqn.update_horizon=500 leaves the replay 12 500-step transitions (dqn.replay_capacity=512, env.num_envs=1), "
     "fewer than batch_size=32; lower dqn.update_horizon or raise dqn.replay_capacity"),
    ("dqn task", "horizon that every episode's time limit cuts",
     _task(**{"env.max_episode_steps": 3, "dqn.update_horizon": 3}),
     "dqn.update_horizon=3 with env.max_episode_steps=3: every episode is truncated within 3 steps"),
    ("dqn task", "horizon beyond a gymnax environment's own time limit",
     _task(**{"env.name": "CartPole-v1", "dqn.update_horizon": 500}),
     "dqn.update_horizon=500 with CartPole-v1's own time limit=500: every episode is truncated within 500 steps"),
    ("dqn task", "huber loss under C51", _task(**{"network.num_atoms": 51, "dqn.loss": "huber"}),
     "dqn.loss='huber' has no effect under C51 (network.num_atoms=51: the loss is the cross-entropy"),
    ("dqn task", "a C51 support no clipped reward fits in", _task(**{"network.num_atoms": 51, "dqn.vmax": 1e-6}),
     "dqn.vmax=1e-06 with dqn.clip_rewards=True: one clipped reward (1) already leaves the support"),
    ("td_loss", "a support with scalar Q-values", lambda: dqn.td_loss(
        lambda p, o: (o @ p["w"], {}), {"w": jnp.zeros((2, 2))}, {"w": jnp.zeros((2, 2))},
        SimpleNamespace(obs=jnp.ones((1, 2)), action=jnp.zeros(1, jnp.int32), reward=jnp.ones(1),
                        discount=jnp.ones(1), next_obs=jnp.ones((1, 2))), gamma=0.99, support=jnp.linspace(-1, 1, 5)),
     "the network's output of shape (1, 2); a support of 5 atoms needs logits [batch, num_actions, num_atoms]"),
    ("td_loss", "negative auxiliary weight", _td_loss(importance_loss=-1.0),
     "importance_loss weight=-1.0; must be a finite number >= 0"),
    ("td_loss", "unknown auxiliary loss", _td_loss(entropy_loss=1.0), "auxiliary loss 'entropy_loss'; choose among"),
    ("td_loss", "weight on a network without auxiliary losses", _td_loss(importance_loss=1.0),
     "importance_loss weight=1.0 but the network returns no 'importance_loss'"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
