"""What every DQN task reads from its config: the ``dqn.*`` checks and the value network's block.

Shared by the MinAtar and Atari tasks (``jaxlab.tasks.dqn_minatar``, ``jaxlab.tasks.dqn_atari``):
each bad key is one line naming it, before anything is initialised or compiled.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import ml_collections

from jaxlab import errors
from jaxlab.errors import InputError, check
from jaxlab.rl import diagnostics, distributional, dqn
from jaxlab.rl.networks import QNetwork

#: The largest frame count: frame counters (the epsilon schedule's frame, eval steps) are int32 on the device.
MAX_FRAMES = 2**31 - 1
#: Network config key (a ``QNetwork`` attribute) -> the Top-1 MoE auxiliary loss it weights (``dqn.AUX_LOSSES``).
AUX_WEIGHT_KEYS = {"importance_weight": "importance_loss", "load_balancing_weight": "load_balancing_loss"}
#: ``dqn.replay_scheme`` values, as Dopamine's ``JaxFullRainbowAgent`` (full_rainbow_agent.py:353 @ 5873f54).
REPLAY_SCHEMES = ("uniform", "prioritized")


def check_count(key: str, value: Any, low: int, what: str = "") -> None:
  """``config.<key>`` is an int in [low, MAX_FRAMES]; ``what`` says what it counts.

  Args:
    key: the config key, for the message.
    value: its value.
    low: the smallest allowed value.
    what: what the value counts (e.g. " frames"), appended to the value in the message.

  Raises:
    InputError: one line naming the key.
  """
  check(errors.is_int(value) and value >= low, f"{key}={value!r}{what}; must be an int >= {low}")
  check(value <= MAX_FRAMES, f"{key}={value}{what}; must be < 2**31 (counted in int32 on the device)")


def check_dqn_settings(d: ml_collections.ConfigDict, unit: str, decay_key: str, clip_rewards: Any,
                       network: ml_collections.ConfigDict | None = None) -> None:
  """The ``dqn.*`` keys every DQN task reads, one clear line each.

  Args:
    d: the config's ``dqn`` block.
    unit: what the task's counts count ("frames" for MinAtar, "agent steps" for Atari).
    decay_key: the task's epsilon-decay key under ``dqn``.
    clip_rewards: the value of ``dqn.clip_rewards`` the task uses.
    network: the config's ``network`` block, for the keys that only C51 reads (``network.num_atoms`` > 1:
      ``check_c51_settings``); None skips them.

  Raises:
    InputError: the first bad key, one line naming it.
  """
  errors.check_probability(d.gamma, "dqn.gamma", "the discount factor; Dopamine: 0.99")
  check_count("dqn.target_update_period", d.target_update_period, 1, f" {unit}")
  check_count("dqn.min_replay_history", d.min_replay_history, 1, f" {unit} of random play")
  check_count("dqn.replay_capacity", d.replay_capacity, 1, " transitions")
  errors.check_probability(d.epsilon_end, "dqn.epsilon_end", "the exploration rate after the decay")
  check_count(f"dqn.{decay_key}", d[decay_key], 1, f" {unit} (1 = straight to dqn.epsilon_end)")
  errors.check_bool(d.double_dqn, "dqn.double_dqn")
  errors.check_choice(d.loss, "dqn.loss", dqn.LOSSES)
  errors.check_bool(clip_rewards, "dqn.clip_rewards")
  horizon = d.get("update_horizon", 1)
  errors.check_int(horizon, "dqn.update_horizon", 1, "the n of n-step returns; 1 = one-step, Dopamine's Rainbow: 3",
                   maximum=1000)
  scheme = d.get("replay_scheme", "uniform")
  errors.check_choice(scheme, "dqn.replay_scheme", REPLAY_SCHEMES,
                      "prioritized: Schaul et al. 2016 as Dopamine's Rainbow")
  vmax, vmin = d.get("vmax", 10.0), d.get("vmin")
  check(errors.is_real(vmax) and math.isfinite(vmax) and vmax > 0,
        f"dqn.vmax={vmax!r}; must be a finite number > 0 (C51's largest atom; Dopamine: 10)")
  check(vmin is None or (errors.is_real(vmin) and math.isfinite(vmin) and vmin < vmax),
        f"dqn.vmin={vmin!r}; must be None (= -dqn.vmax) or a finite number below dqn.vmax={vmax!r}")
  if network is not None:
    check_c51_settings(network, d, clip_rewards)


def check_c51_settings(network: ml_collections.ConfigDict, d: ml_collections.ConfigDict, clip_rewards: bool) -> None:
  """Under C51 (``network.num_atoms`` > 1): no key that C51 ignores, and a support a clipped reward fits in.

  C51's loss is the cross-entropy to the projected target distribution (Bellemare et al. 2017, Algorithm 1;
  Dopamine's ``JaxFullRainbowAgent``), so ``dqn.loss`` (the scalar TD loss) would be ignored: anything but its
  default is refused. With ``dqn.clip_rewards`` every reward is in [-1, 1]; a support whose ``dqn.vmax`` is
  below 1 cannot hold one reward, so the target of every rewarded step projects onto its end atom (with
  ``vmax=1e-6`` every return is one point and the agent learns nothing). Without clipping the reward
  scale is the environment's, so no floor is set.

  Args:
    network: the config's ``network`` block.
    d: its ``dqn`` block, ``dqn.vmax`` / ``dqn.vmin`` already checked by :func:`check_dqn_settings`.
    clip_rewards: the ``dqn.clip_rewards`` the task uses (checked).

  Raises:
    InputError: one line naming the key.

  Examples:
    >>> import ml_collections
    >>> from jaxlab.errors import InputError
    >>> from jaxlab.tasks.dqn_config import check_c51_settings
    >>> network = ml_collections.ConfigDict({"num_atoms": 51})
    >>> check_c51_settings(network, ml_collections.ConfigDict({"loss": "mse", "vmax": 10.0}), clip_rewards=True)
    >>> try:
    ...   check_c51_settings(network, ml_collections.ConfigDict({"loss": "huber", "vmax": 10.0}), clip_rewards=True)
    ... except InputError as e:
    ...   print(str(e)[:50])
    dqn.loss='huber' has no effect under C51 (network.
  """
  num_atoms = network.get("num_atoms", 1)
  if not (errors.is_int(num_atoms) and num_atoms > 1):
    return  # scalar Q-values (a bad num_atoms is the network's check)
  check(d.loss == "mse", f"dqn.loss={d.loss!r} has no effect under C51 (network.num_atoms={num_atoms}: the loss is "
        "the cross-entropy to the projected target distribution); leave it 'mse', its default")
  vmax = d.get("vmax", 10.0)
  check(not clip_rewards or vmax >= 1.0,
        f"dqn.vmax={vmax!r} with dqn.clip_rewards=True: one clipped reward (1) already leaves the support, so every "
        "rewarded step's target projects onto its end atom; must be >= 1 (Dopamine: 10)")


def c51_support_from_config(network: ml_collections.ConfigDict, d: ml_collections.ConfigDict) -> Any:
  """C51's support for ``network.num_atoms`` > 1 on ``[dqn.vmin, dqn.vmax]``, else None (scalar Q).

  Args:
    network: the config's ``network`` block.
    d: its ``dqn`` block (checked by :func:`check_dqn_settings`).

  Returns:
    float32 [num_atoms], or None.
  """
  num_atoms = network.get("num_atoms", 1)
  if num_atoms == 1:
    return None
  return distributional.c51_support(num_atoms, d.get("vmax", 10.0), d.get("vmin"))


def q_network_from_config(network: ml_collections.ConfigDict, num_actions: int, rainbow: bool = False,
                          diagnostics: bool = False, router_diagnostics: bool = False
                          ) -> tuple[QNetwork, dict[str, float]]:
  """The ``QNetwork`` of a ``network`` config block and its auxiliary-loss weights for ``td_loss``.

  Every key is checked (``network.<key>`` in the message) before anything is initialised.

  Args:
    network: the config's ``network`` block (``QNetwork``'s keyword arguments).
    num_actions: the environment's action count.
    rainbow: whether the task reads Rainbow's head (``num_atoms``, ``dueling``, ``noisy``); a
      task that does not refuses them.
    diagnostics: whether the task logs ``network.diagnostics`` (:mod:`jaxlab.rl.diagnostics`); a
      task that does not refuses ``network.diagnostics=True``.
    router_diagnostics: whether the task logs ``network.router_diagnostics`` (the router's Adam moments
      against eps: ``router_metrics_from_config``); a task that does not refuses it.

  Returns:
    ``(net, aux_weights)``, the latter ``{auxiliary loss name: weight}`` (``dqn.AUX_LOSSES``).

  Raises:
    InputError: an unknown key or a value that builds no network.
  """
  try:
    net = QNetwork(num_actions=num_actions, **dict(network))
  except TypeError as e:  # an unknown network key
    raise InputError(f"network: {e}") from None
  aux_weights = {name: getattr(net, key) for key, name in AUX_WEIGHT_KEYS.items()}
  for key, w in ((key, getattr(net, key)) for key in AUX_WEIGHT_KEYS):
    errors.check_range(w, f"network.{key}", 0, meaning="0 = off, as Dopamine's released configs")
    check(not w or net.head == "top1",
          f"network.{key}={w!r} but network.head={net.head!r}; only head='top1' has this auxiliary loss "
          "(set it to 0)")
  for key in ("num_atoms", "dueling", "noisy", "noisy_hidden", "noisy_experts", "noise_per_row", "deterministic",
              "expert_means"):
    default = QNetwork.__dataclass_fields__[key].default
    check(rainbow or getattr(net, key) == default,
          f"network.{key}={getattr(net, key)!r}: this task has no Rainbow head; leave it at {default!r} "
          "(the dqn_minatar and dqn_atari tasks take it)")
  check(diagnostics or not net.diagnostics,
        f"network.diagnostics={net.diagnostics!r}: this task does not log network diagnostics; leave it False "
        "(the dqn_minatar and dqn_atari tasks take it)")
  check(router_diagnostics or not net.router_diagnostics,
        f"network.router_diagnostics={net.router_diagnostics!r}: this task does not log the router diagnostics; "
        "leave it False (the dqn_minatar task takes it)")
  net.check_config()  # the network's sizes, before anything is initialised
  return net, aux_weights


#: ``optimizer.name`` values whose state holds the Adam moments that ``network.router_diagnostics`` reads.
ADAM_OPTIMIZERS = ("adam", "adamw")


def router_metrics_from_config(config: ml_collections.ConfigDict) -> Callable[[Any], dict[str, Any]]:
  """``opt_state -> {"router/...", "adam/..."}`` for ``network.router_diagnostics``: Adam's second moments
  against the config's ``optimizer.eps`` (:func:`jaxlab.rl.diagnostics.adam_moments`).

  Args:
    config: the task's config (``optimizer.name``, ``optimizer.eps``, ``optimizer.b2``; optax's defaults
      1e-8 and 0.999 where unset).

  Returns:
    The metrics function, called on the optimizer state before each update.

  Raises:
    InputError: ``optimizer.name`` is not Adam's (there are no second moments to read).
  """
  opt = config.get("optimizer", None) or ml_collections.ConfigDict()
  name = opt.get("name", "adam")
  check(name in ADAM_OPTIMIZERS, f"network.router_diagnostics=True with optimizer.name={name!r}; the router "
        f"diagnostics read Adam's second moments: use one of {ADAM_OPTIMIZERS}, or network.router_diagnostics=False")
  eps, b2 = opt.get("eps", 1e-8), opt.get("b2", 0.999)  # optax.adam's defaults
  return lambda opt_state: diagnostics.adam_moments(opt_state, eps, b2, where="network.router_diagnostics=True")
