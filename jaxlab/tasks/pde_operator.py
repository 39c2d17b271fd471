"""Auto-regressive operator learning on generated PDE data (DPOT or FNO), through the shared step.

Hao et al., "DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
Pre-Training", ICML 2024: predict the next frame(s) from ``t_in`` frames of a trajectory,
trained on a weighted mixture of data sets (channels zero-padded to a common count and masked
in the loss) with the official relative-L2 loss and, optionally, denoising noise on the inputs.
Evaluation rolls the model out auto-regressively on each data set's test trajectories and
reports the L2 relative error (L2RE) of the first step and of the whole rollout, per data set.
The data are generated locally (``jaxlab.pde.data``) and cached on disk once.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxlab.errors import InputError, check
from jaxlab.pde.data import dataset_spec, fno_navier_stokes, load_dataset, mixture_batch, rollout_eval_data
from jaxlab.pde.fno import FNO2d
from jaxlab.pde.losses import make_loss_fn, relative_l2_loss
from jaxlab.pde.sizes import dpot_config
from jaxlab.pde.dpot import DPOT
from jaxlab.train.task import TASKS, Task


def _spec(entry: Any, resolution: int) -> Any:
  """A data set from its config entry: ``{"family": "ns_fno", "viscosity": 1e-3, "trajectories": n, ...}``."""
  entry = dict(entry)
  family = entry.pop("family")
  n = entry.pop("trajectories")
  seed = entry.pop("seed", 0)
  if family == "ns_fno":
    return fno_navier_stokes(entry.pop("viscosity"), n, seed=seed, resolution=resolution, **entry)
  return dataset_spec(family, n, seed=seed, resolution=resolution, **entry)


def build_model(config: ml_collections.ConfigDict, channels: int, resolution: int) -> Any:
  m = dict(config.model)
  name = m.pop("name")
  io = dict(in_channels=channels, out_channels=channels, in_timesteps=config.t_in, out_timesteps=config.t_out)
  if name == "dpot":
    size = m.pop("size")
    return DPOT(**dpot_config(size, img_size=resolution, **io, **m))
  if name == "fno":
    return FNO2d(**io, **m)
  raise InputError(f"model.name={name!r}; choose 'dpot' or 'fno'")


def rollout(apply, params: Any, x0: jax.Array, steps: int, t_out: int) -> jax.Array:
  """Auto-regressive predictions ``(n, X, Y, steps, C)`` from the first ``t_in`` frames ``x0``."""
  def body(window, _):
    out = apply({"params": params}, window)
    pred = out[0] if isinstance(out, tuple) else out
    return jnp.concatenate([window[..., t_out:, :], pred], axis=-2), pred

  calls = -(-steps // t_out)
  _, preds = jax.lax.scan(body, x0, None, length=calls)       # (calls, n, X, Y, t_out, C)
  preds = jnp.moveaxis(preds, 0, 3)                            # (n, X, Y, calls, t_out, C)
  return preds.reshape(preds.shape[:3] + (calls * t_out, preds.shape[-1]))[..., :steps, :]


@TASKS.register("pde_operator")
def pde_operator(config: ml_collections.ConfigDict) -> Task:
  """The task of ``configs/dpot_pde.py`` (see there for every key)."""
  d = config.data
  specs = [_spec(entry, d.resolution) for entry in d.sets]
  datasets = [load_dataset(s, d.cache_dir or None, num_test=d.num_test) for s in specs]
  weights = list(d.weights) if d.weights else [1.0] * len(datasets)
  check(len(weights) == len(datasets), f"data.weights has {len(weights)} entries for {len(datasets)} data sets")
  channels = max(ds.num_channels for ds in datasets)
  model = build_model(config, channels, d.resolution)
  loss_fn = make_loss_fn(model.apply, noise_scale=config.noise_scale)
  evals = rollout_eval_data(datasets, config.t_in, d.rollout_steps or None, num_channels=channels,
                            max_trajectories=d.eval_trajectories)

  def init_params(rng):
    x = jnp.zeros((1, d.resolution, d.resolution, config.t_in, channels), jnp.float32)
    return model.init(rng, x)["params"]

  def host_batch(step, rows, seed):
    b = mixture_batch(datasets, weights, seed, step, config.batch_size, rows, config.t_in, config.t_out,
                      num_channels=channels)
    return {"x": b["x"], "y": b["y"], "mask": b["channel_mask"][:, None, None, None, :].astype(np.float32)}

  def evaluate(state, rng):
    del rng
    out = {}
    for name, e in evals.items():
      mask = jnp.asarray(e["channel_mask"][:, None, None, None, :], jnp.float32)
      y = jnp.asarray(e["y"])
      pred = rollout(model.apply, state.params, jnp.asarray(e["x"]), y.shape[3], config.t_out)
      n = y.shape[0]
      out[f"l2re_1step/{name}"] = relative_l2_loss(pred[..., :1, :], y[..., :1, :], mask) / n
      out[f"l2re_rollout/{name}"] = relative_l2_loss(pred, y, mask) / n
    return out

  return Task(init_params=init_params, loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              description=f"{config.model.name} on {'+'.join(ds.name for ds in datasets)}")
