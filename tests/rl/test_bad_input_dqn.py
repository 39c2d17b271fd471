"""Bad input to the dqn_minatar task and the TD loss: each case ends in ONE line naming the bad value.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. The checks run when
the task is built, before anything is initialised or compiled, so every case takes milliseconds.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace
from typing import Any, Callable

import jax.numpy as jnp
import ml_collections
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from configs import dqn_minatar as dqn_config  # noqa: E402
from jaxlab.rl import dqn  # noqa: E402
from jaxlab.tasks.dqn_minatar import dqn_minatar  # noqa: E402
from tests.bad_input import assert_one_clear_line  # noqa: E402

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
    return dqn_minatar(c)
  return build


def _td_loss(**aux_weights: float) -> Callable[[], Any]:
  zeros = {"w": jnp.zeros((2, 2))}
  batch = SimpleNamespace(obs=jnp.ones((1, 2)), action=jnp.zeros(1, jnp.int32), reward=jnp.ones(1),
                          discount=jnp.ones(1), next_obs=jnp.ones((1, 2)))
  return lambda: dqn.td_loss(lambda p, o: (o @ p["w"], {}), zeros, zeros, batch, gamma=0.99,
                             aux_weights=aux_weights)


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
    ("td_loss", "negative auxiliary weight", _td_loss(importance_loss=-1.0),
     "importance_loss weight=-1.0; must be a finite number >= 0"),
    ("td_loss", "unknown auxiliary loss", _td_loss(entropy_loss=1.0), "auxiliary loss 'entropy_loss'; choose among"),
    ("td_loss", "weight on a network without auxiliary losses", _td_loss(importance_loss=1.0),
     "importance_loss weight=1.0 but the network returns no 'importance_loss'"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
