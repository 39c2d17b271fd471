"""Auto-regressive rollouts of an operator model and their L2 relative error (L2RE).

Hao et al., "DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
Pre-Training", ICML 2024: at test time the model is rolled out auto-regressively from the first
``t_in`` frames of each test trajectory (Sec. 3.1), and the L2RE of the first predicted frame and
of the whole rollout is reported per data set (Sec. 4, "L2RE"), as the official code computes
them (thu-ml/DPOT @ dcd2f9a, train_temporal.py).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import check
from jaxlab.pde.losses import relative_l2_loss


def rollout(apply: Callable[..., Any], params: Any, x0: jax.Array, steps: int, t_out: int,
            channel_mask: jax.Array | None = None, pad_value: float = 0.0) -> jax.Array:
  """Auto-regressive predictions ``(n, X, Y, steps, C)`` from the first ``t_in`` frames ``x0``.

  Each call predicts ``t_out`` frames from the latest ``t_in`` (the window slides by ``t_out``),
  as DPOT's test-time rollout (Sec. 3.1; train_temporal.py:264-274); the last call's extra frames
  are dropped. ``channel_mask`` ``(n, C)``: padded channels are set to ``pad_value`` in every
  prediction, the value the model saw there in training. Under zero padding the loss ignores
  those outputs, so they are unconstrained and, fed back into the window, drove rollouts off
  their training distribution (they exploded); under DPOT's ones the model was trained to output
  ones there, and the official rollout feeds its own approximate ones back, here the exact ones.
  """
  # steps and t_out are Python ints (static under jit); a 0-step rollout has no error to report.
  for name, value, what in (("steps", steps, "frames to roll out"), ("t_out", t_out, "frames per call")):
    check(isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1,
          f"{name}={value!r} must be an int >= 1 ({what})")
  check(x0.ndim == 5, f"x0 has shape {x0.shape}; must be (n, X, Y, t_in, C)")
  keep = None if channel_mask is None else jnp.asarray(channel_mask, x0.dtype)[:, None, None, None, :]

  def body(window, _):
    out = apply({"params": params}, window)
    pred = out[0] if isinstance(out, tuple) else out
    if keep is not None:
      pred = pred * keep + pad_value * (1 - keep)
    return jnp.concatenate([window[..., t_out:, :], pred], axis=-2), pred

  calls = -(-steps // t_out)
  _, preds = jax.lax.scan(body, x0, None, length=calls)       # (calls, n, X, Y, t_out, C)
  preds = jnp.moveaxis(preds, 0, 3)                            # (n, X, Y, calls, t_out, C)
  return preds.reshape(preds.shape[:3] + (calls * t_out, preds.shape[-1]))[..., :steps, :]


def rollout_l2re(apply: Callable[..., Any], params: Any, evals: dict[str, dict[str, np.ndarray]],
                 t_out: int, pad_value: float = 0.0) -> dict[str, jax.Array]:
  """Per data set: mean L2RE of the first predicted frame and of the whole rollout (Hao et al., Sec. 4).

  L2RE of one test trajectory = mean over its real channels of ||pred - y|| / ||y||, norms over
  (X, Y, time) (the official ``SimpleLpLoss``); padded channels are masked out, as by the
  official test mask (utils/griddataset.py:109-115, 162), and so are the points and channels
  outside an entry's ``score_mask`` (n, X, Y, C), when it has one (a set resampled from a
  coarser grid is scored at its own points). The rollout L2RE is the official
  ``test_l2_full`` (train_temporal.py:277). ``evals`` is :func:`jaxlab.pde.data.rollout_eval_data`'s
  output; ``pad_value`` that of its padded channels.
  """
  out = {}
  for name, e in evals.items():
    if "score_mask" in e:
      mask = jnp.asarray(e["score_mask"][:, :, :, None, :], jnp.float32)
    else:
      mask = jnp.asarray(e["channel_mask"][:, None, None, None, :], jnp.float32)
    y = jnp.asarray(e["y"])
    check(y.ndim == 5 and y.shape[3] >= 1, f"evals[{name!r}]['y'] has shape {y.shape}; must be (n, X, Y, steps, C) "
          "with steps >= 1 (a 0-frame rollout has no L2RE)")
    pred = rollout(apply, params, jnp.asarray(e["x"]), y.shape[3], t_out, e["channel_mask"], pad_value)
    n = y.shape[0]
    out[f"l2re_1step/{name}"] = relative_l2_loss(pred[..., :1, :], y[..., :1, :], mask) / n
    out[f"l2re_rollout/{name}"] = relative_l2_loss(pred, y, mask) / n
  return out


def operator_fns(apply: Callable[..., Any], t_out: int, pad_value: float, evals: dict[str, dict[str, np.ndarray]]
                 ) -> dict[str, Callable[..., Any]]:
  """The inference functions of a trained operator model, each ``fn(params, ...)``, pure and jit-able.

  Args:
    apply: ``model.apply`` (DPOT or FNO-2D; a DPOT with a class head returns ``(frames, logits)``).
    t_out: frames the model predicts per step.
    pad_value: the value of padded channels (``data.channel_padding``).
    evals: the default test data of ``l2re`` (per data set ``x``, ``y``, ``channel_mask``, ``score_mask``).

  Returns:
    ``predict(params, x)``: the next ``t_out`` frames ``(n, X, Y, t_out, C)`` from ``t_in`` frames;
    ``rollout(params, x0, steps, channel_mask=None)``: :func:`rollout` (``steps`` static);
    ``l2re(params, test=None)``: :func:`rollout_l2re` on ``test`` (default: ``evals``).
  """
  def predict(params: Any, x: jax.Array) -> jax.Array:
    out = apply({"params": params}, x)
    return out[0] if isinstance(out, tuple) else out  # DPOT with a classifier head: (frames, logits)

  def run_rollout(params: Any, x0: jax.Array, steps: int, channel_mask: jax.Array | None = None) -> jax.Array:
    return rollout(apply, params, x0, steps, t_out, channel_mask, pad_value)

  def l2re(params: Any, test: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, jax.Array]:
    return rollout_l2re(apply, params, evals if test is None else test, t_out, pad_value)

  return {"predict": predict, "rollout": run_rollout, "l2re": l2re}
