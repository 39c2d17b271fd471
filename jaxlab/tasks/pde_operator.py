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
line naming the config key (:func:`check_config`).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxlab.errors import InputError, check
from jaxlab.pde.data import (MIXTURE_RULES, DatasetSpec, FNO_VISCOSITIES, PDEDataset, dataset_spec, dpot_t_test,
                             fno_navier_stokes, get_family, load_dataset, mixture_batch, rollout_eval_data)
from jaxlab.pde.data.loader import default_num_test
from jaxlab.pde.dpot import DPOT
from jaxlab.pde.fno import FNO2d
from jaxlab.pde.losses import make_loss_fn, relative_l2_loss
from jaxlab.pde.sizes import dpot_config
from jaxlab.tasks.inference import Inference
from jaxlab.train.task import TASKS, Task

MODELS = ("dpot", "fno")

# data.channel_padding: what a data set with fewer channels than the model gets in the missing ones.
# "ones": DPOT's (utils/griddataset.py:98 pads with torch.ones; the training mask is all ones, :157,
# so the model is trained to carry the ones forward; only the test mask drops them, :162).
# "zeros_masked": zeros, left out of the training loss (jaxlab's earlier rule). Evaluation
# masks padded channels out of the L2RE under both.
CHANNEL_PADDINGS = {"ones": 1.0, "zeros_masked": 0.0}


# data.source: where the data sets come from. "generated": data.sets, made with exponax and cached;
# "files": a master table of the field's files (data.master, data.names; jaxlab.pde.data.files).
SOURCES = ("generated", "files")

# ---------------------------------------------------------------- data


def data_source(config: Any) -> str:
  """``data.source`` of a config or its dict ("generated" when absent), checked."""
  source = config["data"].get("source", "generated")
  check(source in SOURCES, f"data.source={source!r}; allowed: {', '.join(map(repr, SOURCES))}")
  return source


def _file_sets(config: Any) -> list:
  from jaxlab.pde.data.files import file_sets  # noqa: PLC0415 - h5py only for runs on files
  return file_sets(config)


def _widest(config: Any) -> int:
  """The most channels of any configured set (a config or its dict)."""
  if data_source(config) == "files":
    from jaxlab.pde.data.files.configured import widest_channels  # noqa: PLC0415 - h5py only for files
    return widest_channels(config)
  return max(get_family(entry["family"]).num_channels for entry in config["data"]["sets"])

def dataset_from_entry(entry: Any, resolution: int, index: int = 0) -> DatasetSpec:
  """A data set from its config entry, e.g. ``{"family": "ns_fno", "viscosity": 1e-3, "trajectories": 200}``.

  Keys: ``family``, ``trajectories``, optional ``seed``, ``name`` and ``t_test`` (the evaluation
  horizon, read by :func:`served_sets`), and any parameter of the family. An ``ns_fno`` entry at
  one of FNO's viscosities gets FNO's frame count and our dt (``fno_navier_stokes``); other
  viscosities need ``num_frames`` and ``dt`` chosen by the caller. A bad entry raises one line
  that starts with ``data.sets[index]``.
  """
  where = f"data.sets[{index}]"
  check(isinstance(entry, (Mapping, ml_collections.ConfigDict)),
        f"{where}={entry!r} must be a dict with 'family', 'trajectories' and the family's parameters")
  entry = dict(entry)
  entry.pop("t_test", None)
  for key in ("family", "trajectories"):
    check(key in entry, f"{where}={entry} has no {key!r} key")
  family, n = entry.pop("family"), entry.pop("trajectories")
  check(_is_int(n) and n >= 1, f"{where}.trajectories={n!r} must be an int >= 1")
  seed = entry.pop("seed", 0)
  viscosity = entry.get("viscosity", 1e-3)
  is_number = isinstance(viscosity, numbers.Real) and not isinstance(viscosity, bool)
  try:
    get_family(family)  # unknown family: one line listing the known ones
    if family == "ns_fno" and is_number and any(abs(viscosity - v) <= 1e-12 for v in FNO_VISCOSITIES):
      return fno_navier_stokes(entry.pop("viscosity", 1e-3), n, seed=seed, resolution=resolution, **entry)
    if family == "ns_fno" and "name" not in entry and is_number:
      entry["name"] = f"ns_fno_nu{viscosity:.0e}"
    return dataset_spec(family, n, seed=seed, resolution=resolution, **entry)
  except InputError as e:  # the spec's checks name the parameter; say which entry it is in
    raise InputError(f"{where}: {e}") from None


