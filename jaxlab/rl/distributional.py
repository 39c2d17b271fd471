r"""C51's distributional Bellman target and loss, and n-step returns, as pure functions.

Bellemare, Dabney & Munos, "A Distributional Perspective on Reinforcement Learning", ICML 2017
(C51: Eq. 7, Algorithm 1); Sutton & Barto, Sec. 7.1 (n-step returns); as Dopamine's
``JaxRainbowAgent`` computes them (``jax/agents/rainbow/rainbow_agent.py``: ``target_distribution``,
``project_distribution``, ``train``), the agent the Soft-MoE paper's Rainbow and DER runs use.

Notation: ``B`` batch, ``A`` actions, ``N`` atoms, ``n`` the update horizon.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxlab.errors import check, check_finite, check_int


def c51_support(num_atoms: int, vmax: float, vmin: float | None = None) -> jax.Array:
  """The fixed support ``z_i``: ``num_atoms`` evenly spaced values in ``[vmin, vmax]``.

  Dopamine's ``JaxRainbowAgent``: ``vmin`` defaults to ``-vmax`` (51 atoms, ``vmax=10`` there).

  Args:
    num_atoms: ``N`` >= 2.
    vmax: the largest value.
    vmin: the smallest value (default ``-vmax``); must be below ``vmax``.

  Returns:
    float32 [N].
  """
  check_int(num_atoms, "num_atoms", 2)
  check_finite(vmax, "vmax")
  if vmin is not None:
    check_finite(vmin, "vmin")
  vmin = -float(vmax) if vmin is None else float(vmin)
  check(vmin < float(vmax), f"vmin={vmin} must be below vmax={vmax}")
  return jnp.linspace(vmin, float(vmax), num_atoms, dtype=jnp.float32)


def expected_q(logits: jax.Array, support: jax.Array) -> jax.Array:
  r"""Q-values of C51 logits: :math:`Q(s, a) = \sum_i z_i\, \mathrm{softmax}(\ell(s, a))_i`.

  Args:
    logits: [..., A, N] (``QNetwork(num_atoms=N)``'s output).
    support: [N] the atoms ``z`` (``c51_support``).

  Returns:
    float32 [..., A].
  """
  return jnp.sum(jax.nn.softmax(logits.astype(jnp.float32), axis=-1) * support, axis=-1)


def project_distribution(supports: jax.Array, weights: jax.Array, target_support: jax.Array) -> jax.Array:
  r"""Projects ``(supports, weights)`` onto the evenly spaced ``target_support`` (Eq. 7).

  .. math::
    (\Phi \hat{T} Z)_i = \sum_{j=0}^{N-1}
      \Big[1 - \frac{|[\hat{T} z_j]_{V_{min}}^{V_{max}} - z_i|}{\Delta z}\Big]_0^1\, p_j

  Each atom's mass is split between the two target atoms beside its clipped position, in
  proportion to closeness: Algorithm 1's floor/ceil split, written as Dopamine's
  ``project_distribution`` writes it (one broadcast, no scatter).

  Args:
    supports: [..., N] the atoms' new positions (e.g. :math:`r + \gamma^n d\, z_j`).
    weights: [..., N] their masses (probabilities; need not sum to 1).
    target_support: [N'] evenly spaced, increasing (``c51_support``).

  Returns:
    [..., N'] the projected masses.
  """
  v_min, v_max = target_support[0], target_support[-1]
  delta_z = (v_max - v_min) / (target_support.shape[0] - 1)
  clipped = jnp.clip(supports, v_min, v_max)[..., None, :]                  # [..., 1, N]
  closeness = jnp.clip(1 - jnp.abs(clipped - target_support[:, None]) / delta_z, 0, 1)  # [..., N', N]
  return jnp.sum(closeness * weights[..., None, :], axis=-1)


def c51_target(next_logits: jax.Array, reward: jax.Array, discount: jax.Array, support: jax.Array,
               next_q_selector: jax.Array | None = None) -> jax.Array:
  r"""The C51 target distribution for a batch, stopped from gradients (Dopamine's ``target_distribution``).

  .. math::
    a^* = \arg\max_a \sum_i z_i\, p_i(s', a), \qquad
    m = \Phi\big(r + \gamma^n d\, z,\ p(s', a^*)\big)

  Args:
    next_logits: [B, A, N] the target network's logits at :math:`s'`.
    reward: [B] the (n-step) return :math:`r` (``n_step_returns``).
    discount: [B] :math:`\gamma^n d`, 0 where the episode ended within the horizon.
    support: [N] the atoms ``z``.
    next_q_selector: [B, A] Q-values that choose :math:`a^*` (the online network's, for Double
      DQN, as Dopamine's full Rainbow does); default: the target network's own expectation.

  Returns:
    float32 [B, N].
  """
  probabilities = jax.nn.softmax(next_logits.astype(jnp.float32), axis=-1)
  q = jnp.sum(probabilities * support, axis=-1) if next_q_selector is None else next_q_selector
  best = jnp.argmax(q, axis=-1)
  next_probabilities = jnp.take_along_axis(probabilities, best[:, None, None], axis=1)[:, 0]
  supports = reward[:, None].astype(jnp.float32) + discount[:, None].astype(jnp.float32) * support
  return jax.lax.stop_gradient(project_distribution(supports, next_probabilities, support))


def c51_loss(logits: jax.Array, actions: jax.Array, target: jax.Array) -> jax.Array:
  """Per-transition cross-entropy of the chosen action's distribution against ``target``.

  Dopamine's ``softmax_cross_entropy_loss_with_logits`` on ``logits[b, actions[b]]``; its mean
  (weighted by importance weights under prioritised replay) is the loss, and, under prioritised
  replay, its square root the new priority.

  Args:
    logits: [B, A, N] the online network's logits at :math:`s`.
    actions: int [B].
    target: [B, N] ``c51_target``.

  Returns:
    float32 [B].
  """
  chosen = jnp.take_along_axis(logits, actions[:, None, None], axis=1)[:, 0].astype(jnp.float32)
  return optax.softmax_cross_entropy(chosen, target)


def n_step_returns(rewards: jax.Array, discounts: jax.Array, gamma: float) -> tuple[jax.Array, jax.Array]:
  r"""n-step returns and their bootstrap discounts, truncated at the episode's end.

  .. math::
    G = \sum_{k=0}^{n-1} \gamma^k \Big(\prod_{j<k} d_j\Big) r_k, \qquad
    \Gamma = \gamma^n \prod_{j<n} d_j

  with :math:`d_j = 0` after a terminal step: rewards past the episode's end add nothing and the
  target does not bootstrap (Dopamine's replay ``update_horizon``, ``cumulative_gamma``).

  Args:
    rewards: [..., n] the rewards of ``n`` consecutive steps from the sampled one.
    discounts: [..., n] 1 while the episode goes on after step k, 0 if step k ended it.
    gamma: the per-step discount.

  Returns:
    ``(G [...], Gamma [...])`` in float32.
  """
  n = rewards.shape[-1]
  alive = jnp.cumprod(discounts.astype(jnp.float32), axis=-1)                 # prod_{j<=k} d_j
  alive_before = jnp.concatenate([jnp.ones_like(alive[..., :1]), alive[..., :-1]], axis=-1)
  powers = jnp.asarray(gamma, jnp.float32) ** jnp.arange(n, dtype=jnp.float32)
  returns = jnp.sum(powers * alive_before * rewards.astype(jnp.float32), axis=-1)
  return returns, jnp.asarray(gamma, jnp.float32) ** n * alive[..., -1]
