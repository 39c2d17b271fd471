"""InfoNCE and SigLIP against direct numpy transcriptions of their papers' formulas."""

import numpy as np

from jaxlab.ot_clip import contrastive
from tests.support.tolerances import log_domain_atol, ops_rtol

# The losses are log-sum-exps of logits up to scale + |bias| from 8-term cosine dot products.


def _normalised(x):
  x = np.asarray(x, np.float64)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


def _log_softmax(z, axis):
  z = z - z.max(axis=axis, keepdims=True)
  return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def test_clip_loss_matches_reference(pair):
  x, y = pair
  logits = 14.0 * _normalised(x) @ _normalised(y).T
  ref = -0.5 * (np.diag(_log_softmax(logits, 1)).mean() + np.diag(_log_softmax(logits, 0)).mean())
  np.testing.assert_allclose(contrastive.clip_loss(x, y, 14.0), ref, rtol=0, atol=log_domain_atol(14.0, 8 + 4))


def test_siglip_loss_matches_reference(pair):
  x, y = pair
  logits = 10.0 * _normalised(x) @ _normalised(y).T - 3.0
  z = 2 * np.eye(16) - 1
  ref = np.sum(np.log1p(np.exp(-z * logits))) / 16
  # 256 terms of log1p(exp(.)) summed: a log-domain error per term, relative to the (positive) sum.
  np.testing.assert_allclose(contrastive.siglip_loss(x, y, 10.0, -3.0), ref,
                             rtol=log_domain_atol(13.0, 8 + 4) + ops_rtol(256))


def test_aligned_pairs_score_lower_than_shuffled(pair):
  x, y = pair
  for loss in (lambda a, b: contrastive.clip_loss(a, b, 14.0),
               lambda a, b: contrastive.siglip_loss(a, b, 10.0, -3.0)):
    assert loss(x, x) < loss(x, y[::-1])