def dataset_specs(config: ml_collections.ConfigDict) -> list[DatasetSpec]:
  sets = config.data.sets
  check(isinstance(sets, (list, tuple)) and len(sets) >= 1,
        f"data.sets={sets!r} must be a non-empty tuple of data-set dicts")
  return [dataset_from_entry(entry, config.data.resolution, i) for i, entry in enumerate(sets)]


@dataclasses.dataclass(frozen=True)
class ServedSet:
  """A configured data set as the task serves it: the generated set, the frames used, the test horizon."""

  spec: DatasetSpec
  first_frame: int  # stored frames skipped: 1 drops an ns_fno set's w0 (data.keep_w0=False)
  t_test: int       # frames rolled out at evaluation after the first t_in served frames

  @property
  def num_frames(self) -> int:
    """Frames per trajectory that training windows and evaluation see."""
    return self.spec.num_frames - self.first_frame


def _is_int(value: Any) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def served_sets(config: ml_collections.ConfigDict) -> list[ServedSet]:
  """Every configured data set with its served frames and test horizon, checked against ``t_in``.

  Frames: an ``ns_fno`` set's stored frame 0 is w0 (FNO's ``a``); DPOT's NS data are FNO's ``u``
  frames t = 1..T only (data_generation/preprocess.py:20-28), so w0 is dropped unless
  ``data.keep_w0``. Test horizon, first match wins: ``data.rollout_steps`` > 0 (every set),
  the entry's ``t_test``, DPOT's ``t_test`` for an FNO preset (:func:`jaxlab.pde.data.dpot_t_test`:
  20 / 20 / 10 for nu = 1e-3 / 1e-4 / 1e-5), else every frame after ``t_in``.
  """
  d = config.data
  keep_w0 = d.get("keep_w0", False)
  check(isinstance(keep_w0, bool), f"data.keep_w0={keep_w0!r} must be True or False")
  t_in, steps = config.t_in, d.rollout_steps
  out = []
  for i, (entry, spec) in enumerate(zip(d.sets, dataset_specs(config))):
    first = 1 if spec.family == "ns_fno" and not keep_w0 else 0
    frames = spec.num_frames - first
    where = f"data set {spec.name!r} (data.sets[{i}])"
    what = f"{frames} frames" + (" (FNO's u, w0 dropped: data.keep_w0=False)" if first else "")
    check(t_in + config.t_out <= frames,
          f"t_in={t_in} + t_out={config.t_out} frames exceed {where}'s {what} per trajectory; "
          f"t_in + t_out must be <= {frames}")
    if steps:
      t_test, term = steps, f"data.rollout_steps={steps}"
    elif "t_test" in entry:
      t_test = entry["t_test"]
      check(_is_int(t_test) and t_test >= 1, f"data.sets[{i}].t_test={t_test!r} must be an int >= 1")
      term = f"data.sets[{i}].t_test={t_test}"
    elif dpot_t_test(spec) is not None:
      t_test = dpot_t_test(spec)
      term = f"t_test={t_test} (DPOT's for this FNO set; override with data.sets[{i}].t_test)"
    else:
      t_test, term = frames - t_in, ""  # every frame after t_in: fits once t_in + t_out does
    check(t_in + t_test <= frames,
          f"t_in={t_in} + {term} exceed {where}'s {what}; t_in + the test horizon must be <= {frames}")
    out.append(ServedSet(spec, first, t_test))
  return out


def channels_of(config: Any) -> int:
  """The model's channel count: ``data.num_channels`` or, if 0, the widest data set's (a config or its dict)."""
  return int(config["data"].get("num_channels", 0) or 0) or _widest(config)


