r"""Rainbow's output layers: factorised noisy linear layers and the dueling (distributional) head.

Fortunato et al., "Noisy Networks for Exploration", ICLR 2018 (Eqs. 8-11, Sec. 3.2); Wang et al.,
"Dueling Network Architectures for Deep RL", ICML 2016 (Eq. 9); as Dopamine's
``jax/networks.py`` ``NoisyNetwork`` and ``FullRainbowNetwork`` compute them (the head that
``labs/moes``' ``FullRainbowMoENetwork`` places after its MoE layer).

Noise is drawn from the flax RNG stream ``"noise"`` on every call (``apply(..., rngs={"noise":
key})``), so a jitted step that passes a fresh key per call samples fresh noise, and equal keys
give equal networks (Dopamine passes a key the same way). ``deterministic=True`` uses the mean
weights only (Dopamine's ``eval_mode``).

Per-row noise (Dopamine's MoE agents vmap the network over the batch with one key per row) is the
network applied under ``jax.vmap``, each row a batch of one with its own key
(:class:`jaxlab.rl.agent_loss.AgentNetwork`). ``NoisyDense(factorised=True)`` is the form for that:
it never forms a row's noisy weight matrix (``p x q`` per row under the vmap), at the cost of a
second matmul.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check_bool, check_int

#: Dopamine's initial noise scale: sigma = SIGMA_0 / sqrt(fan_in) (the paper's Sec. 3.2 says 0.5).
SIGMA_0 = 0.1
_GLOROT = nn.initializers.xavier_uniform()


def scaled_noise(x: jax.Array) -> jax.Array:
  r"""Fortunato et al.'s :math:`f(x) = \mathrm{sgn}(x) \sqrt{|x|}` (Eqs. 10-11)."""
  return jnp.sign(x) * jnp.sqrt(jnp.abs(x))


def factorised_noise(key: jax.Array, p: int, q: int) -> tuple[jax.Array, jax.Array]:
  r"""One draw of factorised Gaussian noise (Fortunato et al. 2018, Eq. 10-11): :math:`f(\epsilon_p)`
  [p, 1] and :math:`f(\epsilon_q)` [1, q], with :math:`\epsilon_p, \epsilon_q` standard normal.

  Dopamine's ``NoisyNetwork`` splits its key the same way (``rng_p, rng_q = split(key)``,
  jax/networks.py:512-516 @ 5873f54); the weight noise is ``f_p * f_q``, the bias noise ``f_q``.
  """
  k_p, k_q = jax.random.split(key)
  return scaled_noise(jax.random.normal(k_p, (p, 1))), scaled_noise(jax.random.normal(k_q, (1, q)))


def init_noisy_mu(key: jax.Array, shape: tuple[int, ...], in_features: int) -> jax.Array:
  """A noisy layer's mean weights or biases: U[-1/sqrt(p), 1/sqrt(p)] for ``p`` = ``in_features``
  (Fortunato et al. 2018, Sec. 3.2; Dopamine's initialiser)."""
  bound = 1.0 / jnp.sqrt(in_features)
  return jax.random.uniform(key, shape, jnp.float32, -bound, bound)


def init_noisy_sigma(key: jax.Array, shape: tuple[int, ...], in_features: int) -> jax.Array:
  """A noisy layer's noise scales: ``SIGMA_0 / sqrt(p)`` everywhere (Sec. 3.2, Dopamine's SIGMA_0)."""
  del key
  return jnp.full(shape, SIGMA_0 / jnp.sqrt(in_features), jnp.float32)


def noisy_dense(params: dict[str, jax.Array], x: jax.Array, key: jax.Array | None,
                factorised: bool = False) -> jax.Array:
  r"""Fortunato et al.'s factorised noisy linear layer (Eqs. 8-11) on ``x`` [..., p] -> [..., q].

  Args:
    params: ``kernel_mu``, ``kernel_sigma`` [p, q], ``bias_mu``, ``bias_sigma`` [q] (:class:`NoisyDense`'s).
    x: inputs [..., p].
    key: draws :math:`\epsilon_p, \epsilon_q` (one sample for the whole batch); None: the means only.
    factorised: apply the noise as ``((x * f_p) @ sigma + b_sigma) * f_q`` instead of forming the noisy
      [p, q] kernel (the same function, in another order of float32 operations).

  Returns:
    [..., q].
  """
  w_mu, b_mu = params["kernel_mu"], params["bias_mu"]
  if key is None:
    return x @ w_mu + b_mu
  p, q = w_mu.shape
  f_p, f_q = factorised_noise(key, p, q)
  if factorised:
    return x @ w_mu + ((x * f_p[:, 0]) @ params["kernel_sigma"] + params["bias_sigma"]) * f_q[0] + b_mu
  return x @ (w_mu + params["kernel_sigma"] * (f_p * f_q)) + (b_mu + params["bias_sigma"] * f_q[0])


