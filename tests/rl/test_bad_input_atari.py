"""Bad input to the Atari task, its envpool (and ale-py) pool and its frame replay: each case ends in ONE clear line.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Every config case
fails while the task is built, before anything is initialised or compiled.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from configs import dqn_atari  # noqa: E402
from jaxlab.rl.atari import make_atari  # noqa: E402
from jaxlab.rl.replay_frames import make_frame_replay  # noqa: E402
from jaxlab.experiment import task_context  # noqa: E402
from jaxlab.tasks import make_task  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402
from tests.support.configs import with_overrides  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]


def _task(**overrides: Any) -> Callable[[], Any]:
  def run():
    c = with_overrides(dqn_atari.get_config("tiny"), **overrides)
    return make_task(c, task_context(c))
  return run


def _without_rom(game: str) -> Callable[[], Any]:
  """The task for ``game`` while envpool's asset folder (as its registry names it) has no ROMs."""
  def run():
    from envpool.registration import registry
    module, cls, kwargs = registry.specs[f"{game}-v5"]
    registry.specs[f"{game}-v5"] = (module, cls, dict(kwargs, base_path=os.path.join(os.sep, "nonexistent")))
    try:
      return _task(**{"env.name": game})()
    finally:
      registry.specs[f"{game}-v5"] = (module, cls, kwargs)
  return run


@functools.cache
def _pong() -> Any:
  return make_atari("Pong", num_envs=2)


