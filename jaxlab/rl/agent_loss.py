"""The value network and TD loss of a DQN / Rainbow agent, shared by the MinAtar and Atari tasks.

Hessel et al., "Rainbow", AAAI 2018, as Dopamine's ``JaxFullRainbowAgent`` trains it
(dopamine/jax/agents/full_rainbow/full_rainbow_agent.py @ 5873f54): a noisy network gets a fresh
noise key per acting step and, in the loss, one key for the online pass at ``s`` and another for
the passes at ``s'`` (the target network and the Double-DQN selector, ``target_output``); C51
heads are read through their support; n-step batches are discounted by ``gamma ** n``. Evaluation
and inference use the noisy layers' means (Dopamine's ``eval_mode``). The tasks
(``jaxlab.tasks.dqn_minatar``, ``jaxlab.tasks.dqn_atari``) differ only in how observations reach
the network (``prepare``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp

from jaxlab.rl import diagnostics, distributional, dqn
from jaxlab.rl.networks import QNetwork


@dataclasses.dataclass(frozen=True)
class AgentNetwork:
  """A ``QNetwork`` with its noise handling and C51 support.

  Attributes:
    net: the network (``noisy`` layers sample noise when given a key).
    support: C51's atoms ``[num_atoms]``, or None (scalar Q-values).
    prepare: ``(params, obs) -> input``: what the network is applied to (e.g. a dtype cast).
  """

  net: QNetwork
  support: Any
  prepare: Callable[[Any, jax.Array], jax.Array]

  @property
  def eval_net(self) -> QNetwork:
    """The network without noise, which uses the noisy layers' means (the same parameters)."""
    return self.net.clone(deterministic=True) if self.net.noisy else self.net

  def q_fn(self, params: Any, obs: jax.Array, noise: jax.Array | None = None) -> tuple[jax.Array, dict]:
    """The network's output (Q-values, or C51 logits) and stats; ``noise``: a noisy head's key.

    Args:
      params: the network's params.
      obs: a batch of observations.
      noise: a key for the noisy layers; None (or a network without them): their means.

    Returns:
      ``(output, stats)``.
    """
    module, rngs = (self.net, {"noise": noise}) if self.net.noisy and noise is not None else (self.eval_net, None)
    return module.apply({"params": params}, self.prepare(params, obs), rngs=rngs)

  def q_values(self, params: Any, obs: jax.Array, noise: jax.Array | None = None) -> tuple[jax.Array, dict]:
    """Q-values ``[N, actions]`` (expected values under C51) and stats, noise-free without a key."""
    out, stats = self.q_fn(params, obs, noise)
    return (out if self.support is None else distributional.expected_q(out, self.support)), stats

  def acting_q_values(self, params: Any, obs: jax.Array, rng: jax.Array) -> tuple[jax.Array, dict, jax.Array]:
    """Q-values to act on: a noisy network draws its noise from ``rng`` (Dopamine: one sample per
    ``select_action``).

    Args:
      params: the network's params.
      obs: the observations acted on.
      rng: the acting key.

    Returns:
      ``(q_values, stats, key)``: the stats without ``network.diagnostics``' activations (those are
      scored on the replay batch, in the loss); the key left for epsilon-greedy (``rng`` itself
      without noise).
    """
    if self.net.noisy:
      rng, k_noise = jax.random.split(rng)
      q, stats = self.q_values(params, obs, k_noise)
    else:
      q, stats = self.q_values(params, obs)
    return q, diagnostics.without_activations(stats), rng

  def init(self, rng: jax.Array, example: jax.Array) -> Any:
    """The network's params for observations like ``example`` (no noise needed)."""
    return self.eval_net.init(rng, example)["params"]


def make_loss_fn(agent: AgentNetwork, *, gamma: float, horizon: int, double_dqn: bool, loss: str,
                 aux_weights: Mapping[str, float], log_routing: bool = True, per_sample: bool = False
                 ) -> Callable[[Any, Any, jax.Array, Any], tuple[jax.Array, dict]]:
  """``loss_fn(params, batch, rng, target_params)`` for the shared train step: :func:`~jaxlab.rl.td_loss`.

  Args:
    agent: the network.
    gamma: the per-step discount.
    horizon: n of the batch's n-step returns (the loss discounts by ``gamma ** n``).
    double_dqn: the online network chooses the next action.
    loss: "mse" or "huber" (scalar Q-values; C51 uses its cross-entropy).
    aux_weights: a Top-1 head's auxiliary-loss weights.
    log_routing: log the loss's routing statistics.
    per_sample: also return the per-transition losses (``metrics[PER_SAMPLE]``, for prioritised
      replay's :func:`priority_update`).

  Returns:
    The loss function; with noisy layers ``rng`` gives the online pass's key and the target's. A
    ``QNetwork(diagnostics=True)`` also logs ``diag/...`` (dormant neurons, feature rank) of the
    online network on the replay batch (:func:`jaxlab.rl.diagnostics.replay_diagnostics`), as both
    papers measure them; a ``QNetwork(router_diagnostics=True)`` the online Q-values' spread on
    the batch (``q_spread_states``, ``q_spread_actions``: :func:`jaxlab.rl.diagnostics.q_spread`).
  """

  def loss_fn(params, batch, rng, target_params):
    online_fn = target_fn = agent.q_fn
    if agent.net.noisy:  # Dopamine's full Rainbow: one key for the online pass at s, another for s' (target, selector)
      k_online, k_target = jax.random.split(rng)
      online_fn = lambda p, obs: agent.q_fn(p, obs, k_online)
      target_fn = lambda p, obs: agent.q_fn(p, obs, k_target)
    value, metrics = dqn.td_loss(strip(online_fn), params, target_params, batch, gamma=gamma ** horizon,
                                 double_dqn=double_dqn, loss=loss, aux_weights=aux_weights, log_routing=log_routing,
                                 support=agent.support, target_q_fn=strip(target_fn), per_sample=per_sample,
                                 log_q_spread=agent.net.router_diagnostics)
    if agent.net.diagnostics:
      metrics.update(diagnostics.replay_diagnostics(agent.q_fn, params, batch.obs))
    return value, metrics
  return loss_fn


def strip(q_fn: dqn.QFn) -> dqn.QFn:
  """``q_fn`` whose stats leave out ``network.diagnostics``' activations (the TD loss logs none)."""
  return lambda params, obs: (lambda out: (out[0], diagnostics.without_activations(out[1])))(q_fn(params, obs))


def priority_update(replay: Any) -> Callable[[Any, Any, Mapping[str, jax.Array]], Any]:
  r"""``Task.update_data`` of prioritised replay: the drawn transitions' new priorities from their losses.

  Schaul et al. 2016 as Dopamine's ``JaxFullRainbowAgent`` (full_rainbow_agent.py:411-422 @ 5873f54):
  after the update each drawn transition gets :math:`\sqrt{\ell_i + 10^{-10}}` from its TD loss
  (``replay.update_priorities``). A row the loss ignored (``weight`` 0: an n-step window cut by a
  truncation) gets priority ~0, so it is not drawn again.

  Args:
    replay: a prioritised replay (``jaxlab.rl.replay`` or ``jaxlab.rl.replay_frames``) whose state is
      ``data_state.replay``.

  Returns:
    ``update_data(state, batch, per_sample) -> data_state``.
  """

  def update_data(state, batch, per_sample):
    losses = per_sample["td_loss"]
    if batch.weight is not None:
      losses = jnp.where(batch.weight > 0, losses, 0.0)
    data = state.data_state
    return data._replace(replay=replay.update_priorities(data.replay, batch.index, losses))
  return update_data