class NoisyDense(nn.Module):
  r"""A linear layer with factorised Gaussian noise (Fortunato et al. 2018, Eqs. 8-11).

  .. math::
    y = x (\mu^w + \sigma^w \odot f(\epsilon_p) f(\epsilon_q)^\top) + \mu^b + \sigma^b \odot f(\epsilon_q),
    \qquad \epsilon_p \sim \mathcal{N}(0, I_p),\ \epsilon_q \sim \mathcal{N}(0, I_q)

  Initialisation (Sec. 3.2, with Dopamine's scale): :math:`\mu \sim U[-1/\sqrt{p}, 1/\sqrt{p}]`,
  :math:`\sigma = 0.1/\sqrt{p}` for ``p`` inputs. One noise sample per call is shared by the
  whole batch, as in Dopamine (which vmaps a per-example network over one key).

  Attributes:
    features: outputs ``q``.
    deterministic: use the means only (no noise, no RNG needed).
    factorised: compute :math:`x \mu^w + ((x \odot f(\epsilon_p)) \sigma^w) \odot f(\epsilon_q) + \ldots`,
      the same function without forming the noisy weight matrix: two matmuls instead of one, but
      nothing of size ``p x q`` per row when the layer runs under ``jax.vmap`` with a key per row
      (per-row noise). Off: the one-matmul form above.
  """

  features: int
  deterministic: bool = False
  factorised: bool = False

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    check_int(self.features, "NoisyDense.features")
    check_bool(self.deterministic, "NoisyDense.deterministic")
    check_bool(self.factorised, "NoisyDense.factorised")
    p = x.shape[-1]
    params = {"kernel_mu": self.param("kernel_mu", init_noisy_mu, (p, self.features), p),
              "kernel_sigma": self.param("kernel_sigma", init_noisy_sigma, (p, self.features), p),
              "bias_mu": self.param("bias_mu", init_noisy_mu, (self.features,), p),
              "bias_sigma": self.param("bias_sigma", init_noisy_sigma, (self.features,), p)}
    return noisy_dense(params, x, None if self.deterministic else self.make_rng("noise"), self.factorised)


def dueling_logits(value: jax.Array, advantages: jax.Array) -> jax.Array:
  r"""Wang et al. 2016, Eq. 9, per atom: :math:`V + A - \mathrm{mean}_a A`.

  Args:
    value: [B, N] the value stream (``N`` = 1 for a scalar Q).
    advantages: [B, A, N] the advantage stream.

  Returns:
    [B, A, N].
  """
  return value[:, None, :] + advantages - jnp.mean(advantages, axis=1, keepdims=True)


class RainbowHead(nn.Module):
  """Features [B, d] -> logits [B, A, N] (and expected Q-values [B, A] on ``support``).

  Dopamine's ``FullRainbowNetwork`` after its torso: the value and advantage streams are one
  (noisy or plain Glorot) linear layer each on the shared hidden features (no hidden layer of
  their own), combined by :func:`dueling_logits`; without ``dueling``, one layer of
  ``num_actions * num_atoms``.

  Attributes:
    num_actions: ``A``.
    num_atoms: ``N`` (1 with a non-distributional agent).
    noisy: noisy linear layers (:class:`NoisyDense`) instead of dense ones.
    dueling: value and advantage streams.
    deterministic: noisy layers use their means (evaluation).
    factorised: noisy layers compute in :class:`NoisyDense`'s factorised form (per-row noise).
  """

  num_actions: int
  num_atoms: int = 51
  noisy: bool = True
  dueling: bool = True
  deterministic: bool = False
  factorised: bool = False

  def _linear(self, features: int, name: str) -> nn.Module:
    if self.noisy:
      return NoisyDense(features, deterministic=self.deterministic, factorised=self.factorised, name=name)
    return nn.Dense(features, kernel_init=_GLOROT, name=name)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    check_int(self.num_actions, "RainbowHead.num_actions")
    check_int(self.num_atoms, "RainbowHead.num_atoms")
    check_bool(self.noisy, "RainbowHead.noisy")
    check_bool(self.dueling, "RainbowHead.dueling")
    b, a, n = x.shape[0], self.num_actions, self.num_atoms
    if not self.dueling:
      return self._linear(a * n, "logits")(x).reshape(b, a, n)
    advantages = self._linear(a * n, "advantage")(x).reshape(b, a, n)
    return dueling_logits(self._linear(n, "value")(x), advantages)