def load_datasets(config: ml_collections.ConfigDict) -> list[PDEDataset]:
  """The data sets of ``config`` (generated on a cache miss) as served (:func:`served_sets`), with their test split;
  with ``data.source = "files"`` the sets of the master table, read lazily from their files."""
  if data_source(config) == "files":
    return [s.dataset for s in _file_sets(config)]
  d = config.data
  return [load_dataset(s.spec, d.cache_dir or None, num_test=d.num_test, first_frame=s.first_frame)
          for s in served_sets(config)]


def pad_value(config: Any) -> float:
  """The value of padded channels under ``data.channel_padding`` (a config or its dict; default DPOT's ones)."""
  padding = config["data"].get("channel_padding", "ones")
  check(padding in CHANNEL_PADDINGS,
        f"data.channel_padding={padding!r}; allowed: {', '.join(map(repr, CHANNEL_PADDINGS))}")
  return CHANNEL_PADDINGS[padding]


def evaluation_data(config: ml_collections.ConfigDict, datasets: Sequence[PDEDataset],
                    channels: int) -> dict[str, dict[str, np.ndarray]]:
  """Per data set: the first ``t_in`` frames of its test trajectories and its ``t_test`` frames after them,
  resampled to ``data.resolution`` with DPOT's test mask (:func:`jaxlab.pde.data.rollout_eval_data`)."""
  d = config.data
  sets = _file_sets(config) if data_source(config) == "files" else served_sets(config)
  return rollout_eval_data(datasets, config.t_in, [s.t_test for s in sets], num_channels=channels,
                           max_trajectories=d.eval_trajectories or None, pad_value=pad_value(config),
                           resolution=d.resolution)


# ---------------------------------------------------------------- model

def model_kwargs(config: ml_collections.ConfigDict, channels: int) -> tuple[str, dict[str, Any]]:
  """``(name, constructor kwargs)`` of the configured model for ``channels`` channels."""
  m = dict(config.model)
  name = m.pop("name", None)
  if name not in MODELS:
    raise InputError(f"model.name={name!r}; choose one of {', '.join(map(repr, MODELS))}")
  widest = _widest(config)
  for key in ("in_channels", "out_channels"):
    value = m.pop(key, channels)
    if value != channels:  # the task sets both from the data; padding can only add channels
      fix = (f"set data.num_channels={value} to pad the data to it, or remove model.{key}"
             if _is_int(value) and value >= widest else
             f"remove model.{key} (the widest data set has {widest}, so the model needs at least that many)")
      raise InputError(f"model.{key}={value!r} does not match the data's {channels} channels; {fix}")
  for key in ("in_timesteps", "out_timesteps", "img_size"):
    check(key not in m, f"model.{key} is set by the task (t_in, t_out, data.resolution); remove it")
  io = dict(in_channels=channels, out_channels=channels, in_timesteps=config.t_in, out_timesteps=config.t_out)
  if name == "dpot":
    return name, dpot_config(m.pop("size", "cpu_small"), img_size=config.data.resolution, **io, **m)
  return name, {**io, **m}


def _paper_count(config: ml_collections.ConfigDict) -> str:
  """For a paper-size DPOT, its count in the paper (with the 12-way class head this task does not train)."""
  size = config.model.get("size", "") if config.model.name == "dpot" else ""
  from jaxlab.pde.sizes import OFFICIAL_PARAM_COUNTS
  if size not in OFFICIAL_PARAM_COUNTS:
    return ""
  return f" (DPOT-{size}: the paper's {OFFICIAL_PARAM_COUNTS[size]:,} parameters include a 12-way class head)"


def build_model(config: ml_collections.ConfigDict, channels: int) -> Any:
  """The configured DPOT or FNO-2D, its settings checked (``InputError`` naming the bad key)."""
  name, kwargs = model_kwargs(config, channels)
  res = config.data.resolution
  if name == "dpot":
    p = kwargs["patch_size"]
    check(isinstance(p, int) and p > 0 and res % p == 0,
          f"data.resolution={res} is not divisible by the DPOT patch size {p} (model.patch_size)")
    try:
      model = DPOT(**kwargs)
    except TypeError as e:
      raise InputError(f"model: {e}") from None
    try:
      model.check_config()
    except InputError as e:
      raise InputError(f"model: {e}") from None
    return model
  modes = kwargs.get("modes", FNO2d.modes)
  check(_is_int(modes) and modes >= 1, f"model.modes={modes!r} must be an int >= 1 (Fourier modes kept per axis)")
  check(2 * modes <= res, f"model.modes={modes} needs data.resolution >= {2 * modes}, got {res}; "
        f"use model.modes <= {res // 2}")
  try:
    model = FNO2d(**kwargs)
  except TypeError as e:
    raise InputError(f"model: {e}") from None
  try:
    model.check_config()
  except InputError as e:
    raise InputError(f"model: {e}") from None
  return model


