"""The Soft MoE token mixing (dispatch -> experts -> combine) with a hand-written VJP.

Puigcerver et al., "From Sparse to Soft Mixtures of Experts" (ICLR 2024), Sec. 2.1, Eqs. 1-3:
``D = softmax_m(L)``, ``C = softmax_{n,p}(L)``, ``X~ = D^T X``, ``Y = C f(X~)``, with router
logits ``L = X Phi``. Mathematically this equals :func:`jaxlab.moe.soft_moe_einsum`;
it exists because the straightforward einsum version (and its autodiff backward) runs 5-14x
slower than a dense layer of the same FLOPs on XLA:CPU. It is tuned for XLA:CPU only:
:func:`jaxlab.moe.soft_moe` runs it on CPU and the einsum form on GPU/TPU (``impl="auto"``).
What makes it fast (docs/methods/soft_moe_rl.md, "Performance: the Soft-MoE layer", has the measurements):

* Normalisers from the contractions: combine weights ``E = exp(L - rowmax)`` and dispatch
  weights ``exp(L - colmax)`` stay unnormalised; the dispatch normaliser is an extra row of the
  dispatch contraction and the combine normaliser is fused into the exponential's pass.
* Normalise after contracting: ``X~ = x^T E_d / Sd`` and ``Y = (E F) / Sc`` divide [b, s, d]
  and [b, m, d] arrays instead of [b, m, s] weights; the backward never forms ``D`` or ``C``,
  and the router gradient ``E * (dB F^T + dSc) + E_d * (x dA + dSd)`` is one fused pass.
* Every contraction is laid out as ``[.., M, K] x [.., K, N]`` or ``[.., M, K] x [.., N, K]``
  (the forms XLA:CPU hands to its fast matmul library); small transposes are materialised
  behind ``optimization_barrier`` so XLA does not fold them back into slow transposed dots.

Optionally (``single_exp``) one exponential serves both softmaxes: the dispatch weight is
``E[m,s] w[m] / Sd[s]`` with ``w = exp(rowmax - max rowmax)`` folded into the tokens, and the
router gradient needs one K = 2d contraction
``E * ([dB | w x] [F^T ; dA] + dSc + w dSd)``. It is exact only while, in every sample, each slot's
best logit is within ~80 of the sample's best logit (else ``Sd`` underflows to 0 and those slots
get NaN inputs); guarding it with ``lax.cond`` cost more than the second exponential saves, so it
is opt-in rather than automatic.

Notation (as in vmoe's soft_moe/router.py):
  b: batch (groups), m: tokens per group, d: token dim, n: experts, p: slots per expert,
  s = n * p: slots, h: expert hidden dim, e = b * p: slots per expert over the whole batch.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax


def _swap(a: jax.Array) -> jax.Array:
  return jnp.swapaxes(a, -1, -2)


def _materialise(*arrays):
  """Forces XLA to keep these (transposed/concatenated) arrays rather than fold the transpose
  into the consuming dot, which would turn a fast [M,K]x[K,N] dot into a slow transposed one."""
  out = lax.optimization_barrier(arrays)
  return out[0] if len(arrays) == 1 else out


def _slots_to_experts(a: jax.Array, n: int) -> jax.Array:
  """[b, k, n*p] -> [n, k, b*p]: slot axis split into (expert, slot), batch folded into slots."""
  b, k, s = a.shape
  p = s // n
  return a.reshape(b, k, n, p).transpose(2, 1, 0, 3).reshape(n, k, b * p)


def _fast_forward(xl, phi2, x, w1, b1, w2, b2, single_exp):
  b, m, d = x.shape
  n = w1.shape[0]
  s = phi2.shape[1]
  p = s // n
  logits = (xl.reshape(b * m, d) @ phi2).reshape(b, m, s)
  row_max = lax.stop_gradient(jnp.max(logits, axis=2, keepdims=True))  # [b, m, 1]
  e_c = jnp.exp(logits - row_max)  # [b, m, s]: unnormalised combine weights, each row max 1
  s_c = jnp.sum(e_c, axis=2, keepdims=True)  # [b, m, 1]
  if single_exp:
    tok_w = jnp.exp(row_max - jnp.max(row_max, axis=1, keepdims=True))  # [b, m, 1], in (0, 1]
    e_d, xw = e_c, x * tok_w
  else:
    tok_w = jnp.ones((b, m, 1), x.dtype)
    col_max = lax.stop_gradient(jnp.max(logits, axis=1, keepdims=True))  # [b, 1, s]
    e_d, xw = jnp.exp(logits - col_max), x
  xw_t_aug = _materialise(jnp.concatenate([_swap(xw), _swap(tok_w)], axis=1))  # [b, d+1, m]
  slots_t_aug = jnp.einsum("bkm,bms->bks", xw_t_aug, e_d)  # [b, d+1, s]
  s_d = slots_t_aug[:, d:]  # [b, 1, s]
  slots_t = slots_t_aug[:, :d] / s_d  # X~^T, [b, d, s]
  xe_t = _slots_to_experts(slots_t, n)  # [n, d, e]
  xe = _materialise(_swap(xe_t))  # [n, e, d]
  hidden = jax.nn.relu(jnp.einsum("ned,ndh->neh", xe, w1) + b1[:, None, :])  # [n, e, h]
  out_e = jnp.einsum("neh,nhd->ned", hidden, w2) + b2[:, None, :]  # [n, e, d]
  out = _materialise(out_e.reshape(n, b, p, d).transpose(1, 0, 2, 3).reshape(b, s, d))  # f(X~)
  y = jnp.einsum("bms,bsd->bmd", e_c, out) / s_c  # [b, m, d]
  residuals = (xl, phi2, x, w1, w2, e_c, e_d, s_c, s_d, tok_w, xw, slots_t, xe_t, hidden, out, y)
  return y, residuals


def _fast_backward(single_exp, residuals, g_y):
  xl, phi2, x, w1, w2, e_c, e_d, s_c, s_d, tok_w, xw, slots_t, xe_t, hidden, out, y = residuals
  b, m, d = x.shape
  n = w1.shape[0]
  s = phi2.shape[1]
  p = s // n
  # Combine: Y = B / Sc with B = E f(X~).
  g_b = g_y / s_c  # [b, m, d]
  g_sc = -jnp.sum(g_b * y, axis=2, keepdims=True)  # [b, m, 1]
  g_out_t = jnp.einsum("bdm,bms->bds", _materialise(_swap(g_b)), e_c)  # [b, d, s]
  # Experts, with the expert axis leading.
  g_out_e_t = _slots_to_experts(g_out_t, n)  # [n, d, e]
  g_out_e_t, g_out_e = _materialise(g_out_e_t, _swap(g_out_e_t))
  g_b2 = jnp.sum(g_out_e_t, axis=2)
  g_w2 = _swap(jnp.einsum("nde,neh->ndh", g_out_e_t, hidden))
  g_pre = jnp.einsum("ned,nhd->neh", g_out_e, w2) * (hidden > 0)
  xe_t_aug = _materialise(jnp.concatenate([xe_t, jnp.ones((n, 1, b * p), xe_t.dtype)], axis=1))
  g_w1_aug = jnp.einsum("nke,neh->nkh", xe_t_aug, g_pre)  # [n, d+1, h]; last row: bias grad
  g_xe = jnp.einsum("neh,ndh->ned", g_pre, w1)  # [n, e, d]
  g_slots_t = g_xe.reshape(n, b, p, d).transpose(1, 3, 0, 2).reshape(b, d, s)
  # Dispatch: X~^T = (w x)^T E / Sd.
  g_a = g_slots_t / s_d  # [b, d, s]
  g_sd = -jnp.sum(g_a * slots_t, axis=1, keepdims=True)  # [b, 1, s]
  if single_exp:
    lhs, rhs = _materialise(jnp.concatenate([g_b, xw], axis=2),  # [b, m, 2d]
                            jnp.concatenate([_swap(out), g_a], axis=1))  # [b, 2d, s]
    g_logits = e_c * (jnp.einsum("bmk,bks->bms", lhs, rhs) + g_sc + tok_w * g_sd)
  else:
    out_t, g_a_ = _materialise(_swap(out), g_a)
    g_logits = (e_c * (jnp.einsum("bmd,bds->bms", g_b, out_t) + g_sc)
                + e_d * (jnp.einsum("bmd,bds->bms", x, g_a_) + g_sd))
  g_logits2 = g_logits.reshape(b * m, s)
  xl_t2, phi2_t, g_a_t = _materialise(xl.reshape(b * m, d).T, phi2.T, _swap(g_a))
  g_phi2 = xl_t2 @ g_logits2
  g_xl = (g_logits2 @ phi2_t).reshape(b, m, d)
  g_x = jnp.einsum("bms,bsd->bmd", e_d, g_a_t)
  if single_exp:
    g_x = g_x * tok_w
  return g_xl, g_phi2, g_x, g_w1_aug[:, :d], g_w1_aug[:, d], g_w2, g_b2


@functools.partial(jax.custom_vjp, nondiff_argnums=(7,))
def soft_moe_mix(xl, phi2, x, w1, b1, w2, b2, single_exp=False):
  """Soft MoE mixing ``Y = C f(D^T x)`` with logits ``xl @ phi2`` (Puigcerver et al., Eqs. 1-3).

  Args:
    xl: [b, m, d] tokens the router sees (``x``, or l2-normalised ``x``).
    phi2: [d, n*p] router weights (``phi`` reshaped; already normalised/scaled if asked).
    x: [b, m, d] tokens that are dispatched.
    w1, b1, w2, b2: expert MLP weights [n, d, h], [n, h], [n, h, d], [n, d].
    single_exp: one exponential for both softmaxes (see the module docstring; faster, exact only
      while every slot's best logit is within ~80 of its sample's best logit).

  Returns:
    [b, m, d] outputs.
  """
  return _fast_forward(xl, phi2, x, w1, b1, w2, b2, single_exp)[0]


def _vjp_forward(xl, phi2, x, w1, b1, w2, b2, single_exp):
  return _fast_forward(xl, phi2, x, w1, b1, w2, b2, single_exp)


soft_moe_mix.defvjp(_vjp_forward, _fast_backward)
