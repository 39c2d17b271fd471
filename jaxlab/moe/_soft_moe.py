"""Soft MoE layer as pure functions over a parameter dict.

Puigcerver, Riquelme, Mustafa, Houlsby. "From Sparse to Soft Mixtures of Experts", ICLR 2024
(arXiv 2308.00951); used as the penultimate layer of value networks by Obando-Ceron et al.,
"Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024 (arXiv 2402.08609).
Follows dopamine's ``labs/moes/architectures/softmoe.py`` (docs/methods/soft_moe_rl.md, "Differences from the official code", for deviations).

Notation (einsum letters, as in vmoe's soft_moe/router.py):
  b: batch (each sample is one routing group), m: tokens per sample, d: token dim,
  n: experts, p: slots per expert, s = n * p: all slots, h: expert hidden dim.

Parameters::

  {"router": {"phi": [d, n, p], "scale": []  (only with normalize=True)},
   "experts": {"w1": [n, d, h], "b1": [n, h], "w2": [n, h, d], "b2": [n, d]}}
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp

from jaxlab import errors
from jaxlab.errors import check
from jaxlab.moe import _soft_moe_kernel, experts as experts_lib

Params = dict

_NORM_EPS = 1e-6  # as dopamine's l2_normalize


def num_slots(num_tokens: int, num_experts: int, capacity_factor: float = 1.0) -> int:
  """Slots per expert ``p = ceil(m * capacity_factor / n)`` (dopamine's rule; vmoe rounds)."""
  return experts_lib.per_expert(num_tokens, num_experts, capacity_factor, "slots per expert", "0 slots per expert")


def init_soft_moe(key: jax.Array, token_dim: int, num_experts: int, slots_per_expert: int,
                  expert_hidden: int, normalize: bool = False,
                  dtype: jnp.dtype = jnp.float32) -> Params:
  """Router (:func:`init_router`) and expert MLPs (:func:`jaxlab.moe.experts.init_experts`)."""
  k_phi, k_experts = jax.random.split(key)
  return {"router": init_router(k_phi, token_dim, num_experts, slots_per_expert, normalize, dtype),
          "experts": experts_lib.init_experts(k_experts, num_experts, token_dim, expert_hidden,
                                              dtype)}


def init_router(key: jax.Array, token_dim: int, num_experts: int, slots_per_expert: int,
                normalize: bool = False, dtype: jnp.dtype = jnp.float32) -> dict[str, jax.Array]:
  """``phi`` [d, n, p] LeCun normal as dopamine/vmoe (fan-in d*n under jax's axis convention);
  with ``normalize`` also the learned scale (ones, vmoe's ``scale_init``)."""
  errors.check_int(num_experts, "num_experts")
  errors.check_int(slots_per_expert, "slots_per_expert")
  errors.check_int(token_dim, "token_dim")
  router = {"phi": jax.nn.initializers.lecun_normal()(
      key, (token_dim, num_experts, slots_per_expert), dtype)}
  if normalize:
    router["scale"] = jnp.ones((), dtype)
  return router


def _l2_normalize(x: jax.Array, axis: int) -> jax.Array:
  return x / (jnp.sqrt(jnp.sum(jnp.square(x), axis=axis, keepdims=True)) + _NORM_EPS)


def router_inputs(params: Params, x: jax.Array, normalize: bool) -> tuple[jax.Array, jax.Array]:
  """(tokens the router sees [b, m, d], router matrix [d, n*p]), Puigcerver et al. Sec. 2.3:
  with ``normalize`` both are l2-normalised over d and ``phi`` is multiplied by a learned scale."""
  phi = params["router"]["phi"]
  if normalize:
    check("scale" in params["router"], "normalize=True needs params['router']['scale']")
    x = _l2_normalize(x, axis=-1)
    phi = params["router"]["scale"] * _l2_normalize(phi, axis=0)
  return x, phi.reshape(phi.shape[0], -1)


def _check_inputs(params: Params, x: jax.Array) -> None:
  check(x.ndim == 3 and min(x.shape[1:]) >= 1,
        f"soft_moe tokens have shape {x.shape}; need [batch, tokens, dim] with tokens, dim >= 1")
  phi = params["router"]["phi"]
  check(phi.ndim == 3 and min(phi.shape) >= 1,
        f"router phi has shape {phi.shape}; need [dim, experts, slots], each >= 1")
  check(phi.shape[0] == x.shape[-1],
        f"tokens have dim {x.shape[-1]} but router phi expects dim {phi.shape[0]}")
  n, _ = experts_lib.check_experts(params["experts"], x.shape[-1])
  check(phi.shape[1] == n, f"router phi has {phi.shape[1]} experts but the experts have {n}")


IMPLS = ("auto", "cpu_kernel", "einsum")


def check_impl(impl: str, single_exponential: bool, impl_name: str = "impl",
               single_name: str = "single_exponential") -> None:
  """InputError ``<impl_name>=...`` for an ``impl`` not in :data:`IMPLS`, or for
  ``single_exponential=True`` without the kernel it is an option of (static: runs at trace time).

  ``impl_name`` / ``single_name`` are how the caller spells the two settings (a module
  attribute, a config key), so that the message names what the user set.
  """
  errors.check_choice(impl, impl_name, IMPLS)
  errors.check_bool(single_exponential, single_name)
  check(not single_exponential or impl == "cpu_kernel",
        f"{single_name}=True with {impl_name}={impl!r}: single_exponential is an option of the CPU kernel; "
        f"set {impl_name}='cpu_kernel' (impl='auto' runs the exact einsum form on GPU/TPU)")


def soft_moe(params: Params, x: jax.Array, *, normalize: bool = False,
             single_exponential: bool = False,
             impl: str = "auto") -> tuple[jax.Array, dict[str, jax.Array]]:
  """Soft MoE on tokens ``x`` [b, m, d] -> (outputs [b, m, d], stats).

  Puigcerver et al. Eqs. 1-3 with logits ``L = x phi`` (Eq. 1 without normalisation):
  dispatch ``D = softmax over tokens m``, combine ``C = softmax over (experts, slots)`` jointly,
  slot inputs ``X~ = D^T x``, each expert's MLP on its ``p`` slots, ``Y = C f(X~)``. Each sample
  is its own routing group (as dopamine, which vmaps the layer over the batch).

  Two implementations compute the same function (equal within float32 rounding; forward and
  gradients are tested against each other):

  * ``"cpu_kernel"``: a kernel with a hand-written backward (``_soft_moe_kernel``), several times
    faster than the einsum form on XLA:CPU. Its ``optimization_barrier`` calls steer XLA:CPU's dot
    emitter; on GPU/TPU they only block fusions.
  * ``"einsum"``: :func:`soft_moe_einsum`'s einsums with the autodiff backward, which XLA's GPU
    and TPU compilers fuse freely.

  ``impl="auto"`` (default) picks per platform when the program is lowered
  (``jax.lax.platform_dependent``): the kernel on CPU, the einsum form on every other platform.
  So one jitted or exported program is right wherever it runs, including ``jax.export`` for GPU
  or TPU from a CPU host, where ``jax.default_backend()`` at trace time would be wrong.

  Args:
    params: ``{"router": {"phi", "scale"?}, "experts": {"w1", "b1", "w2", "b2"}}``.
    x: tokens [b, m, d].
    normalize: l2-normalise tokens and phi for the logits, with the learned ``router/scale``.
    single_exponential: one exponential for both softmaxes (an option of the CPU kernel, so
      only with ``impl="cpu_kernel"``; faster still, exact only while the logits of a sample
      span < ~80; beyond that slots get NaN inputs, so it is off by default).
    impl: ``"auto"``, ``"cpu_kernel"`` or ``"einsum"`` (see above).

  Returns:
    ``(y [b, m, d], stats)``; the stats (see :func:`soft_moe_stats`) are computed under
    ``stop_gradient``; under ``jit`` they cost nothing unless used.

  Raises:
    InputError: for shapes that do not fit, an unknown ``impl``, or ``single_exponential``
      without ``impl="cpu_kernel"``.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxlab.moe import init_soft_moe, soft_moe
    >>> params = init_soft_moe(jax.random.key(0), token_dim=8, num_experts=4, slots_per_expert=2,
    ...                        expert_hidden=16)
    >>> y, stats = jax.jit(soft_moe)(params, jnp.ones((2, 8, 8)))  # impl="auto"
    >>> y.shape, stats["expert_load"].shape
    ((2, 8, 8), (4,))
    >>> y_einsum, _ = jax.jit(lambda p, x: soft_moe(p, x, impl="einsum"))(params, jnp.ones((2, 8, 8)))
  """
  _check_inputs(params, x)
  check_impl(impl, single_exponential)
  xl, phi2 = router_inputs(params, x, normalize)
  n = params["router"]["phi"].shape[1]

  def kernel(xl, phi2, x, e):
    return _soft_moe_kernel.soft_moe_mix(xl, phi2, x, e["w1"], e["b1"], e["w2"], e["b2"], single_exponential)

  def einsum(xl, phi2, x, e):
    return _einsum_mix(xl, phi2, x, e, n)

  operands = (xl, phi2, x, params["experts"])
  if impl == "auto":
    y = jax.lax.platform_dependent(*operands, cpu=kernel, default=einsum)
  else:
    y = (kernel if impl == "cpu_kernel" else einsum)(*operands)
  b, m, d = x.shape
  logits = (xl.reshape(b * m, d) @ phi2).reshape(b, m, *params["router"]["phi"].shape[1:])
  return y, soft_moe_stats(jax.lax.stop_gradient(logits))


def _einsum_mix(xl: jax.Array, phi2: jax.Array, x: jax.Array, experts: Params, n: int) -> jax.Array:
  """Puigcerver et al. Eqs. 1-3 as einsums: logits ``xl @ phi2`` [d, n*p], dispatch, experts, combine."""
  p = phi2.shape[1] // n
  logits = jnp.einsum("bmd,dnp->bmnp", xl, phi2.reshape(-1, n, p))
  dispatch = jax.nn.softmax(logits, axis=1)
  combine = jax.nn.softmax(logits, axis=(2, 3))
  slots = jnp.einsum("bmd,bmnp->nbpd", x, dispatch)
  b, d = x.shape[0], x.shape[-1]
  outs = experts_lib.apply_experts(experts, slots.reshape(n, b * p, d))
  return jnp.einsum("nbpd,bmnp->bmd", outs.reshape(n, b, p, d), combine)


def soft_moe_einsum(params: Params, x: jax.Array, *, normalize: bool = False) -> jax.Array:
  """The straightforward einsum Soft MoE (Puigcerver et al. Eqs. 1-3), autodiff backward.

  The readable definition that :func:`soft_moe` is tested against (and benchmarked against), and
  what ``soft_moe(impl="einsum")`` (``impl="auto"`` off CPU) computes.
  """
  _check_inputs(params, x)
  xl, phi2 = router_inputs(params, x, normalize)
  return _einsum_mix(xl, phi2, x, params["experts"], params["router"]["phi"].shape[1])


def _entropy(probs: jax.Array, axis) -> jax.Array:
  return -jnp.sum(probs * jnp.log(jnp.maximum(probs, 1e-30)), axis=axis)


def _max_entropy(k: int) -> float:
  return math.log(k) if k > 1 else 1.0  # one choice: entropy 0, keep it 0


def combine_spread(combine: jax.Array) -> jax.Array:
  r"""How much the output tokens differ: the combine weights' spread over positions, normalised.

  With combine weights :math:`C \in \mathbb{R}^{m \times s}` of one sample (each row a softmax over
  the :math:`s = np` slots, Puigcerver et al. Sec. 2.1), output token :math:`i` is
  :math:`y_i = \sum_j C_{ij} f_j`: tokens differ only as far as the rows of :math:`C` differ.

  .. math::
    \mathrm{spread}(C) = \frac{\frac{1}{s} \sum_j \mathrm{std}_i\, C_{ij}}{\frac{1}{ms} \sum_{ij} C_{ij}}
      = s \cdot \frac{1}{s} \sum_j \mathrm{std}_i\, C_{ij},

  the mean over slots of each slot's standard deviation over positions, over the mean combine
  weight :math:`1/s` (a coefficient of variation). 0: every position takes the same mixture of
  slots, so every output token is the same vector and a flatten -> dense head after the layer sees
  no position. While the logits :math:`L` are small it is about
  :math:`\frac{1}{s}\sum_j \mathrm{std}_i (L_{ij} - \bar L_i)`, the logits' spread over positions
  (each row centred); rows one-hot on distinct slots (:math:`m = s`) give :math:`\sqrt{m - 1}`.

  Args:
    combine: combine weights [b, m, s] (each row sums to 1).

  Returns:
    float32 []: the spread of each sample's weights, averaged over the batch.

  Examples:
    >>> import jax.numpy as jnp
    >>> from jaxlab.moe import combine_spread
    >>> float(combine_spread(jnp.full((2, 4, 8), 1 / 8)))  # every token the same mixture
    0.0
    >>> round(float(combine_spread(jnp.eye(4)[None])), 3)  # one-hot on distinct slots: sqrt(4 - 1)
    1.732
  """
  s = combine.shape[-1]
  return (s * jnp.mean(jnp.std(combine.astype(jnp.float32), axis=1))).astype(jnp.float32)


def soft_moe_stats(logits: jax.Array) -> dict[str, jax.Array]:
  """Routing statistics from logits [b, m, n, p] (scalars unless noted).

  dispatch_entropy / combine_entropy: mean entropy of each slot's dispatch weights over tokens /
  each token's combine weights over slots, divided by its maximum (log m, log n*p): 1 = uniform,
  0 = one-hot. dispatch_max / combine_max: mean of the largest weight (vmoe's
  ``*_weights_max_mean``). combine_spread: :func:`combine_spread` (0 = every output token the
  same). expert_load [n]: share of the combine weight each expert receives (sums to 1; 1/n when
  balanced).
  """
  b, m, n, p = logits.shape
  dispatch = jax.nn.softmax(logits, axis=1)
  combine = jax.nn.softmax(logits.reshape(b, m, n * p), axis=2)
  return {
      "dispatch_entropy": jnp.mean(_entropy(dispatch, 1)) / _max_entropy(m),
      "combine_entropy": jnp.mean(_entropy(combine, 2)) / _max_entropy(n * p),
      "dispatch_max": jnp.mean(jnp.max(dispatch, axis=1)),
      "combine_max": jnp.mean(jnp.max(combine, axis=2)),
      "combine_spread": combine_spread(combine),
      "expert_load": jnp.mean(combine.reshape(b, m, n, p).sum(-1), axis=(0, 1)),
  }
