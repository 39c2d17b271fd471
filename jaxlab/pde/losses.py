"""DPOT's training objective: the official relative-L2 loss, denoising noise injection, a train-step loss_fn."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxlab.errors import check

Array = jax.Array


def _norm_over_space(v: Array) -> Array:
  """L2 norm over every axis but the first (batch) and last (channel) -> (B, C), with a zero gradient at 0
  (as ``torch.norm``), where ``jnp.linalg.norm`` would give NaN."""
  sq = jnp.sum(jnp.square(v.reshape(v.shape[0], -1, v.shape[-1])), axis=1)
  positive = sq > 0
  return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def relative_l2_loss(pred: Array, target: Array, mask: Array | None = None) -> Array:
  """The official DPOT training loss ``SimpleLpLoss(size_average=False)`` (utils/criterion.py).

    loss = sum_b (1 / C_b) sum_c ||pred[b,...,c] - y[b,...,c]||_2 / (||y[b,...,c]||_2 + 1e-8),

  norms over all spatial and time positions of one (sample, channel); a *sum* over the batch
  and a mean over channels. With ``mask`` (broadcastable to pred, e.g. (B, X, Y, 1, C)), pred
  and target are multiplied by it and C_b is the number of channels whose mask is non-zero
  somewhere (a fully masked channel contributes 0). Computed in float32 (at least) whatever the
  inputs' dtype: a bfloat16 prediction's norms and sums would otherwise round to 8 bits.
  """
  check(pred.shape == target.shape, f"pred shape {tuple(pred.shape)} != target shape {tuple(target.shape)}")
  dtype = jnp.promote_types(jnp.result_type(pred, target), jnp.float32)
  pred, target = pred.astype(dtype), target.astype(dtype)
  mask = None if mask is None else mask.astype(dtype)
  if mask is not None:
    pred, target = pred * mask, target * mask
    mask_sum = jnp.sum(jnp.broadcast_to(mask, pred.shape).reshape(pred.shape[0], -1, pred.shape[-1]), axis=1)
    channels = jnp.count_nonzero(mask_sum, axis=-1).astype(pred.dtype)                # (B,)
  else:
    channels = jnp.asarray(pred.shape[-1], pred.dtype)
  ratio = _norm_over_space(pred - target) / (_norm_over_space(target) + 1e-8)         # (B, C)
  return jnp.sum(jnp.sum(ratio, axis=-1) / channels)


def add_denoising_noise(x: Array, rng: Array, noise_scale: float) -> Array:
  """DPOT's noise injection (Sec. 3.1; train_temporal.py:205): x + s * ||x||_{X,Y,T} * N(0, 1) per sample and channel.

  Faithful to the official code, the norm is the L2 norm over all X * Y * T values of one (sample,
  channel), not their rms: the noise at a grid point has standard deviation s * sqrt(X Y T) * rms(x).
  So the same ``noise_scale`` is more noise at a finer grid or a longer window: 5e-4 (the official
  pre-training value, at 128^2 x 10 frames) is 0.20 rms there, 0.10 rms at 64^2 x 10 frames, where
  s = 1e-3 gives the paper's relative noise. Under DPOT's ones padding a padded channel gets
  s * sqrt(X Y T) noise too, as officially. Norm and noise are drawn in float32 (at least) and the
  sum rounded to ``x``'s dtype, so a bfloat16 step sees the float32 step's noise.
  """
  dtype = jnp.promote_types(x.dtype, jnp.float32)
  wide = x.astype(dtype)
  scale = jnp.sqrt(jnp.sum(jnp.square(wide), axis=(1, 2, 3), keepdims=True))
  return (wide + noise_scale * scale * jax.random.normal(rng, x.shape, dtype)).astype(x.dtype)


def make_loss_fn(apply_fn: Callable[..., Any], *, noise_scale: float = 0.0
                 ) -> Callable[[Any, dict, Array, Any], tuple[Array, dict[str, Array]]]:
  """``loss_fn(params, batch, rng, extra)`` for ``jaxlab.train.make_train_step``.

  ``batch`` = {"x": (B, X, Y, T_in, C), "y": (B, X, Y, T_out, C), optional "mask"};
  ``apply_fn(variables, x)`` is e.g. ``model.apply``. One-step training (T_ar = 1, the
  official pre-training setting) with the relative-L2 loss; a class-logit output, if the model
  has one, is ignored (the official total loss gives it weight 0). ``noise_scale`` > 0 adds
  the denoising noise (the official pre-training configs use 5e-4, 5e-5 for L; fine-tuning 0),
  whose size per grid point grows with sqrt(X Y T_in) (:func:`add_denoising_noise`).
  """
  def loss_fn(params, batch, rng, extra):
    del extra
    x = batch["x"]
    if noise_scale:
      x = add_denoising_noise(x, rng, noise_scale)
    out = apply_fn({"params": params}, x)
    pred = out[0] if isinstance(out, tuple) else out
    loss = relative_l2_loss(pred, batch["y"], batch.get("mask"))
    return loss, {"rel_l2_per_sample": loss / x.shape[0]}
  return loss_fn
