"""OT-CLIP losses by name, each ``(image_emb, text_emb, logit_scale, logit_bias, **kwargs) -> loss``."""

from __future__ import annotations

from typing import Any, Callable

import jax

from jaxlab.ot_clip import contrastive, ot_losses
from jaxlab.registry import Registry

LOSSES: Registry = Registry("OT-CLIP loss")


def _ignore_bias(fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
  def loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, logit_bias: Any = None,
           **kwargs: Any) -> jax.Array:
    del logit_bias  # only SigLIP has one
    return fn(image_emb, text_emb, logit_scale, **kwargs)
  loss.__doc__ = fn.__doc__
  return loss


LOSSES.register("siglip")(contrastive.siglip_loss)
for _name, _fn in [("infonce", contrastive.clip_loss),
                   ("one_sided_ot", ot_losses.one_sided_ot_loss),
                   ("entropic_ot", ot_losses.entropic_ot_loss),
                   ("unbalanced_ot", ot_losses.unbalanced_ot_loss),
                   ("dbot", ot_losses.dbot_loss),
                   ("fgw", ot_losses.fgw_loss),
                   ("ufgw", ot_losses.ufgw_loss)]:
  LOSSES.register(_name)(_ignore_bias(_fn))


def get_loss(name: str, **kwargs: Any) -> Callable[..., jax.Array]:
  """The named loss with its hyper-parameters bound: ``(x, y, logit_scale, logit_bias) -> loss``."""
  fn = LOSSES.get(name)
  return lambda x, y, logit_scale, logit_bias=None: fn(x, y, logit_scale, logit_bias, **kwargs)