CASES: list[Case] = [
    ("atari task", "a million evaluation games", _task(**{"dqn.eval_episodes": 10**6}),
     "dqn.eval_episodes=1000000; must be an int in [0, 1000]"),
    ("atari task", "zero epsilon without noisy nets", _task(**{"dqn.epsilon_schedule": "zero"}),
     "dqn.epsilon_schedule='zero' with network.noisy=False: the agent would never explore"),
    ("atari task", "horizon that every truncated episode cuts",
     _task(**{"dqn.update_horizon": 25, "env.time_limit_is_terminal": False}),
     "dqn.update_horizon=25 with env.max_episode_steps=25 and env.time_limit_is_terminal=False"),
    ("atari task", "prioritised replay smaller than a batch",
     _task(**{"dqn.replay_scheme": "prioritized", "dqn.replay_capacity": 20, "dqn.min_replay_history": 8}),
     "batch_size=32 is larger than the prioritised replay's 12 1-step transitions (dqn.replay_capacity=20"),
    ("atari task", "no-op starts with vmapped runs", _task(**{"env.num_envs": 1, "env.max_noops": 30, "runs.seeds": 2}),
     "env.max_noops=30 needs one run per program (got runs.seeds=2): the vmapped runs' emulators step together"),
    ("atari task", "huber loss under C51", _task(**{"network.num_atoms": 51, "dqn.loss": "huber"}),
     "dqn.loss='huber' has no effect under C51"),
    ("atari task", "a C51 support no clipped reward fits in", _task(**{"network.num_atoms": 51, "dqn.vmax": 1e-6}),
     "dqn.vmax=1e-06 with dqn.clip_rewards=True"),
    ("atari task", "unknown game", _task(**{"env.name": "Zork"}),
     "unknown Atari game 'Zork' (env.name); envpool has"),
    ("atari task", "MinAtar-style lower-case name", _task(**{"env.name": "space_invaders"}),
     "unknown Atari game 'space_invaders' (env.name); did you mean 'SpaceInvaders'?"),
    ("atari task", "no ROM file", _without_rom("Breakout"),
     "no ROM for Atari game 'Breakout' (env.name) in envpool's assets"),
    ("atari task", "sticky prob 1", _task(**{"env.sticky_action_prob": 1.0}),
     "env.sticky_action_prob=1.0; must be a number in [0, 1)"),
    ("atari task", "frame skip 0", _task(**{"env.frame_skip": 0}), "env.frame_skip=0; must be an int in [1, 2**31)"),
    ("atari task", "episode cap 0", _task(**{"env.max_episode_steps": 0}),
     "env.max_episode_steps=0; must be an int in [1, 2**31)"),
    ("atari pool", "episode cap a float", lambda: make_atari("Pong", max_episode_steps=2.5e4),
     "max_episode_steps=25000.0; must be an int in [1, 2**31)"),
    ("atari pool", "full action space 'yes'", lambda: make_atari("Pong", full_action_space="yes"),
     "full_action_space='yes'; must be True or False"),
    ("atari task", "unknown backend", _task(**{"env.backend": "gym"}),
     "env.backend='gym'; choose one of ('ale_py', 'envpool')"),
    ("atari task", "a game ale-py has no ROM for", _task(**{"env.backend": "ale_py", "env.name": "Zork"}),
     "unknown Atari game 'Zork' (env.name); ale_py has"),
    ("atari task", "unknown stepping route", _task(**{"env.step_via": "gpu"}),
     "env.step_via='gpu'; choose one of ('auto', 'xla', 'callback')"),
    ("atari task", "num_envs not dividing the update period", _task(**{"env.num_envs": 3}),
     "env.num_envs=3 does not divide dqn.update_period=4"),
    ("atari task", "MinAtar encoder", _task(**{"network.encoder": "minatar"}),
     "network.encoder='minatar'; Atari frames (84x84x4) take one of ('nature', 'impala')"),
    ("atari task", "router diagnostics", _task(**{"network.router_diagnostics": True}),
     "network.router_diagnostics=True: this task does not log the router diagnostics; leave it False"),
    ("atari task", "target period off the update grid", _task(**{"dqn.target_update_period": 6}),
     "dqn.target_update_period=6 agent steps must be a multiple of the 4 agent steps"),
    ("atari task", "replay too small for stacks", _task(**{"dqn.replay_capacity": 8}),
     "dqn.replay_capacity=8 with env.num_envs=2 leaves 4 slots per env; stacks of 4 frames need >= 5"),
    ("atari task", "epsilon decay 0", _task(**{"dqn.epsilon_decay_period": 0}),
     "dqn.epsilon_decay_period=0 agent steps (1 = straight to dqn.epsilon_end); must be an int >= 1"),
    ("atari pool", "float actions", lambda: _pong().step(jnp.array([0.0, 1.0])),
     "actions of dtype float32; must be integers in [0, 6) (Pong)"),
    ("atari pool", "one action too many", lambda: _pong().step(jnp.array([0, 1, 2])),
     "actions of shape (3,); must be [2], one per environment"),
    ("atari pool", "action = num_actions", lambda: _pong().step(np.array([6, 0])),
     "actions in [0, 6]; must be in [0, 6) (Pong has 6)"),
    ("atari pool", "seeds empty", lambda: make_atari("Pong", seeds=()),
     "seeds=(); must be a non-empty sequence of ints >= 0 (one per run)"),
    ("frame replay", "capacity 0", lambda: make_frame_replay(0, 1, 4), "capacity=0; must be an int >= 1"),
    ("frame replay", "frame shape of 3 sides", lambda: make_frame_replay(64, 1, 4, frame_shape=(84, 84, 1)),
     "frame_shape=(84, 84, 1); must be (height, width), two ints >= 1"),
    ("frame replay", "min_size beyond capacity", lambda: make_frame_replay(64, 2, 4, min_size=100),
     "min_size=100 is more than the replay can hold: 56 transitions"),
    # 2**31 - 1 slots of 7,069 bytes: 15 TB, more than any machine has; refused before anything is allocated
    ("frame replay", "larger than memory", lambda: make_frame_replay(2**31 - 1, 1, 32),
     "capacity=2147483647 (7069 bytes per slot) needs 1.52e+04 GB (15180561900643 bytes), but "),
    ("atari task", "replay larger than memory", _task(**{"dqn.replay_capacity": 2**31 - 2}),
     "dqn.replay_capacity=2147483646 (7069 bytes per slot) needs 1.52e+04 GB"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
