"""Deep RL with Soft-MoE value networks (Obando-Ceron et al., ICML 2024): networks, environments, replay, DQN.

``QNetwork`` (MinAtar and Atari value networks with a dense, Soft-MoE or Top-1 MoE head), the
jitted DQN pieces (``td_loss``, ``epsilon_greedy``, ``linear_epsilon``, ``periodic_sync``), Rainbow's
distributional target and n-step returns (``c51_target``, ``c51_loss``, ``n_step_returns``), gymnax
environments (``make_env``: MinAtar as Dopamine runs it, any gymnax id, or your own in ``ENVS``) and
replay (``make_replay``, flashbax), Atari 2600 games
(``make_atari``, envpool or ale-py: ``ATARI_BACKENDS``) and their frame-stacking replay (``make_frame_replay``). Environments
and replays need the ``rl`` / ``atari`` extras (``pip install 'jaxlab[rl,atari]'``) and are
imported on first use, so the networks and the loss work without them; without the extra, the
first use is one line naming it (:func:`jaxlab.registry.optional_imports`). Flax NNX modules of the
Q-network and its parts, same names and parameter layout, are in ``jaxlab.rl.nnx`` (imported on first use).
"""

import importlib as _importlib

from jaxlab.registry import optional_imports as _optional_imports
from jaxlab.rl.distributional import (c51_loss, c51_support, c51_target, expected_q, n_step_returns,
                                     project_distribution)
from jaxlab.rl.dqn import epsilon_greedy, linear_epsilon, periodic_sync, td_loss
from jaxlab.rl.impala_encoder import ImpalaEncoder
from jaxlab.rl.networks import HEADS, QNetwork, count_params, param_count
from jaxlab.rl.rainbow_layers import NoisyDense, RainbowHead, dueling_logits

# name -> submodule; these import gymnax / flashbax / envpool / ale-py (the rl / atari extras), so only when first used.
_LAZY = {"ENV_IDS": "envs", "ENVS": "envs", "GymnaxEnv": "envs", "MinAtarEnv": "envs", "VecEnvState": "envs", "make_env": "envs",
         "TimeStep": "replay", "Transition": "replay", "TransitionReplay": "replay", "make_replay": "replay",
         "n_step_transitions": "replay",
         "ATARI_BACKENDS": "atari", "AtariEnv": "atari", "AtariStep": "atari", "available_games": "atari",
         "make_atari": "atari",
         "FrameReplay": "replay_frames", "FrameStep": "replay_frames", "StackedTransition": "replay_frames",
         "make_frame_replay": "replay_frames"}
_SUBMODULES = ("nnx",)  # flax.nnx only for who uses it

__all__ = ["HEADS", "ImpalaEncoder", "NoisyDense", "QNetwork", "RainbowHead", "c51_loss", "c51_support",
           "c51_target", "count_params", "dueling_logits", "epsilon_greedy", "expected_q", "linear_epsilon", "n_step_returns",
           "param_count", "periodic_sync", "project_distribution", "td_loss", *sorted(_LAZY), *_SUBMODULES]


def __getattr__(name: str) -> object:
  if name in _LAZY:
    with _optional_imports(f"jaxlab.rl.{name}"):  # gymnax / flashbax missing: one line naming the extra
      return getattr(_importlib.import_module(f"jaxlab.rl.{_LAZY[name]}"), name)
  if name in _SUBMODULES:
    return _importlib.import_module(f"jaxlab.rl.{name}")
  raise AttributeError(f"module 'jaxlab.rl' has no attribute {name!r}")


def __dir__() -> list[str]:  # the public names, the lazy ones included; no helper names
  return sorted(__all__)
