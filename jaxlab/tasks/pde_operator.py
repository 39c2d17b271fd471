"""Auto-regressive operator learning on generated PDE data (DPOT or FNO), through the shared step.

Hao et al., "DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
Pre-Training", ICML 2024: predict the next frame(s) from ``t_in`` frames of a trajectory,
trained on a weighted mixture of data sets with the official relative-L2 loss and, optionally,
denoising noise on the inputs (Sec. 3.1). Evaluation rolls the model out auto-regressively on
each data set's test trajectories and reports the L2 relative error (L2RE) of the first step
and of the whole rollout, per data set (Sec. 4, "L2RE"). The data are generated locally
(``jaxlab.pde.data``) and cached on disk once, or, with ``data.source = "files"``, read from the
field's files named by a DPOT-style master table (``jaxlab.pde.data.files``, ``configs/dpot_files.py``),
sets on other grids resampled to ``data.resolution`` as DPOT does.

The protocol follows the official code (thu-ml/DPOT @ dcd2f9a) by default; each difference
from jaxlab's earlier protocol is a config key (``configs/dpot_pde.py`` documents them):
``data.mixture_rule`` (draw set i ~ n_train_i x weight_i, utils/griddataset.py:54),
``data.channel_padding`` (pad missing channels with ones and train on them, griddataset.py:98,
157), ``data.keep_w0`` (serve FNO's ``u`` frames t = 1..T, without w0) and the per-set test
horizon ``t_test`` (utils/make_master_file.py, :data:`jaxlab.pde.data.DPOT_T_TEST`).

Every bad setting is refused before any data are generated or anything is compiled, with one
line naming the config key (:func:`jaxlab.tasks.pde_config.check_config`). The pieces live with
the method: the ``data`` block in :mod:`jaxlab.tasks.pde_data`, the model in
:mod:`jaxlab.tasks.pde_model`, rollouts and the L2RE in :mod:`jaxlab.pde.rollout`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxlab.pde.data import MIXTURE_RULES, mixture_batch
from jaxlab.tasks.pde_data import data_source, evaluation_data, load_datasets, model_resolution, pad_value
from jaxlab.pde.losses import make_loss_fn
from jaxlab.tasks.pde_model import paper_count
from jaxlab.tasks.pde_config import check_config
from jaxlab.pde.rollout import operator_fns, rollout_l2re
from jaxlab.train.context import TaskContext
from jaxlab.data_fingerprint import FINGERPRINT_FILE, fingerprint_text
from jaxlab.train.task import TASKS, Inference, Task
from jaxlab.train.workdir import Workdir


@TASKS.register("pde_operator")
def pde_operator(config: ml_collections.ConfigDict, ctx: TaskContext) -> Task:
  """The task of ``configs/dpot_pde.py`` (see there for every key), with its
  :class:`~jaxlab.train.task.Inference` (the same model and test data).

  Inference functions, each ``fn(params, ...)``: ``predict(params, x)``, the next ``t_out``
  frames ``(n, X, Y, t_out, C)`` from ``t_in`` frames ``x`` ``(n, X, Y, t_in, C)``;
  ``rollout(params, x0, steps, channel_mask=None)``, :func:`jaxlab.pde.rollout.rollout` with the
  run's ``t_out`` and padding value (``channel_mask`` ``(n, C)``: 1 for a data set's real channels);
  and ``l2re(params, test=None)``, :func:`jaxlab.pde.rollout.rollout_l2re` (the task's evaluation) on ``test``
  (default: the run's test trajectories). ``data``: ``test`` (per data set ``x``, ``y``,
  ``channel_mask``, ``score_mask``), ``t_in``, ``t_out``, ``channels``, ``pad_value``.
  """
  del ctx  # host batches are built per row, from the rows the trainer asks for
  d = config.data
  init_from = config.get("init_from", None)
  fine_tuning = init_from is not None and init_from.get("workdir", "")
  pretrained = Workdir(init_from.workdir).saved_config() if fine_tuning else None
  _, channels, model = check_config(config, pretrained)
  datasets = load_datasets(config)
  # Generated data are a pure function of the config, which the resume check compares already; files
  # can change under the same config (a set added to the master table, a file replaced): fingerprinted.
  workdir_files = {}
  if data_source(config) == "files":
    from jaxlab.pde.data.files import data_fingerprint, verify_records  # noqa: PLC0415 - h5py only for files
    workdir_files[FINGERPRINT_FILE] = fingerprint_text(data_fingerprint(datasets))
    if d.get("verify_files", False):  # every record of every set read once, now rather than when first drawn
      for ds in datasets:
        verify_records(ds.trajectories)
  weights = list(d.weights) if d.weights else [1.0] * len(datasets)
  rule, pad = d.get("mixture_rule", MIXTURE_RULES[0]), pad_value(config)
  # DPOT's ones are trained on (its training mask is all ones); zeros are masked out of the loss
  train_on_padding = d.get("channel_padding", "ones") == "ones"
  loss_fn = make_loss_fn(model.apply, noise_scale=config.noise_scale)
  evals = evaluation_data(config, datasets, channels)
  grid = model_resolution(config)  # data.resolution, strided by a files run's downsample

  def init_params(rng):
    x = jnp.zeros((1, grid, grid, config.t_in, channels), jnp.float32)
    return model.init(rng, x)["params"]

  def host_batch(step, rows, seed):
    b = mixture_batch(datasets, weights, seed, step, config.batch_size, rows, config.t_in, config.t_out,
                      num_channels=channels, rule=rule, pad_value=pad, resolution=d.resolution)
    mask = np.ones_like(b["channel_mask"]) if train_on_padding else b["channel_mask"]
    return {"x": b["x"], "y": b["y"], "mask": mask[:, None, None, None, :].astype(np.float32)}

  def evaluate(state, rng):
    del rng
    return rollout_l2re(model.apply, state.params, evals, config.t_out, pad)

  fns = operator_fns(model.apply, config.t_out, pad, evals)
  fns = {"predict": jax.jit(fns["predict"]), "rollout": jax.jit(fns["rollout"], static_argnames=("steps",)),
         "l2re": jax.jit(fns["l2re"])}
  inference = Inference(model=model, fns=fns, data={"test": evals, "t_in": config.t_in, "t_out": config.t_out,
                                                    "channels": channels, "pad_value": pad})
  return Task(init_params=init_params, loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              throughput={"samples": config.batch_size},
              description=f"{config.model.name} on {'+'.join(ds.name for ds in datasets)}" + paper_count(config),
              # evaluation only, and the Soft MoE implementation (the same function on any platform)
              resume_safe=("data.eval_trajectories", "data.rollout_steps", "model.moe_impl"),
              workdir_files=workdir_files, inference=inference)
