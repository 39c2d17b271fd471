"""OT-CLIP losses by name, each ``(image_emb, text_emb, logit_scale, logit_bias, **kwargs) -> loss``."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import jax
import numpy as np

from jaxlab.errors import InputError
from jaxlab.ot_clip import contrastive, coupling, ot_losses
from jaxlab.ot_clip.blocked import ROW_BLOCKED
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


def get_loss(name: str, *, chunk_size: int | None = None, axis_name: Any = None, mesh: Any = None,
             **kwargs: Any) -> Callable[..., jax.Array]:
  """The named loss with its hyper-parameters bound: ``(x, y, logit_scale, logit_bias) -> loss``.

  Bad input fails here, not at the first step: an unknown name or hyper-parameter, or a bad
  hyper-parameter value (the loss is traced once on a 2 x 2 batch with jax.eval_shape, which
  runs every check and computes nothing). Hyper-parameters must be scalars here (per-column
  DBOT bounds depend on the batch size: call ``dbot_loss`` directly).

  ``chunk_size``, ``axis_name`` and ``mesh`` say where the B x B coupling lives
  (``jaxlab.ot_clip.coupling``); every form computes the dense definition's value and gradient.
  The split and chunked forms solve Sinkhorn-type plans with log-domain updates (the dense
  balanced solver's absorbed updates are the same updates) and have no ``implicit``/``use_ott``.

  Args:
    name: a name of :data:`LOSSES`.
    chunk_size: visit the coupling ``chunk_size`` rows at a time, recomputing each block from the
      embeddings (online log-sum-exp, rematerialised in the backward pass): memory O(chunk_size x B)
      instead of O(B^2). Must divide the rows (per device, when they are split). None: no chunking.
    axis_name: the mesh axis (or tuple of axes) the batch rows are split over. Inside
      ``jax.shard_map`` over that axis (or ``pmap``) the call takes this device's rows and returns
      the global batch's loss, with explicit collectives (in ``pmap``, as for any ``psum``-ed loss,
      ``pmean`` the parameters' gradients). Under ``jax.jit`` it names the axis of
      the mesh set by ``jax.set_mesh`` (or ``mesh``) to split the coupling's rows over. None:
      the rows are split over the embeddings' ``Explicit`` mesh axes, if any (``jax.make_mesh``'s
      default), else the dense definition runs and the compiler places it.
    mesh: the ``jax.sharding.Mesh`` of ``axis_name`` when the call is not under ``jax.set_mesh``
      (the two-tower tasks pass theirs).
    **kwargs: the loss's hyper-parameters (``hyperparameter_names``).

  Returns:
    ``loss(x, y, logit_scale, logit_bias=None) -> scalar``.

  Examples:
    >>> import jax
    >>> from jaxlab.ot_clip import get_loss
    >>> x, y = jax.random.normal(jax.random.key(0), (2, 64, 8))
    >>> dense = get_loss("entropic_ot", num_iterations=5)(x, y, 10.0)
    >>> chunked = get_loss("entropic_ot", num_iterations=5, chunk_size=16)(x, y, 10.0)
    >>> bool(abs(dense - chunked) < 1e-5)
    True
  """
  fn = LOSSES.get(name)
  allowed = hyperparameter_names(fn)
  for key, value in kwargs.items():
    if key not in allowed:
      raise InputError(f"loss {name!r} has no hyper-parameter {key!r}; allowed: {', '.join(allowed) or 'none'}")
    if np.ndim(value) != 0:
      raise InputError(f"loss {name!r}: hyper-parameter {key} must be a scalar, got shape {np.shape(value)}")
  chunk_size = coupling.check_chunk_size(chunk_size)
  axes = coupling.check_axis_name(axis_name)
  if mesh is not None and axes is None:
    raise InputError(f"loss {name!r}: mesh= says where axis_name is, but axis_name is None; "
                     "allowed: mesh together with axis_name (e.g. 'data')")
  if chunk_size is not None or axes is not None:
    coupling.check_row_form(name, kwargs)
  dummy = jax.ShapeDtypeStruct((2, 2), np.float32)
  jax.eval_shape(lambda x, y: fn(x, y, 10.0, 0.0, **kwargs), dummy, dummy)
  blocked = ROW_BLOCKED.get(name)

  def loss(x: Any, y: Any, logit_scale: Any, logit_bias: Any = None) -> jax.Array:
    return coupling.call_loss(fn, blocked, x, y, logit_scale, logit_bias, kwargs, chunk_size=chunk_size,
                              axis_name=axes, mesh=mesh)
  return loss
