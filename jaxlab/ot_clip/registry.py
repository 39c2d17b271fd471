"""OT-CLIP losses by name, each ``(image_emb, text_emb, logit_scale, logit_bias, **kwargs) -> loss``."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import jax
import numpy as np

from jaxlab.errors import InputError
from jaxlab.ot_clip import contrastive, ot_losses
from jaxlab.registry import Registry

#: OT-CLIP losses by name (``config.loss``), for :func:`get_loss`.
LOSSES: Registry = Registry("OT-CLIP loss")


def _ignore_bias(fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
  @functools.wraps(fn)  # keeps the docstring, and the signature for ``hyperparameter_names``
  def loss(image_emb: jax.Array, text_emb: jax.Array, logit_scale: Any, logit_bias: Any = None,
           **kwargs: Any) -> jax.Array:
    del logit_bias  # only SigLIP has one
    return fn(image_emb, text_emb, logit_scale, **kwargs)
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


def hyperparameter_names(fn: Callable[..., Any]) -> tuple[str, ...]:
  """The keyword hyper-parameters a registered loss accepts (after x, y, scale and bias)."""
  fn = inspect.unwrap(fn)
  names = [p.name for p in list(inspect.signature(fn).parameters.values())[3:]
           if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "logit_bias"]
  if fn is ot_losses.ufgw_loss:  # forwards the rest to fgw_loss
    names += [n for n in hyperparameter_names(ot_losses.fgw_loss) if n not in names]
  elif any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()):
    names += list(ot_losses.SINKHORN_OPTIONS)
  return tuple(names)


def get_loss(name: str, **kwargs: Any) -> Callable[..., jax.Array]:
  """The named loss with its hyper-parameters bound: ``(x, y, logit_scale, logit_bias) -> loss``.

  Bad input fails here, not at the first step: an unknown name or hyper-parameter, or a bad
  hyper-parameter value (the loss is traced once on a 2 x 2 batch with jax.eval_shape, which
  runs every check and computes nothing). Hyper-parameters must be scalars here (per-column
  DBOT bounds depend on the batch size: call ``dbot_loss`` directly).
  """
  fn = LOSSES.get(name)
  allowed = hyperparameter_names(fn)
  for key, value in kwargs.items():
    if key not in allowed:
      raise InputError(f"loss {name!r} has no hyper-parameter {key!r}; allowed: {', '.join(allowed) or 'none'}")
    if np.ndim(value) != 0:
      raise InputError(f"loss {name!r}: hyper-parameter {key} must be a scalar, got shape {np.shape(value)}")
  dummy = jax.ShapeDtypeStruct((2, 2), np.float32)
  jax.eval_shape(lambda x, y: fn(x, y, 10.0, 0.0, **kwargs), dummy, dummy)
  return lambda x, y, logit_scale, logit_bias=None: fn(x, y, logit_scale, logit_bias, **kwargs)
