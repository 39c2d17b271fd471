"""Deep RL with Soft-MoE value networks (Obando-Ceron et al., ICML 2024): networks, environments, replay, DQN.

``QNetwork`` (MinAtar value networks with a dense, Soft-MoE or Top-1 MoE head), the jitted DQN
pieces (``td_loss``, ``epsilon_greedy``, ``linear_epsilon``, ``periodic_sync``), MinAtar
environments (``make_env``, gymnax) and replay (``make_replay``, flashbax). The last two need the
``rl`` extra (``pip install jaxlab[rl]``) and are imported on first use, so the networks and the
loss work without it.
"""

from __future__ import annotations

import importlib
from typing import Any

from jaxlab.rl.dqn import epsilon_greedy, linear_epsilon, periodic_sync, td_loss
from jaxlab.rl.networks import HEADS, QNetwork, count_params, param_count

# name -> submodule; these import gymnax / flashbax (the rl extra), so only when first used.
_LAZY = {"ENV_IDS": "envs", "MinAtarEnv": "envs", "VecEnvState": "envs", "make_env": "envs",
         "TimeStep": "replay", "Transition": "replay", "TransitionReplay": "replay", "make_replay": "replay"}

__all__ = ["HEADS", "QNetwork", "count_params", "epsilon_greedy", "linear_epsilon", "param_count",
           "periodic_sync", "td_loss", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
  if name in _LAZY:
    return getattr(importlib.import_module(f"jaxlab.rl.{_LAZY[name]}"), name)
  raise AttributeError(f"module 'jaxlab.rl' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(_LAZY))