# ---------------------------------------------------------------- evaluation

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


# ---------------------------------------------------------------- checks

def _check_window_keys(config: ml_collections.ConfigDict) -> None:
  t_in, t_out, steps = config.t_in, config.t_out, config.data.rollout_steps
  for key, value in (("t_in", t_in), ("t_out", t_out)):
    check(_is_int(value) and value >= 1, f"{key}={value!r} must be an int >= 1")
  check(_is_int(steps) and steps >= 0,
        f"data.rollout_steps={steps!r} must be an int >= 0 (0: each set's t_test)")


def _check_sets(config: ml_collections.ConfigDict) -> tuple[list[DatasetSpec], list[int]]:
  """``(generated specs, channels of every set)``, the windows checked against every set's frames.

  Generated sets: :func:`served_sets` and the test split; files (``data.source="files"``):
  :func:`jaxlab.pde.data.files.file_sets` opens the table's files (headers only) and checks
  t_in + t_out, t_in + t_test, data.eval_trajectories and data.num_channels against each.
  """
  _check_window_keys(config)
  if data_source(config) == "files":
    from jaxlab.pde.data.files.configured import check_file_keys  # noqa: PLC0415 - h5py only for files
    check_file_keys(config.data)
    return [], [s.dataset.num_channels for s in _file_sets(config)]
  specs = [s.spec for s in served_sets(config)]  # checks t_in + t_out and t_in + t_test
  _check_test_split(config, specs)
  return specs, [s.num_channels for s in specs]


def _check_test_split(config: ml_collections.ConfigDict, specs: Sequence[DatasetSpec]) -> None:
  """data.num_test leaves training and test trajectories in every set; data.eval_trajectories fits in it."""
  d = config.data
  num_test, evals = d.get("num_test", None), d.get("eval_trajectories", 0)
  check(num_test is None or (_is_int(num_test) and num_test >= 1),
        f"data.num_test={num_test!r} must be an int >= 1 (test trajectories per set, rolled out at evaluation) "
        "or None (10% of each set)")
  for i, spec in enumerate(specs):
    n = spec.num_trajectories
    where = f"data set {spec.name!r} (data.sets[{i}].trajectories={n})"
    check(n >= 2, f"{where} is too small; the train/test split needs >= 2 trajectories")
    test = default_num_test(n) if num_test is None else num_test
    check(test < n, f"data.num_test={num_test} leaves no training trajectory in {where}; must be in [1, {n - 1}]")
  check(_is_int(evals) and evals >= 0, f"data.eval_trajectories={evals!r} must be an int >= 0 (test trajectories "
        "rolled out per set at evaluation; 0: all)")
  check(num_test is None or evals <= num_test, f"data.eval_trajectories={evals} exceeds data.num_test={num_test}; "
        f"must be in [0, {num_test}] (0: all)")


def _pretrained_config(workdir: str) -> dict | None:
  """The config saved with ``workdir``'s newest checkpoint (None if there is none)."""
  directory = os.path.join(workdir, "checkpoints")
  if not os.path.isdir(directory):
    return None  # the trainer's fine-tuning start says so
  from jaxlab.train.checkpoint import Checkpointer  # noqa: PLC0415 - only when fine-tuning
  ckpt = Checkpointer(directory, 1)
  try:
    step = ckpt.latest_step()
    return ckpt.saved_config(step) if step is not None else None
  finally:
    ckpt.close()


