"""Pure-numpy batches of PDE windows: a batch is a function of (seed, step), nothing else.

A *window* is ``t_in`` consecutive frames of one trajectory (the input x) and the ``t_out`` frames
after them (the target y), as in DPOT's auto-regressive pre-training (Hao et al., ICML 2024):
x (n, X, Y, t_in, C), y (n, X, Y, t_out, C), float32.

The multi-data-set mixture draws, per global-batch row, a data set, a training trajectory and a
start frame from ``default_rng([tag, seed, step])``; only then are the requested ``rows`` read.
Every process of a multi-host run computes the same (cheap, integer) plan for the whole global
batch and materialises only its own rows, and a resumed run at step s sees the batch it would
have seen: there is no iterator state to checkpoint. Data set i is drawn with probability
proportional to (training trajectories_i x weight_i), as DPOT's sampler (``rule="size_times_weight"``,
:func:`mixture_probabilities`), or to weight_i alone (``rule="weight"``). Channels are padded to a
common C (with zeros, or DPOT's ones: ``pad_value``) and come with a mask of the real channels.
Sets on other grids than the batch's ``resolution`` are resampled bilinearly to it, as DPOT does
(:mod:`~jaxlab.pde.data.resample`); their evaluation data carry DPOT's mask of the points that
stand for the set's own grid. Without a ``resolution`` all data sets must share one grid. A set's
``downsample`` (the master table's) keeps every k-th point of that grid *after* the resampling, as
DPOT does; all sets of a batch must then serve one grid.

Train/test split is by trajectory: the last ``num_test`` trajectories of each set are test
trajectories, never drawn by the training sampler.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

from jaxlab.errors import InputError, check, check_int, is_int, is_real
from jaxlab.pde.data import store
from jaxlab.pde.data.families import get_family
from jaxlab.pde.data.resample import evaluation_points, grid_size, resample, strided_grid
from jaxlab.pde.data.spec import DatasetSpec

_PLAN_TAG = 0x5D07  # separates these streams from other uses of (seed, step)

# How the mixture weighs its data sets (``mixture_probabilities``). DPOT's MixedTemporalDataset
# (thu-ml/DPOT @ dcd2f9a, utils/griddataset.py:53-56, 133-140) concatenates weight_i copies of each
# set's n_i training samples and shuffles them, so one draw picks set i with probability
# n_i w_i / sum_j n_j w_j: "size_times_weight". "weight": w_i / sum_j w_j, whatever the sizes.
SIZE_TIMES_WEIGHT, WEIGHT = "size_times_weight", "weight"
#: The ways :func:`mixture_probabilities` weighs the data sets of a mixture (its ``rule``).
MIXTURE_RULES = (SIZE_TIMES_WEIGHT, WEIGHT)


@dataclasses.dataclass(frozen=True, eq=False)
class PDEDataset:
  """Trajectories (n, frames, X, Y, C) float32 (a memory map or HDF5 files read lazily) and a train/test split.

  ``eval_channels``: how many leading channels evaluation scores (DPOT's ``pred_channels``;
  None: all of them). ``downsample``: (sx, sy), every sx-th / sy-th point of the grid a batch
  resamples this set to is served (DPOT's master-table ``downsample``, applied after the resize to
  ``res``: thu-ml/DPOT @ dcd2f9a, utils/griddataset.py:150 ``pad_data``, then :169-171); (1, 1): all.
  """

  name: str
  trajectories: np.ndarray
  num_test: int
  channel_names: tuple[str, ...] = ()
  eval_channels: int | None = None
  downsample: tuple[int, int] = (1, 1)

  @property
  def num_trajectories(self) -> int:
    return self.trajectories.shape[0]

  @property
  def num_frames(self) -> int:
    return self.trajectories.shape[1]

  @property
  def resolution(self) -> tuple[int, int]:
    return self.trajectories.shape[2], self.trajectories.shape[3]

  @property
  def num_channels(self) -> int:
    return self.trajectories.shape[4]

  @property
  def num_train(self) -> int:
    return self.num_trajectories - self.num_test

  def split_indices(self, split: str) -> np.ndarray:
    """Trajectory indices of 'train' (the first num_train) or 'test' (the last num_test)."""
    if split == "train":
      return np.arange(self.num_train)
    if split == "test":
      return np.arange(self.num_train, self.num_trajectories)
    raise InputError(f"split={split!r}; allowed: 'train', 'test'")


def default_num_test(num_trajectories: int) -> int:
  """Test trajectories when ``num_test`` is None: 10% (at least 1; none for a 1-trajectory set)."""
  return max(1, round(0.1 * num_trajectories)) if num_trajectories >= 2 else 0


def make_dataset(name: str, trajectories: np.ndarray, *, num_test: int | None = None,
                 channel_names: Sequence[str] = (), eval_channels: int | None = None,
                 verify_finite: bool = True, downsample: Sequence[int] = (1, 1)) -> PDEDataset:
  """Wraps an array (n, frames, X, Y, C) float32; ``num_test`` defaults to 10% (at least 1).

  ``downsample``: :class:`PDEDataset`'s ``downsample`` (the stride taken after resampling to a batch's grid).

  ``trajectories`` may be any array-like with ``shape``, ``dtype`` and numpy indexing of
  ``[i, start:stop]`` and ``[i:j, :stop]`` (e.g. :class:`jaxlab.pde.data.files.Split`).
  """
  shape = getattr(trajectories, "shape", None)
  check(shape is not None and len(shape) == 5,
        f"data set {name!r}: trajectories must be (n, frames, X, Y, C), got shape {shape}")
  check(trajectories.dtype == np.float32,
        f"data set {name!r}: trajectories must be float32, got {trajectories.dtype}")
  n = shape[0]
  num_test = default_num_test(n) if num_test is None else num_test
  check(is_int(num_test) and 0 <= num_test < n,
        f"data set {name!r}: num_test={num_test} must be in [0, {n - 1}] (at least one training trajectory)")
  check(eval_channels is None or (is_int(eval_channels) and 1 <= eval_channels <= shape[4]),
        f"data set {name!r}: eval_channels={eval_channels!r} must be None or an int in [1, {shape[4]}]")
  check(len(downsample) == 2 and all(is_int(k) and k >= 1 for k in downsample),
        f"data set {name!r}: downsample={tuple(downsample)!r} must be a pair of ints >= 1 (X, Y)")
  if verify_finite:
    store.check_finite(trajectories, name)
  return PDEDataset(name, trajectories, int(num_test), tuple(channel_names),
                    None if eval_channels is None else int(eval_channels), (int(downsample[0]), int(downsample[1])))


def load_dataset(spec: DatasetSpec, cache_dir: str | os.PathLike | None = None, *,
                 num_test: int | None = None, first_frame: int = 0, chunk_size: int = 32,
                 progress: bool = True, verify_finite: bool = True) -> PDEDataset:
  """The generated (cached) data set of ``spec`` with its train/test split.

  ``first_frame`` > 0 serves only stored frames ``first_frame, ...`` of every trajectory (a view of
  the memory map, nothing is copied): 1 drops the initial state w0 of an ``ns_fno`` set, so that
  the frames are FNO's ``u`` (t = 1..T), the frames DPOT trains and tests on.
  """
  check(is_int(first_frame) and 0 <= first_frame < spec.num_frames - 1,
        f"first_frame={first_frame!r} must be an int in [0, {spec.num_frames - 2}] for data set {spec.name!r} "
        f"({spec.num_frames} stored frames)")
  array = store.load_or_generate(spec, cache_dir, chunk_size=chunk_size, progress=progress,
                                 verify_finite=verify_finite)
  return make_dataset(spec.name, array[:, first_frame:], num_test=num_test,
                      channel_names=get_family(spec.family).channel_names, verify_finite=False)


@dataclasses.dataclass(frozen=True)
class MixturePlan:
  """Which window each row of a global batch is: data set, trajectory index, start frame."""

  dataset: np.ndarray  # (G,) int32, position in the data-set list
  trajectory: np.ndarray  # (G,) int64, index into that set's trajectories
  start: np.ndarray  # (G,) int64, first input frame


def _check_window(datasets: Sequence[PDEDataset], t_in: int, t_out: int) -> None:
  check(is_int(t_in) and is_int(t_out) and t_in >= 1 and t_out >= 1,
        f"t_in={t_in!r} and t_out={t_out!r} must both be ints >= 1")
  for ds in datasets:
    check(t_in + t_out <= ds.num_frames,
          f"data set {ds.name!r}: t_in + t_out = {t_in + t_out} exceeds its {ds.num_frames} frames")


def mixture_probabilities(datasets: Sequence[PDEDataset], weights: Sequence[float], split: str = "train",
                          rule: str = SIZE_TIMES_WEIGHT) -> np.ndarray:
  """(len(datasets),) float64: the probability that one row of a batch comes from each data set.

  ``rule="size_times_weight"`` (DPOT's; see ``MIXTURE_RULES``): proportional to the number of
  ``split`` trajectories times the weight, e.g. sizes (220, 100) with weights (1, 1) give
  (220/320, 100/320). ``rule="weight"``: proportional to the weights alone.
  """
  check(rule in MIXTURE_RULES, f"mixture rule={rule!r}; allowed: {', '.join(map(repr, MIXTURE_RULES))}")
  w = np.asarray(weights, np.float64)
  check(len(datasets) >= 1 and w.shape == (len(datasets),),
        f"need one weight per data set: {len(datasets)} data sets, weights shape {w.shape}")
  check(bool(np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0),
        f"weights={list(weights)} must be finite, >= 0 and not all zero")
  sizes = np.asarray([len(ds.split_indices(split)) for ds in datasets], np.float64)
  for ds, wi, size in zip(datasets, w, sizes):
    check(wi == 0 or size > 0, f"data set {ds.name!r} has no {split} trajectories but weight > 0")
  mass = w * sizes if rule == SIZE_TIMES_WEIGHT else w
  return mass / mass.sum()


def mixture_plan(datasets: Sequence[PDEDataset], weights: Sequence[float], seed: int, step: int,
                 global_batch_size: int, t_in: int, t_out: int, split: str = "train",
                 rule: str = SIZE_TIMES_WEIGHT) -> MixturePlan:
  """The composition of global batch ``step``, a function of its arguments only (module docstring).

  Rows are drawn i.i.d. (with replacement) with :func:`mixture_probabilities`; DPOT's epochs
  shuffle the weighted concatenation (without replacement), which has the same per-row law.
  """
  check_int(seed, "seed", 0)
  check_int(step, "step", 0)
  check_int(global_batch_size, "global_batch_size", 1)
  _check_window(datasets, t_in, t_out)
  probs = mixture_probabilities(datasets, weights, split, rule)
  pools = [len(ds.split_indices(split)) for ds in datasets]
  rng = np.random.default_rng([_PLAN_TAG, int(seed), int(step)])
  u = rng.random((global_batch_size, 3))
  # Categorical by inverse CDF of our own (not rng.choice), so the plan only relies on
  # Generator.random's stream.
  dataset = np.minimum(np.searchsorted(np.cumsum(probs), u[:, 0], side="right"), len(datasets) - 1)
  dataset = np.where(probs[dataset] > 0, dataset, np.argmax(probs))  # guard float edge cases
  pool = np.asarray(pools)[dataset]
  offset = np.asarray([ds.num_train if split == "test" else 0 for ds in datasets])[dataset]
  trajectory = offset + np.minimum((u[:, 1] * pool).astype(np.int64), pool - 1)
  starts = np.asarray([ds.num_frames - t_in - t_out + 1 for ds in datasets])[dataset]
  start = np.minimum((u[:, 2] * starts).astype(np.int64), starts - 1)
  return MixturePlan(dataset.astype(np.int32), trajectory, start)


def _rows(rows: Sequence[int] | np.ndarray | None, global_batch_size: int) -> np.ndarray:
  if rows is None:
    return np.arange(global_batch_size)
  rows = np.asarray(rows)
  check(rows.ndim == 1 and (rows.size == 0 or np.issubdtype(rows.dtype, np.integer)),
        f"rows must be a 1-D sequence of ints, got shape {rows.shape} dtype {rows.dtype}")
  check(rows.size == 0 or (rows.min() >= 0 and rows.max() < global_batch_size),
        f"rows must lie in [0, {global_batch_size}), got min {rows.min() if rows.size else None} "
        f"max {rows.max() if rows.size else None}")
  return rows.astype(np.int64)


def _common_grid(datasets: Sequence[PDEDataset], resolution: int | Sequence[int] | None = None) -> tuple[int, int]:
  """The grid sets are resampled to: ``resolution`` (every set resampled to it), else the one grid all sets share."""
  if resolution is not None:
    return grid_size(resolution)
  grids = {ds.resolution for ds in datasets}
  check(len(grids) == 1, "data sets must share one grid (or pass resolution= to resample them to one); got "
        + ", ".join(f"{ds.name}: {ds.resolution}" for ds in datasets))
  return grids.pop()


def served_grid(datasets: Sequence[PDEDataset], resolution: int | Sequence[int] | None = None) -> tuple[int, int]:
  """The grid a batch of ``datasets`` has: the resampling grid (:func:`mixture_batch`'s ``resolution``) strided by
  each set's ``downsample``; one grid for every set, since a batch is one array."""
  grid = _common_grid(datasets, resolution)
  served = {ds.name: strided_grid(grid, ds.downsample) for ds in datasets}
  check(len(set(served.values())) == 1,
        f"data sets on the {grid[0]}x{grid[1]} grid serve different grids after their downsample: "
        + ", ".join(f"{ds.name}: downsample={ds.downsample} -> {served[ds.name]}" for ds in datasets)
        + "; a batch is one grid: give the sets of one run the same downsample")
  return served[datasets[0].name]


def _common_channels(datasets: Sequence[PDEDataset], num_channels: int | None) -> int:
  widest = max(ds.num_channels for ds in datasets)
  if num_channels is None:
    return widest
  check(is_int(num_channels) and num_channels >= widest,
        f"num_channels={num_channels!r} is below the widest data set's {widest} channels; must be an int >= {widest}")
  return int(num_channels)


def _check_pad_value(pad_value: float) -> None:
  check(is_real(pad_value) and np.isfinite(pad_value), f"pad_value={pad_value!r} must be a finite number (the value of padded channels)")


def _window(ds: PDEDataset, trajectory: int, start: int, length: int, grid: tuple[int, int]) -> np.ndarray:
  """Frames [start, start + length) of one trajectory as (X, Y, length, c), resampled to ``grid``, then strided
  by the set's ``downsample`` (DPOT's order: utils/griddataset.py:150 resizes, :169-171 strides)."""
  window = np.moveaxis(np.asarray(ds.trajectories[trajectory, start:start + length]), 0, 2)
  sx, sy = ds.downsample
  return resample(window, grid)[::sx, ::sy]


def mixture_batch(datasets: Sequence[PDEDataset], weights: Sequence[float], seed: int, step: int,
                  global_batch_size: int, rows: Sequence[int] | np.ndarray | None, t_in: int,
                  t_out: int, *, num_channels: int | None = None, split: str = "train",
                  rule: str = SIZE_TIMES_WEIGHT, pad_value: float = 0.0,
                  resolution: int | Sequence[int] | None = None) -> dict[str, np.ndarray]:
  """Rows ``rows`` (None: all) of global batch ``step`` of the weighted multi-data-set mixture.

  Returns x (n, X, Y, t_in, C) and y (n, X, Y, t_out, C) float32 with missing channels set to
  ``pad_value`` (DPOT pads with 1.0: utils/griddataset.py:98), dataset (n,) int32 (position in
  ``datasets``) and channel_mask (n, C) bool (True = real channel); n = len(rows).
  C = ``num_channels`` or the widest data set's channel count. ``rule``: :func:`mixture_probabilities`.
  ``resolution`` (an int or (X, Y)): the batch's grid, every window of a set on another grid
  resampled bilinearly to it (DPOT's ``pad_data``, :func:`jaxlab.pde.data.resample.resample`);
  None: the grid all sets share. Each set's ``downsample`` then strides that grid (X, Y are
  :func:`served_grid`). Only the rows' own frames are read.
  """
  grid = _common_grid(datasets, resolution)
  served = served_grid(datasets, resolution)
  channels = _common_channels(datasets, num_channels)
  _check_pad_value(pad_value)
  plan = mixture_plan(datasets, weights, seed, step, global_batch_size, t_in, t_out, split, rule)
  rows = _rows(rows, global_batch_size)
  n = len(rows)
  x = np.full((n, *served, t_in, channels), pad_value, np.float32)
  y = np.full((n, *served, t_out, channels), pad_value, np.float32)
  mask = np.zeros((n, channels), bool)
  for j, r in enumerate(rows):
    ds = datasets[plan.dataset[r]]
    window = _window(ds, int(plan.trajectory[r]), int(plan.start[r]), t_in + t_out, grid)
    c = ds.num_channels
    x[j, ..., :c] = window[:, :, :t_in]
    y[j, ..., :c] = window[:, :, t_in:]
    mask[j, :c] = True
  return dict(x=x, y=y, dataset=plan.dataset[rows], channel_mask=mask)


def windows(dataset: PDEDataset, seed: int, step: int, batch_size: int, t_in: int, t_out: int, *,
            rows: Sequence[int] | np.ndarray | None = None,
            split: str = "train") -> dict[str, np.ndarray]:
  """Random windows of one data set: x (n, X, Y, t_in, C), y (n, X, Y, t_out, C) float32."""
  batch = mixture_batch([dataset], [1.0], seed, step, batch_size, rows, t_in, t_out, split=split)
  return dict(x=batch["x"], y=batch["y"])


def rollout_eval_data(datasets: Sequence[PDEDataset], t_in: int,
                      num_steps: int | Sequence[int | None] | None = None, *,
                      num_channels: int | None = None, max_trajectories: int | None = None,
                      pad_value: float = 0.0,
                      resolution: int | Sequence[int] | None = None) -> dict[str, dict[str, np.ndarray]]:
  """Per data set (by name): its test trajectories' first ``t_in`` frames and the next ``num_steps``.

  ``num_steps``: one count for every set, or one per set (DPOT's per-set ``t_test``); None (or a
  None entry) = every remaining frame of that set. As DPOT's test set (utils/griddataset.py:158-162),
  every test trajectory starts at its first served frame. Each entry holds x (n, X, Y, t_in, C),
  y (n, X, Y, steps, C), dataset (n,) int32 and channel_mask (n, C), padded and resampled to
  ``resolution`` like :func:`mixture_batch`, for auto-regressive rollout and its relative L2
  error, and score_mask (n, X, Y, C) bool: what the error is taken over, DPOT's test mask
  (utils/griddataset.py:103-116, 162): the grid points that stand for the set's own grid (every
  k-th point of a set resampled up k-fold, all points otherwise) times its first
  ``eval_channels`` channels (DPOT's ``pred_channels``; all real channels by default). Each set's
  ``downsample`` strides the resampled frames and that mask alike (DPOT strides x and y,
  utils/griddataset.py:169-171, and leaves its mask unstrided, which would not match them).
  """
  names = [ds.name for ds in datasets]
  check(len(set(names)) == len(names), f"data set names must be unique, got {names}")
  grid = _common_grid(datasets, resolution)
  served_grid(datasets, resolution)  # one grid for every set
  channels = _common_channels(datasets, num_channels)
  _check_pad_value(pad_value)
  check_int(t_in, "t_in", 1)
  check(max_trajectories is None or (is_int(max_trajectories) and max_trajectories >= 1),
        f"max_trajectories={max_trajectories!r} must be None (all test trajectories) or an int >= 1")
  per_set = list(num_steps) if isinstance(num_steps, (list, tuple)) else [num_steps] * len(datasets)
  check(len(per_set) == len(datasets), f"num_steps has {len(per_set)} entries for {len(datasets)} data sets")
  out = {}
  for d, ds in enumerate(datasets):
    # A 0-frame rollout would score an L2RE of 0/0: refused, as is a negative one.
    where = f"num_steps[{d}]" if isinstance(num_steps, (list, tuple)) else "num_steps"
    check(per_set[d] is None or (is_int(per_set[d]) and per_set[d] >= 1),
          f"{where}={per_set[d]!r} for data set {ds.name!r} must be an int >= 1 (frames to roll out) or None "
          "(every frame after t_in)")
    steps = ds.num_frames - t_in if per_set[d] is None else per_set[d]
    check(steps >= 1, f"data set {ds.name!r}: no frames left after t_in={t_in} of its {ds.num_frames} frames "
          f"(num_steps=None rolls out the rest); t_in must be <= {ds.num_frames - 1}")
    check(t_in + steps <= ds.num_frames, f"data set {ds.name!r}: t_in={t_in} + {where}={steps} = {t_in + steps} "
          f"exceeds its {ds.num_frames} frames")
    test = ds.split_indices("test")[:max_trajectories]
    check(len(test) > 0, f"data set {ds.name!r} has no test trajectories (num_test=0)")
    frames = np.asarray(ds.trajectories[test[0]:test[-1] + 1, :t_in + steps])  # (n, t, X, Y, c)
    sx, sy = ds.downsample
    frames = resample(np.moveaxis(frames, 1, 3), grid, axes=(1, 2))[:, ::sx, ::sy]  # (n, X, Y, t, c)
    padded = np.full((*frames.shape[:4], channels), pad_value, np.float32)
    padded[..., :ds.num_channels] = frames
    mask = np.zeros((len(test), channels), bool)
    mask[:, :ds.num_channels] = True
    scored = np.arange(channels) < (ds.eval_channels or ds.num_channels)
    score = evaluation_points(ds.resolution, grid)[::sx, ::sy, None] & scored  # (X, Y, C)
    out[ds.name] = dict(x=padded[:, :, :, :t_in], y=padded[:, :, :, t_in:],
                        dataset=np.full(len(test), d, np.int32), channel_mask=mask,
                        score_mask=np.broadcast_to(score, (len(test), *score.shape)).copy())
  return out
