"""A held-out split's metrics, jit-able: retrieval, zero-shot, long-tailed and selective classification.

Built from the functions of ``inference`` and ``selective`` (Shi, Fan & Yan, ICML 2024, Sec. 5):
CLIP's argmax and OT-CLIP's transductive OT inference over the whole test set; on a long-tailed
subset, OT inference with the uniform and with the known class prior; selective classification
from the OT plan's confidence and from partial OT (AURC, and the risk at a coverage).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import InputError
from jaxlab.registry import Registry
from jaxlab.ot_clip.inference import ot_zero_shot, ot_zero_shot_plan, predict_from_plan, zero_shot_predict
from jaxlab.ot_clip.selective import aurc, partial_ot_confidence, plan_confidence, selective_risk
from jaxlab.ot_clip.similarity import l2_normalize


def retrieval_metrics(image_emb: jax.Array, text_emb: jax.Array) -> dict[str, jax.Array]:
  """Recall@1 of paired test rows: image -> text (``i2t_recall_at_1``) and text -> image (``t2i_...``).

  Args:
    image_emb: [N, d] L2-normalised image embeddings.
    text_emb: [N, d] L2-normalised text embeddings, row i paired with image row i.
  """
  sim = image_emb @ text_emb.T
  target = jnp.arange(sim.shape[0])
  return {"i2t_recall_at_1": jnp.mean(jnp.argmax(sim, axis=1) == target),
          "t2i_recall_at_1": jnp.mean(jnp.argmax(sim, axis=0) == target)}


def zero_shot_metrics(image_emb: jax.Array, class_emb: jax.Array, labels: jax.Array, epsilon: float, *,
                      coverage: float, long_tailed: tuple[np.ndarray, np.ndarray] | None = None
                      ) -> dict[str, jax.Array]:
  """Zero-shot, selective and (optionally) long-tailed metrics of one test set.

  Args:
    image_emb: [N, d] test image embeddings.
    class_emb: [K, d] class embeddings (e.g. a prompt ensemble).
    labels: [N] class ids.
    epsilon: OT inference's entropic regulariser, in (0, 1].
    coverage: the fraction of the test set selective classification answers, in (0, 1].
    long_tailed: (indices of a long-tailed subset of the test set, its class prior [K]), or None.

  Returns:
    ``zero_shot_accuracy`` (argmax), ``ot_zero_shot_accuracy`` (OT, uniform prior);
    ``aurc_plan`` and ``selective_risk_plan`` (confidence from the OT plan),
    ``selective_risk_partial_ot`` (partial OT moving ``coverage`` of the mass); with
    ``long_tailed``: ``lt_zero_shot_accuracy``, ``lt_ot_uniform_accuracy``, ``lt_ot_prior_accuracy``.
  """
  accuracy = lambda pred, y: jnp.mean(pred == y)
  plan = ot_zero_shot_plan(image_emb, class_emb, epsilon)
  pred_plan, conf_plan = plan_confidence(plan)
  pred_partial, conf_partial = partial_ot_confidence(image_emb, class_emb, epsilon, coverage)
  out = {"zero_shot_accuracy": accuracy(zero_shot_predict(image_emb, class_emb), labels),
         "ot_zero_shot_accuracy": accuracy(predict_from_plan(plan), labels),
         "aurc_plan": aurc(conf_plan, pred_plan == labels),
         "selective_risk_plan": selective_risk(conf_plan, pred_plan == labels, coverage),
         "selective_risk_partial_ot": selective_risk(conf_partial, pred_partial == labels, coverage)}
  if long_tailed is not None:
    idx, prior = long_tailed
    x, y = image_emb[idx], labels[idx]
    out["lt_zero_shot_accuracy"] = accuracy(zero_shot_predict(x, class_emb), y)
    out["lt_ot_uniform_accuracy"] = accuracy(ot_zero_shot(x, class_emb, epsilon), y)
    out["lt_ot_prior_accuracy"] = accuracy(ot_zero_shot(x, class_emb, epsilon, class_prior=prior), y)
  return out


def _argmax(image_emb: jax.Array, class_emb: jax.Array, epsilon: float) -> jax.Array:
  del epsilon  # CLIP's argmax has no entropic regularisation
  return zero_shot_predict(image_emb, class_emb)


#: Zero-shot inference by name (``classify``'s ``method``), each ``(image_emb, class_emb, epsilon) -> class ids``:
#: CLIP's argmax, or OT-CLIP's transductive OT inference (Shi, Fan & Yan, ICML 2024, Sec. 5).
ZERO_SHOT: Registry = Registry("zero-shot method")
ZERO_SHOT.register("argmax")(_argmax)
ZERO_SHOT.register("ot")(ot_zero_shot)


def classify(image_emb: jax.Array, class_emb: jax.Array, method: str, epsilon: float) -> jax.Array:
  """Class ids by CLIP's argmax (``method="argmax"``) or OT-CLIP's transductive OT inference (``"ot"``)."""
  if method not in ZERO_SHOT:
    raise InputError(f"zero_shot method={method!r}; allowed: 'argmax' (CLIP), 'ot' (OT-CLIP's transductive inference)")
  return ZERO_SHOT.get(method)(image_emb, class_emb, epsilon)


def class_embedding(class_text_emb: jax.Array) -> jax.Array:
  """[K, P, d] text embeddings of P prompts per class -> [K, d] unit prompt ensembles (Radford et al., Sec. 3.1.4)."""
  return l2_normalize(jnp.mean(class_text_emb, axis=1))
