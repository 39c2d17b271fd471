"""OT-CLIP (Shi, Fan & Yan, ICML 2024): CLIP's loss as inverse optimal transport, generalised.

Losses (pure functions of embeddings): ``clip_loss``, ``siglip_loss``, ``one_sided_ot_loss``
(= InfoNCE), ``entropic_ot_loss``, ``unbalanced_ot_loss``, ``dbot_loss``, ``fgw_loss``,
``ufgw_loss``; by name through ``LOSSES`` / ``get_loss``, which also keeps the B x B coupling split
by rows over a mesh axis (``axis_name``) or chunked on one device (``chunk_size``): ``coupling``. Inference: ``zero_shot_predict``,
``ot_zero_shot`` (uniform or known class prior), ``fgw_zero_shot``; selective classification in
``selective``. ``TwoTower`` + ``make_two_tower_loss`` plug into ``jaxlab.train.make_train_step``.
Bad input raises ``jaxlab.errors.InputError`` naming the value and what is allowed (``checks``).
A Flax NNX ``TwoTower`` of the same parameter layout is in ``jaxlab.ot_clip.nnx`` (imported on first use).
"""

from jaxlab.lazy_submodules import lazy_submodules as _lazy_submodules

from jaxlab.ot_clip.contrastive import clip_loss, siglip_loss
from jaxlab.ot_clip.inference import (check_class_prior, fgw_zero_shot, fgw_zero_shot_plan, ot_zero_shot,
                                      ot_zero_shot_plan, zero_shot_predict)
from jaxlab.ot_clip.ot_losses import (dbot_loss, entropic_ot_loss, fgw_loss, kl_from_identity,
                                      one_sided_ot_loss, ufgw_loss, unbalanced_ot_loss)
from jaxlab.ot_clip.registry import LOSSES, get_loss
from jaxlab.ot_clip.selective import (aurc, partial_ot_confidence, plan_confidence, risk_coverage_curve,
                                      selective_risk)
from jaxlab.ot_clip.train_loss import make_two_tower_loss
from jaxlab.ot_clip.two_tower import TwoTower

__all__ = [
    "aurc", "check_class_prior", "clip_loss", "dbot_loss", "entropic_ot_loss", "fgw_loss",
    "fgw_zero_shot", "fgw_zero_shot_plan", "get_loss", "kl_from_identity", "LOSSES", "make_two_tower_loss",
    "nnx", "one_sided_ot_loss", "ot_zero_shot", "ot_zero_shot_plan", "partial_ot_confidence", "plan_confidence",
    "risk_coverage_curve", "selective_risk", "siglip_loss", "TwoTower", "ufgw_loss", "unbalanced_ot_loss",
    "zero_shot_predict",
]


__getattr__, __dir__ = _lazy_submodules(__name__, ("nnx",), __all__)  # flax.nnx only for who uses it
