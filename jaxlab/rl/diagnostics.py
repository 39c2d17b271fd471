r"""Diagnostics of value networks: dormant neurons, feature rank, and what says why a router does not learn.

* Dormant neurons (Sokar, Agarwal, Castro, Evci, "The Dormant Neuron Phenomenon in Deep
  Reinforcement Learning", ICML 2023, Def. 3.1): neuron :math:`i` of a layer with :math:`H`
  neurons scores

  .. math:: s_i = \frac{\mathbb{E}_{x \in D} |h_i(x)|}{\frac{1}{H} \sum_k \mathbb{E}_{x \in D} |h_k(x)|}

  and is :math:`\tau`-dormant when :math:`s_i \le \tau`. As Dopamine's ``estimate_neuron_score``
  (dopamine/labs/redo/weight_recyclers.py:303-325 @ 5873f54), the expectation is the mean over every
  axis but the last (the batch and, for a conv layer, the positions: a neuron is a channel), the
  denominator gets ``+ 1e-9``, and a network's fraction pools its layers (dormant neurons of all
  layers / neurons of all layers, ``log_dead_neurons_count``). Dopamine's default threshold is
  :math:`\tau = 0` (``dead_neurons_threshold=0.0``: exactly inactive ReLUs); :math:`\tau = 0.1`
  also counts the nearly inactive ones. Both are logged (:data:`DORMANT_TAUS`).
* Feature rank (Kumar, Agarwal, Ghosh, Levine, "Implicit Under-Parameterization Inhibits
  Data-Efficient Deep Reinforcement Learning", ICLR 2021, Sec. 3): the effective rank of the
  penultimate features :math:`\Phi \in \mathbb{R}^{n \times F}` with singular values
  :math:`\sigma_1 \ge \dots`,

  .. math::
     \mathrm{srank}_\delta(\Phi) = \min\Big\{k : \frac{\sum_{i \le k} \sigma_i}{\sum_i \sigma_i}
       \ge 1 - \delta\Big\}, \quad \delta = 0.01,

  at most :math:`\min(n, F)`: measured on a batch of :math:`n` replay states it says nothing
  unless :math:`n` is well above 1.

Both papers measure on a batch of states sampled from the replay buffer (Dopamine's ReDo agents:
``batch_size_statistics=256`` states, recycled_dqn_agents.py:98), not on the acting batch (in
MinAtar one observation per environment step). :func:`replay_diagnostics` is that measurement on
the replay batch a loss already has; the network returns the activations only with
``QNetwork(diagnostics=True)``.

Why a Soft-MoE router does not learn (docs/methods/soft_moe_rl.md, "Why the router does not learn"):

* ``q_spread``: how much the Q-values vary over the states of a batch and over the actions; a
  position-blind network (uniform routing, whose output tokens are all equal) has almost none
  over states.
* ``adam_moments``: each parameter group's gradient RMS from Adam's second moment against
  Adam's :math:`\epsilon`, and the share of Adam's normalised step :math:`\epsilon` leaves it: a
  router whose gradients sit below :math:`\epsilon` takes steps that much shorter than the rest.
* The routing entropies and :func:`jaxlab.moe.combine_spread` are the layer's own statistics
  (:func:`jaxlab.moe.soft_moe_stats`), logged from the acting passes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from jaxlab import errors
from jaxlab.errors import check
from jaxlab.rl.networks import ACTIVATIONS

#: The dormancy thresholds logged: 0 (Dopamine's default: exactly inactive) and 0.1.
DORMANT_TAUS = (0.0, 0.1)
#: The srank threshold delta of Kumar et al. (ICLR 2021).
SRANK_DELTA = 0.01
_EPS = 1e-9  # Dopamine's estimate_neuron_score


def neuron_scores(activation: jax.Array) -> jax.Array:
  """Each neuron's normalised mean absolute activation :math:`s_i` (ICML 2023, Def. 3.1).

  Args:
    activation: a layer's activations, [batch, ..., neurons] (a conv layer's [b, h, w, c]: a
      neuron is a channel, averaged over the batch and the positions).

  Returns:
    float32 [neurons]: the mean of ``abs(activation)`` over every axis but the last, over the
    layer's mean + 1e-9.
  """
  check(jnp.ndim(activation) >= 2, f"activation of shape {jnp.shape(activation)}; need [batch, ..., neurons]")
  a = jnp.abs(jnp.asarray(activation).astype(jnp.float32))
  score = jnp.mean(a, axis=tuple(range(a.ndim - 1)))
  return score / (jnp.mean(score) + _EPS)


def dormant_fraction(layers: Mapping[str, jax.Array], tau: float) -> jax.Array:
  """Fraction of the :math:`\\tau`-dormant neurons (score <= tau) of all ``layers`` together.

  Args:
    layers: name -> activations [batch, ..., neurons] (post-activation outputs).
    tau: the threshold, >= 0 (0: exactly inactive neurons).

  Returns:
    float32 []: dormant neurons of all layers / neurons of all layers.
  """
  errors.check_range(tau, "dormant tau", 0, meaning="the dormancy threshold on the normalised score")
  check(len(layers) >= 1, "dormant_fraction needs at least one layer")
  scores = [neuron_scores(a) for a in layers.values()]
  dormant = sum(jnp.sum(s <= tau) for s in scores)
  return (dormant / sum(s.shape[0] for s in scores)).astype(jnp.float32)


def srank(features: jax.Array, delta: float = SRANK_DELTA) -> jax.Array:
  """The effective rank :math:`\\mathrm{srank}_\\delta` of features [n, F] (Kumar et al., ICLR 2021).

  Args:
    features: [n, F] (more axes are flattened into F).
    delta: the share of the singular-value mass left out, in (0, 1).

  Returns:
    int32 []: the fewest singular values holding ``1 - delta`` of their sum; 0 for all-zero features.
  """
  errors.check_range(delta, "srank delta", 0, 1, low_open=True, high_open=True)
  check(jnp.ndim(features) >= 2, f"features of shape {jnp.shape(features)}; need [n, F]")
  phi = jnp.asarray(features).astype(jnp.float32).reshape(jnp.shape(features)[0], -1)
  # The singular values from the smaller Gram matrix's eigenvectors u_i: sigma_i = |Phi^T u_i|. On
  # XLA:CPU the SVD of a [32, 1600] replay batch's features took 10-100 ms, this 0.2 ms. Not
  # sqrt(eig_i): forming the Gram squares the condition, so sqrt(eig) resolves only ~sqrt(eps) *
  # sigma_max (a rank-1 batch would read as rank 2-3); the norms of the projections are computed
  # from Phi itself and keep ~eps * sigma_max.
  wide = phi.shape[0] <= phi.shape[1]
  highest = jax.lax.Precision.HIGHEST  # float32 products also where the default is TF32 / bfloat16 (GPU, TPU)
  gram = jnp.matmul(phi, phi.T, precision=highest) if wide else jnp.matmul(phi.T, phi, precision=highest)
  _, vectors = jnp.linalg.eigh(gram)
  projected = jnp.matmul(phi.T if wide else phi, vectors, precision=highest)
  sigma = jnp.sort(jnp.linalg.norm(projected, axis=0))[::-1]  # descending
  cumulative = jnp.cumsum(sigma)
  total = cumulative[-1]
  k = jnp.sum(cumulative < (1.0 - delta) * total) + 1
  return jnp.where(total > 0, k, 0).astype(jnp.int32)


def network_diagnostics(stats: Mapping[str, Any], taus: tuple[float, ...] = DORMANT_TAUS,
                        delta: float = SRANK_DELTA) -> dict[str, jax.Array]:
  """``diag/...`` metrics from the stats of ``QNetwork(diagnostics=True)`` on a batch of states.

  Args:
    stats: the network's stats, holding ``activations/encoder``, ``activations/features`` and,
      for heads with a hidden ReLU layer, ``activations/penultimate``.
    taus: dormancy thresholds; the first is logged as ``diag/dead_fraction`` when 0.
    delta: srank's delta.

  Returns:
    ``diag/feature_rank`` (srank of ``activations/features``), ``diag/dormant_fraction`` (tau =
    0.1, the ReLU layers pooled), ``diag/dead_fraction`` (tau = 0) and per layer
    ``diag/dormant_fraction/<layer>`` (tau = 0.1): float32 scalars. With other ``taus`` each
    pooled fraction is ``diag/dormant_fraction@<tau>``.

  Raises:
    InputError: the stats hold no activations (the network was built without ``diagnostics=True``).
  """
  check(ACTIVATIONS + "features" in stats,
        "the network returned no activations; build it with diagnostics=True (config key network.diagnostics)")
  layers = {k[len(ACTIVATIONS):]: v for k, v in stats.items()
            if k.startswith(ACTIVATIONS) and k != ACTIVATIONS + "features"}
  out = {"diag/feature_rank": srank(stats[ACTIVATIONS + "features"], delta).astype(jnp.float32)}
  for tau in taus:
    name = {0.0: "diag/dead_fraction", 0.1: "diag/dormant_fraction"}.get(tau, f"diag/dormant_fraction@{tau:g}")
    out[name] = dormant_fraction(layers, tau)
  for layer, a in layers.items():
    out[f"diag/dormant_fraction/{layer}"] = dormant_fraction({layer: a}, 0.1)
  return out


def without_activations(stats: Mapping[str, Any]) -> dict[str, Any]:
  """``stats`` less the ``activations/...`` entries (for passes that log routing statistics only)."""
  return {k: v for k, v in stats.items() if not k.startswith(ACTIVATIONS)}


def replay_diagnostics(q_fn: Callable[[Any, jax.Array], tuple[Any, Mapping[str, Any]]], params: Any,
                       obs: jax.Array) -> dict[str, jax.Array]:
  """:func:`network_diagnostics` of the online network on a replay batch ``obs`` (what both papers measure).

  Args:
    q_fn: ``(params, obs) -> (output, stats)`` of a ``QNetwork(diagnostics=True)``.
    params: the online parameters (their gradient is stopped: the metrics are not part of the loss).
    obs: a batch of replay observations [n, ...]; srank is at most n.

  Returns:
    The ``diag/...`` metrics.
  """
  _, stats = q_fn(jax.lax.stop_gradient(params), obs)
  return network_diagnostics(stats)


def q_spread(q: jax.Array) -> dict[str, jax.Array]:
  r"""The Q-values' spread over the states of a batch and over the actions.

  .. math::
    \mathrm{states} = \frac{1}{A}\sum_a \mathrm{std}_s\, Q(s, a), \qquad
    \mathrm{actions} = \frac{1}{B}\sum_s \mathrm{std}_a\, Q(s, a)

  A network whose penultimate features do not depend on where things are (a Soft MoE with uniform
  routing: every output token is the mean token's expert output) gives nearly the same Q-values to
  every state of a batch: ``states`` near 0 while a dense head's is not.

  Args:
    q: Q-values [B, A] (expected values under C51).

  Returns:
    ``{"q_spread_states", "q_spread_actions"}``, float32 scalars.

  Examples:
    >>> import jax.numpy as jnp
    >>> {k: float(v) for k, v in q_spread(jnp.array([[0.0, 2.0], [2.0, 4.0]])).items()}
    {'q_spread_states': 1.0, 'q_spread_actions': 1.0}
  """
  check(jnp.ndim(q) == 2, f"q of shape {jnp.shape(q)}; need [batch, actions]")
  q = jnp.asarray(q).astype(jnp.float32)
  return {"q_spread_states": jnp.mean(jnp.std(q, axis=0)), "q_spread_actions": jnp.mean(jnp.std(q, axis=1))}


def _has_key(path: tuple, name: str) -> bool:
  return any(getattr(k, "key", getattr(k, "name", None)) == name for k in path)


def adam_moments(opt_state: Any, eps: float, b2: float, groups: Mapping[str, str] | None = None,
                 where: str = "adam_moments") -> dict[str, jax.Array]:
  r"""Gradient RMS from Adam's second moments, against :math:`\epsilon`, per parameter group.

  Adam (Kingma & Ba, ICLR 2015, Algorithm 1) steps each coordinate by
  :math:`\eta\, \hat m / (\sqrt{\hat v} + \epsilon)` with :math:`\hat v = v / (1 - \beta_2^t)`,
  the bias-corrected running mean of :math:`g^2` over about :math:`1 / (1 - \beta_2)` updates. Where
  :math:`\sqrt{\hat v} \ll \epsilon` the step is :math:`\eta\, \hat m / \epsilon`: shorter than Adam's
  normalised step by the factor :math:`\sqrt{\hat v} / (\sqrt{\hat v} + \epsilon)`. For the
  parameters whose path holds the key of each group, and for all parameters (``adam/...``):

  * ``<group>/grad_rms`` :math:`= \sqrt{\mathrm{mean}_i\, \hat v_i}`, the gradient's RMS over the
    group's coordinates and the recent updates;
  * ``<group>/grad_rms_over_eps`` = that over :math:`\epsilon`;
  * ``<group>/step_fraction`` :math:`= \mathrm{mean}_i \sqrt{\hat v_i} / (\sqrt{\hat v_i} + \epsilon)`: the
    share of Adam's normalised step that :math:`\epsilon` leaves (1: none lost; ~0.06 for gradients
    15x below :math:`\epsilon`).

  Read from the optimizer state, so the metrics cost a few reductions and need no second gradient.

  Args:
    opt_state: an optax state holding one ``ScaleByAdamState`` (``optax.adam``, ``adamw``, inside
      ``inject_hyperparams`` or a chain). Where ``inject_hyperparams`` holds ``eps`` / ``b2`` (a
      swept value), those are used instead of the arguments.
    eps: Adam's :math:`\epsilon` (the config's ``optimizer.eps``; optax's default 1e-8).
    b2: Adam's :math:`\beta_2` (optax's default 0.999).
    groups: metric prefix -> the parameter-path key that selects the group (default
      ``{"router": "router"}``: the MoE layers' router parameters).
    where: what asked for the metrics, for the error message (e.g. a config key).

  Returns:
    float32 scalars ``adam/...`` and ``<group>/...`` (a group with no parameters is left out); all 0
    before the first update.

  Raises:
    InputError: ``opt_state`` holds no Adam state, or more than one.

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> params = {"router": {"phi": jnp.zeros(4)}, "head": jnp.zeros(4)}
    >>> opt = optax.adam(1e-3, eps=1e-4)
    >>> state = opt.init(params)
    >>> grads = {"router": {"phi": jnp.full(4, 1e-5)}, "head": jnp.full(4, 1e-2)}
    >>> _, state = opt.update(grads, state, params)
    >>> m = adam_moments(state, eps=1e-4, b2=0.999)
    >>> round(float(m["router/grad_rms_over_eps"]), 3), round(float(m["router/step_fraction"]), 3)
    (0.1, 0.091)
  """
  is_adam = lambda x: isinstance(x, optax.ScaleByAdamState)  # noqa: E731
  adam = [x for x in jax.tree.leaves(opt_state, is_leaf=is_adam) if is_adam(x)]
  check(len(adam) == 1, f"{where}: the optimizer state holds {len(adam)} Adam states; Adam's moments against eps "
        "need exactly one (optimizer.name='adam' or 'adamw')")
  has_hyper = lambda x: isinstance(getattr(x, "hyperparams", None), dict)  # noqa: E731
  for state in (x for x in jax.tree.leaves(opt_state, is_leaf=has_hyper) if has_hyper(x)):
    eps, b2 = state.hyperparams.get("eps", eps), state.hyperparams.get("b2", b2)
  count = adam[0].count
  correction = 1.0 - jnp.asarray(b2, jnp.float32) ** count.astype(jnp.float32)
  leaves = jax.tree_util.tree_flatten_with_path(adam[0].nu)[0]
  eps = jnp.asarray(eps, jnp.float32)

  def summary(values: list[jax.Array]) -> dict[str, jax.Array]:
    v = jnp.concatenate([jnp.ravel(x).astype(jnp.float32) for x in values])
    v_hat = jnp.where(count > 0, v / jnp.maximum(correction, 1e-30), 0.0)
    rms, root = jnp.sqrt(jnp.mean(v_hat)), jnp.sqrt(v_hat)
    return {"grad_rms": rms, "grad_rms_over_eps": rms / eps, "step_fraction": jnp.mean(root / (root + eps))}

  out = {f"adam/{k}": v for k, v in summary([x for _, x in leaves]).items()}
  for prefix, key in (groups or {"router": "router"}).items():
    chosen = [x for path, x in leaves if _has_key(path, key)]
    if chosen:
      out.update({f"{prefix}/{k}": v for k, v in summary(chosen).items()})
  return out