def _check_pretrained(config: ml_collections.ConfigDict, channels: int) -> None:
  """A fine-tuning run (``init_from.workdir``) must have the pre-trained model's channels and window."""
  init_from = config.get("init_from", None)
  workdir = init_from.get("workdir", "") if init_from is not None else ""
  saved = _pretrained_config(workdir) if workdir else None
  if not saved or "data" not in saved or ("sets" not in saved["data"] and saved["data"].get("source") != "files"):
    return
  if saved["data"].get("source") == "files" and not saved["data"].get("master") and data_source(config) == "files":
    # Its table came from $JAXLAB_PDE_MASTER then; without it now, this run's table is the one to look in.
    from jaxlab.pde.data.files.configured import master_path  # noqa: PLC0415 - h5py only for files
    saved = {**saved, "data": {**saved["data"], "master": master_path(config.data)}}
  try:
    theirs = channels_of(saved)
  except InputError:  # a files run whose master table is not readable here: the params' shapes are checked
    theirs = None     # when they are loaded (jaxlab.train.finetune)
  check(theirs in (None, channels),
        f"init_from.workdir={workdir!r} was trained with {theirs} channels, this run's data have {channels}; "
        f"set data.num_channels={theirs} (missing channels are padded, see data.channel_padding)")
  # A run saved before the switch existed padded with zeros; the model expects its padding value.
  padding = saved["data"].get("channel_padding", "zeros_masked")
  check(padding == config.data.get("channel_padding", "ones"),
        f"init_from.workdir={workdir!r} was trained with data.channel_padding={padding!r}, this run has "
        f"{config.data.get('channel_padding', 'ones')!r}; set data.channel_padding={padding!r}")
  for key in ("t_in", "t_out"):
    check(saved.get(key) == config[key], f"init_from.workdir={workdir!r} was trained with {key}={saved.get(key)}, "
          f"this run has {key}={config[key]}")
  check(saved.get("model", {}).get("name") == config.model.name,
        f"init_from.workdir={workdir!r} trained model.name={saved.get('model', {}).get('name')!r}, "
        f"this run has {config.model.name!r}")


def check_config(config: ml_collections.ConfigDict) -> tuple[list[DatasetSpec], int, Any]:
  """``(data set specs, channels, model)`` after checking every setting; nothing is generated or read
  beyond file headers (specs: the generated sets; [] for ``data.source="files"``)."""
  res = config.data.resolution
  check(_is_int(res) and res >= 8 and res % 2 == 0,
        f"data.resolution={res!r} must be an even int >= 8 (grid points per axis)")
  specs, set_channels = _check_sets(config)
  widest = max(set_channels)
  num_channels = config.data.get("num_channels", 0)
  check(_is_int(num_channels), f"data.num_channels={num_channels!r} must be an int (0: the widest set's {widest})")
  check(num_channels == 0 or num_channels >= widest,
        f"data.num_channels={num_channels!r} is below the widest data set's {widest} channels; must be 0 (the "
        f"widest set's) or an int >= {widest} (more pads, see data.channel_padding)")
  channels = channels_of(config)
  weights = tuple(config.data.weights)
  check(not weights or len(weights) == len(set_channels),
        f"data.weights has {len(weights)} entries for {len(set_channels)} data sets (or give () for equal weights)")
  for i, w in enumerate(weights):
    check(isinstance(w, (int, float)) and not isinstance(w, bool) and np.isfinite(w) and w >= 0,
          f"data.weights[{i}]={w!r} in data.weights={weights} must be a finite number >= 0")
  check(not weights or sum(weights) > 0,
        f"data.weights={weights} sum to 0; at least one weight must be > 0 (or give () for equal weights)")
  rule = config.data.get("mixture_rule", MIXTURE_RULES[0])
  check(rule in MIXTURE_RULES, f"data.mixture_rule={rule!r}; allowed: {', '.join(map(repr, MIXTURE_RULES))}")
  pad_value(config)  # data.channel_padding is one of CHANNEL_PADDINGS
  model = build_model(config, channels)
  noise = config.noise_scale
  check(isinstance(noise, numbers.Real) and not isinstance(noise, bool) and noise >= 0 and np.isfinite(noise),
        f"noise_scale={noise!r} must be finite and >= 0 (denoising noise relative to the input's norm; 0: none)")
  _check_pretrained(config, channels)
  return specs, channels, model


