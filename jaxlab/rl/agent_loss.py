"""The value network and TD loss of a DQN / Rainbow agent, shared by the MinAtar and Atari tasks.

Hessel et al., "Rainbow", AAAI 2018, as Dopamine's ``JaxFullRainbowAgent`` trains it
(dopamine/jax/agents/full_rainbow/full_rainbow_agent.py @ 5873f54): a noisy network gets a fresh
noise key per acting step and, in the loss, one key for the online pass at ``s`` and another for
the passes at ``s'`` (the target network and the Double-DQN selector, ``target_output``); C51
heads are read through their support; n-step batches are discounted by ``gamma ** n``. With
``QNetwork(noise_per_row=True)`` the online pass and acting draw noise per batch row (per
environment), as Dopamine's MoE agents and its Atari 100k agent do (``jax.vmap`` of the network
over rows with a key each; the passes at ``s'`` keep one key for the batch, as
``target_output`` does). Evaluation is Dopamine's ``eval_mode`` (the noisy head and hidden layer
at their means, noisy experts still noisy); the inference functions use every noisy layer's
means. The tasks (``jaxlab.tasks.dqn_minatar``, ``jaxlab.tasks.dqn_atari``) differ only in how
observations reach the network (``prepare``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp

from jaxlab.rl import diagnostics, distributional, dqn
from jaxlab.rl.networks import ACTIVATIONS, QNetwork


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
    """Dopamine's ``eval_mode``: the noisy head and hidden layer use their means (the same
    parameters); noisy experts still draw noise, as Dopamine's never see ``eval_mode``."""
    return self.net.clone(deterministic=True) if self.net.has_noisy_layers else self.net

  @property
  def mean_net(self) -> QNetwork:
    """The network with every noisy layer at its means, noisy experts included, so that it needs no key."""
    return self.net.clone(deterministic=True, expert_means=True) if self.net.has_noisy_layers else self.net

  def _apply(self, module: QNetwork, params: Any, obs: jax.Array, noise: jax.Array | None,
             per_row: bool) -> tuple[jax.Array, dict]:
    x = self.prepare(params, obs)
    if noise is None or not module.draws_noise:
      return module.apply({"params": params}, x)
    if not per_row:
      return module.apply({"params": params}, x, rngs={"noise": noise})
    # Dopamine's per-row noise: each row a batch of one with its own key (full_rainbow_moe_agent.py:85-86)
    one = lambda xi, k: module.apply({"params": params}, xi[None], rngs={"noise": k})  # noqa: E731
    out, stats = jax.vmap(one)(x, jax.random.split(noise, x.shape[0]))
    return out[:, 0], per_row_stats(stats)

  def q_fn(self, params: Any, obs: jax.Array, noise: jax.Array | None = None, *,
           per_row: bool | None = None) -> tuple[jax.Array, dict]:
    """The network's output (Q-values, or C51 logits) and stats in training mode.

    Args:
      params: the network's params.
      obs: a batch of observations.
      noise: a key for the noisy layers; None (or a network without them): every noisy layer's means.
      per_row: one noise draw per row (None: the network's ``noise_per_row``); False: one for the batch.

    Returns:
      ``(output, stats)``.
    """
    if noise is None:
      return self._apply(self.mean_net, params, obs, None, False)
    return self._apply(self.net, params, obs, noise, self.net.noise_per_row if per_row is None else per_row)

  def q_values(self, params: Any, obs: jax.Array, noise: jax.Array | None = None) -> tuple[jax.Array, dict]:
    """Q-values ``[N, actions]`` (expected values under C51) and stats, noise-free without a key."""
    out, stats = self.q_fn(params, obs, noise)
    return self._expected(out), stats

  def eval_q_values(self, params: Any, obs: jax.Array, noise: jax.Array) -> jax.Array:
    """Q-values ``[N, actions]`` of Dopamine's evaluation (``eval_mode``, :attr:`eval_net`): ``noise``
    reaches only noisy experts (per row with ``noise_per_row``, as Dopamine's Atari 100k agent draws a
    key per environment, atari_100k_rainbow_agent.py:62-69); without them it is unused."""
    out, _ = self._apply(self.eval_net, params, obs, noise, self.net.noise_per_row)
    return self._expected(out)

  def _expected(self, out: jax.Array) -> jax.Array:
    return out if self.support is None else distributional.expected_q(out, self.support)

  def acting_q_values(self, params: Any, obs: jax.Array, rng: jax.Array) -> tuple[jax.Array, dict, jax.Array]:
    """Q-values to act on: a noisy network draws its noise from ``rng`` (Dopamine: one sample per
    ``select_action``; per environment with ``noise_per_row``).

    Args:
      params: the network's params.
      obs: the observations acted on.
      rng: the acting key.

    Returns:
      ``(q_values, stats, key)``: the stats without ``network.diagnostics``' activations (those are
      scored on the replay batch, in the loss); the key left for epsilon-greedy (``rng`` itself
      without noise).
    """
    if self.net.draws_noise:
      rng, k_noise = jax.random.split(rng)
      q, stats = self.q_values(params, obs, k_noise)
    else:
      q, stats = self.q_values(params, obs)
    return q, diagnostics.without_activations(stats), rng

  def init(self, rng: jax.Array, example: jax.Array) -> Any:
    """The network's params for observations like ``example`` (no noise needed)."""
    return self.mean_net.init(rng, example)["params"]


def per_row_stats(stats: dict) -> dict:
  """Stats of a network vmapped over rows (batches of one) as one batched call reports them: the
  activations ``[B, 1, ...]`` -> ``[B, ...]``, every other entry (a per-call mean) averaged over rows."""
  return {k: (v.reshape(v.shape[0] * v.shape[1], *v.shape[2:]) if k.startswith(ACTIVATIONS) else jnp.mean(v, axis=0))
          for k, v in stats.items()}


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
    the batch (``q_spread_states``, ``q_spread_actions``: ``jaxlab.rl.diagnostics.q_spread``).
  """

  def loss_fn(params, batch, rng, target_params):
    online_fn = target_fn = agent.q_fn
    if agent.net.draws_noise:  # Dopamine's Rainbow: a key for the online pass at s, another for s' (target, selector)
      k_online, k_target = jax.random.split(rng)
      online_fn = lambda p, obs: agent.q_fn(p, obs, k_online)  # per row with noise_per_row
      target_fn = lambda p, obs: agent.q_fn(p, obs, k_target, per_row=False)  # one key: target_output's
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
