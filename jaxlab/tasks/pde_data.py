"""The data sets a PDE operator-learning config reads (``data.*`` of ``configs/dpot_pde.py``), as served.

Parsing the ``data`` block: which sets (``data.sets`` entries, or a master table of files with
``data.source = "files"``), which of their frames are served (``data.keep_w0``) and rolled out at
evaluation (the per-set test horizon ``t_test``), how many channels the model gets and what fills
the padded ones (``data.channel_padding``), and loading the sets and their evaluation data. The
defaults follow the official DPOT code (thu-ml/DPOT @ dcd2f9a); each bad value is one line naming
the key. The checks of the whole ``data`` block are in :mod:`jaxlab.tasks.pde_data_checks`.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Mapping, Sequence

import ml_collections
import numpy as np

from jaxlab.errors import InputError, check, check_int
from jaxlab.pde.data import (DatasetSpec, FNO_VISCOSITIES, PDEDataset, dataset_spec, dpot_t_test, fno_navier_stokes,
                             get_family, load_dataset, rollout_eval_data)

#: ``data.channel_padding``: what a data set with fewer channels than the model gets in the missing
#: ones. "ones": DPOT's (utils/griddataset.py:98 pads with torch.ones; the training mask is all
#: ones, :157, so the model is trained to carry the ones forward; only the test mask drops them,
#: :162). "zeros_masked": zeros, left out of the training loss (jaxlab's earlier rule). Evaluation
#: masks padded channels out of the L2RE under both.
CHANNEL_PADDINGS = {"ones": 1.0, "zeros_masked": 0.0}


#: ``data.source``: where the data sets come from. "generated": ``data.sets``, made with exponax
#: and cached; "files": a master table of the field's files (``data.master``, ``data.names``;
#: ``jaxlab.pde.data.files``).
SOURCES = ("generated", "files")


def data_source(config: Any) -> str:
  """``data.source`` of a config or its dict ("generated" when absent), checked."""
  source = config["data"].get("source", "generated")
  check(source in SOURCES, f"data.source={source!r}; allowed: {', '.join(map(repr, SOURCES))}")
  return source


def file_sets(config: Any) -> list:
  """The sets of a ``data.source = "files"`` config (:func:`jaxlab.pde.data.files.file_sets`; imports h5py)."""
  from jaxlab.pde.data.files import file_sets as sets_of_files  # noqa: PLC0415 - h5py only for runs on files
  return sets_of_files(config)


def model_resolution(config: Any) -> int:
  """The grid points per axis the model takes: ``data.resolution``, or for files that strided by the sets'
  ``downsample`` (``served_size`` of ``jaxlab.pde.data.files.configured``; a config or its dict)."""
  if data_source(config) == "files":
    from jaxlab.pde.data.files.configured import served_size  # noqa: PLC0415 - h5py only for files
    return served_size(config["data"])
  return int(config["data"]["resolution"])


def widest_set_channels(config: Any) -> int:
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
  check_int(n, f"{where}.trajectories", 1)
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
  """The generated data sets of ``data.sets``, each entry checked (:func:`dataset_from_entry`)."""
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
      check_int(t_test, f"data.sets[{i}].t_test", 1)
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
  return int(config["data"].get("num_channels", 0) or 0) or widest_set_channels(config)


def load_datasets(config: ml_collections.ConfigDict) -> list[PDEDataset]:
  """The data sets of ``config`` (generated on a cache miss) as served (:func:`served_sets`), with their test split;
  with ``data.source = "files"`` the sets of the master table, read lazily from their files."""
  if data_source(config) == "files":
    return [s.dataset for s in file_sets(config)]
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
  sets = file_sets(config) if data_source(config) == "files" else served_sets(config)
  return rollout_eval_data(datasets, config.t_in, [s.t_test for s in sets], num_channels=channels,
                           max_trajectories=d.eval_trajectories or None, pad_value=pad_value(config),
                           resolution=d.resolution)