# ---------------------------------------------------------------- the task

@TASKS.register("pde_operator")
def pde_operator(config: ml_collections.ConfigDict) -> Task:
  """The task of ``configs/dpot_pde.py`` (see there for every key)."""
  return pde_operator_with_inference(config)[0]


def pde_operator_with_inference(config: ml_collections.ConfigDict) -> tuple[Task, Inference]:
  """The task and its :class:`~jaxlab.tasks.inference.Inference` (the same model and test data).

  Inference functions, each ``fn(params, ...)``: ``predict(params, x)``, the next ``t_out``
  frames ``(n, X, Y, t_out, C)`` from ``t_in`` frames ``x`` ``(n, X, Y, t_in, C)``;
  ``rollout(params, x0, steps, channel_mask=None)``, :func:`rollout` with the run's ``t_out``
  and padding value (``channel_mask`` ``(n, C)``: 1 for a data set's real channels); and
  ``l2re(params, test=None)``, :func:`rollout_l2re` (the task's evaluation) on ``test``
  (default: the run's test trajectories). ``data``: ``test`` (per data set ``x``, ``y``,
  ``channel_mask``, ``score_mask``), ``t_in``, ``t_out``, ``channels``, ``pad_value``.
  """
  d = config.data
  _, channels, model = check_config(config)
  datasets = load_datasets(config)
  if data_source(config) == "files" and d.get("verify_files", False):  # every record of every set read once, now rather than when first drawn
    from jaxlab.pde.data.files import verify_records  # noqa: PLC0415 - h5py only for files
    for ds in datasets:
      verify_records(ds.trajectories)
  weights = list(d.weights) if d.weights else [1.0] * len(datasets)
  rule, pad = d.get("mixture_rule", MIXTURE_RULES[0]), pad_value(config)
  # DPOT's ones are trained on (its training mask is all ones); zeros are masked out of the loss
  train_on_padding = d.get("channel_padding", "ones") == "ones"
  loss_fn = make_loss_fn(model.apply, noise_scale=config.noise_scale)
  evals = evaluation_data(config, datasets, channels)

  def init_params(rng):
    x = jnp.zeros((1, d.resolution, d.resolution, config.t_in, channels), jnp.float32)
    return model.init(rng, x)["params"]

  def host_batch(step, rows, seed):
    b = mixture_batch(datasets, weights, seed, step, config.batch_size, rows, config.t_in, config.t_out,
                      num_channels=channels, rule=rule, pad_value=pad, resolution=d.resolution)
    mask = np.ones_like(b["channel_mask"]) if train_on_padding else b["channel_mask"]
    return {"x": b["x"], "y": b["y"], "mask": mask[:, None, None, None, :].astype(np.float32)}

  def evaluate(state, rng):
    del rng
    return rollout_l2re(model.apply, state.params, evals, config.t_out, pad)

  task = Task(init_params=init_params, loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              throughput={"samples": config.batch_size},
              description=f"{config.model.name} on {'+'.join(ds.name for ds in datasets)}" + _paper_count(config),
              # evaluation only, and the Soft MoE implementation (the same function on any platform)
              resume_safe=("data.eval_trajectories", "data.rollout_steps", "model.moe_impl"))

  def predict(params, x):
    out = model.apply({"params": params}, x)
    return out[0] if isinstance(out, tuple) else out  # DPOT with a classifier head: (frames, logits)

  def run_rollout(params, x0, steps, channel_mask=None):
    return rollout(model.apply, params, x0, steps, config.t_out, channel_mask, pad)

  def l2re(params, test=None):
    return rollout_l2re(model.apply, params, evals if test is None else test, config.t_out, pad)

  fns = {"predict": jax.jit(predict), "rollout": jax.jit(run_rollout, static_argnames=("steps",)),
         "l2re": jax.jit(l2re)}
  return task, Inference(model=model, fns=fns, data={"test": evals, "t_in": config.t_in, "t_out": config.t_out,
                                                     "channels": channels, "pad_value": pad})
