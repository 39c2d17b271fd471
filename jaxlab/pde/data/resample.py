"""DPOT's resolution rule for mixed grids: bilinear resampling to the training grid, evaluation at the original points.

DPOT pre-trains sets of different grids together (FNO's NS at 64^2, PDEBench at 128^2, ...) by
resampling every sample to the model's ``res`` x ``res`` grid with
``F.interpolate(x, size=(res, res), mode='bilinear')`` (thu-ml/DPOT @ dcd2f9a,
utils/griddataset.py:88-100, ``pad_data``): torch's ``align_corners=False`` rule, no anti-aliasing.
Its test mask keeps every ``res // X``-th point of the resampled grid (``get_target_mask``, :103-116),
the points that stand for the set's own grid, so that a 64^2 set is scored on 64^2 points.

These are pure numpy functions: they run on the host, in the loader, per batch row.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from jaxlab.errors import check, is_int


def grid_size(resolution: int | Sequence[int], name: str = "resolution") -> tuple[int, int]:
  """``(X, Y)`` from an int (a square grid) or a pair of ints >= 1."""
  size = (resolution, resolution) if is_int(resolution) else tuple(resolution)
  check(len(size) == 2 and all(is_int(s) and s >= 1 for s in size),
        f"{name}={resolution!r} must be an int >= 1 or a pair (X, Y) of them")
  return int(size[0]), int(size[1])


def bilinear_weights(n_in: int, n_out: int) -> np.ndarray:
  """(n_out, n_in) float64: 1-D linear interpolation as torch's ``interpolate(align_corners=False)``.

  Output point i sits at source coordinate ``s = (i + 0.5) n_in / n_out - 0.5``, clamped at 0
  (torch's ``area_pixel_compute_source_index``); it takes ``1 - (s - floor s)`` of point
  ``floor s`` and ``s - floor s`` of the next one (the last point repeats at the far edge).
  Each row sums to 1; ``n_in == n_out`` gives the identity.
  """
  check(is_int(n_in) and is_int(n_out) and n_in >= 1 and n_out >= 1,
        f"grid sizes n_in={n_in!r}, n_out={n_out!r} must be ints >= 1")
  src = np.maximum((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0.0)
  lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
  hi = np.minimum(lo + 1, n_in - 1)
  frac = src - lo
  w = np.zeros((n_out, n_in))
  np.add.at(w, (np.arange(n_out), lo), 1.0 - frac)
  np.add.at(w, (np.arange(n_out), hi), frac)
  return w


def resample(values: np.ndarray, size: int | Sequence[int], axes: tuple[int, int] = (0, 1)) -> np.ndarray:
  """``values`` with its two grid ``axes`` resampled bilinearly to ``size`` (DPOT's ``pad_data``), float32.

  Every other axis (time, channel, trajectory) is carried along: each (frame, channel) image is
  resampled on its own, as torch's interpolate over the ``T * C`` stacked channels. A grid that
  already has ``size`` is returned as is (float32), not recomputed.

  Args:
    values: an array with grid axes ``axes``, e.g. a window (X, Y, T, C).
    size: the target grid, an int (square) or (X, Y).
    axes: the positions of the grid's X and Y axes in ``values``.

  Returns:
    float32 array of ``values``' shape with the grid axes replaced by ``size``.
  """
  out_x, out_y = grid_size(size, "size")
  ax, ay = axes
  values = np.asarray(values)
  if values.shape[ax] == out_x and values.shape[ay] == out_y:
    return values.astype(np.float32, copy=False)
  moved = np.moveaxis(values, (ax, ay), (0, 1)).astype(np.float64)
  wx, wy = bilinear_weights(moved.shape[0], out_x), bilinear_weights(moved.shape[1], out_y)
  out = np.tensordot(wx, moved, axes=(1, 0))                       # (out_x, Y, ...)
  out = np.moveaxis(np.tensordot(wy, out, axes=(1, 1)), 0, 1)      # (out_x, out_y, ...)
  return np.moveaxis(out, (0, 1), (ax, ay)).astype(np.float32)


def strided_grid(grid: Sequence[int], downsample: Sequence[int]) -> tuple[int, int]:
  """The grid ``array[::sx, ::sy]`` keeps of a grid ``(X, Y)``: ``(ceil(X / sx), ceil(Y / sy))``.

  DPOT's ``downsample`` of a master-table entry, taken after the resize to ``res``
  (utils/griddataset.py:169-171).
  """
  return -(-int(grid[0]) // int(downsample[0])), -(-int(grid[1]) // int(downsample[1]))


def evaluation_points(native: Sequence[int], size: int | Sequence[int]) -> np.ndarray:
  """(X, Y) bool of the training grid ``size``: the points where a set of grid ``native`` is scored.

  DPOT's ``get_target_mask`` (utils/griddataset.py:103-116): every k-th point along each axis with
  ``k = size // native`` (1 where the set's grid is finer than the training grid: every point).
  A set on the training grid is scored everywhere.
  """
  nx, ny = grid_size(native, "native")
  out_x, out_y = grid_size(size, "size")
  kx, ky = max(out_x // nx, 1), max(out_y // ny, 1)
  mask = np.zeros((out_x, out_y), bool)
  mask[::kx, ::ky] = True
  return mask
