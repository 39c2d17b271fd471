"""The MoE tests' float64 numpy Soft MoE straight from the paper, and the float32 rounding bounds of the layers."""

import numpy as np

from tests.support.tolerances import log_domain_atol, ops_rtol


def soft_moe_tol(params, x, normalize=False):
  """Float32 rounding bound of a Soft MoE layer, relative to its largest output (``assert_close_to_scale``).

  Per output: the d-term router logits, the dispatch softmax's sum over m tokens, the combine
  softmax's sum over n*p slots, the expert MLP's d- and h-term dots and the combine sum; the
  softmax weights carry the logits' rounding as a relative error (log-domain bound).
  """
  phi = np.asarray(params["router"]["phi"], np.float64)
  d, n, p = phi.shape
  m, h = np.shape(x)[-2], np.shape(params["experts"]["w1"])[-1]
  if normalize:
    max_logit = float(params["router"]["scale"])  # unit tokens against unit phi columns
  else:
    max_logit = float(np.abs(np.einsum("...md,dnp->...mnp", np.asarray(x, np.float64), phi)).max())
  return ops_rtol(d + m + 2 * n * p + d + h) + 2 * log_domain_atol(max_logit, d)


def top1_moe_tol(params, x):
  """Float32 rounding bound of a Top-1 MoE layer, relative to its largest output: the d-term
  router logits and their n-way softmax (the gate), the expert MLP's d- and h-term dots."""
  kernel = np.asarray(params["router"]["kernel"], np.float64)
  d, n = kernel.shape
  h = np.shape(params["experts"]["w1"])[-1]
  max_logit = float(np.abs(np.asarray(x, np.float64) @ kernel).max())
  return ops_rtol(d + n + d + h + 1) + 2 * log_domain_atol(max_logit, d)


def numpy_soft_moe(params, x, normalize=False):
  """Puigcerver et al. (ICLR 2024) Eqs. 1-3 in float64 numpy, one sample at a time."""
  phi = np.asarray(params["router"]["phi"], np.float64)
  e = {k: np.asarray(v, np.float64) for k, v in params["experts"].items()}
  d, n, p = phi.shape
  out = []
  for xs in np.asarray(x, np.float64):
    xl, ph = xs, phi
    if normalize:
      xl = xs / (np.linalg.norm(xs, axis=1, keepdims=True) + 1e-6)
      ph = float(params["router"]["scale"]) * phi / (np.linalg.norm(phi, axis=0, keepdims=True) + 1e-6)
    logits = np.einsum("md,dnp->mnp", xl, ph).reshape(len(xs), n * p)
    dispatch = np.exp(logits - logits.max(0)) / np.exp(logits - logits.max(0)).sum(0)
    combine = np.exp(logits - logits.max(1, keepdims=True))
    combine /= combine.sum(1, keepdims=True)
    slots = (dispatch.T @ xs).reshape(n, p, d)
    hidden = np.maximum(np.einsum("npd,ndh->nph", slots, e["w1"]) + e["b1"][:, None], 0)
    f = np.einsum("nph,nhd->npd", hidden, e["w2"]) + e["b2"][:, None]
    out.append(combine @ f.reshape(n * p, d))
  return np.stack(out)
