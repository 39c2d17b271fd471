"""Small HDF5 files in the official layouts, written with h5py as the official code writes them.

DPOT: thu-ml/DPOT data_generation/preprocess.py (``create_dataset('data', ...)``: one file of
(N, X, Y, T[, C]), or data_{i}.hdf5 of (X, Y, T[, C])). PDEBench: data_gen/data_gen_NLE/Data_Merge.py
(2-D CFD: density / pressure / Vx / Vy of (N, T, X, Y) and the coordinates) and
data_gen/gen_diff_react.py (per-sample groups '0000'... with data (T, X, Y, C) and grid/x|y|t).
The Well: data_format.md of the_well's docs folder.
"""

from __future__ import annotations

import json
import os

import h5py
import numpy as np


def dpot_file(path, data: np.ndarray) -> str:
  with h5py.File(path, "w") as f:
    f.create_dataset("data", data=data)
  return str(path)


def dpot_scatter(folder, trajectories) -> str:
  os.makedirs(folder, exist_ok=True)
  for i, t in enumerate(trajectories):
    with h5py.File(os.path.join(folder, f"data_{i}.hdf5"), "w") as f:
      f.create_dataset("data", data=t, compression=None)
  return str(folder)


def pdebench_cfd(path, fields: dict[str, np.ndarray]) -> str:
  """fields: name -> (N, T, X, Y)."""
  n, t, x, y = next(iter(fields.values())).shape
  with h5py.File(path, "w") as f:
    for name, value in fields.items():
      f.create_dataset(name, data=value)
    f.create_dataset("x-coordinate", data=np.linspace(0, 1, x, dtype=np.float32))
    f.create_dataset("y-coordinate", data=np.linspace(0, 1, y, dtype=np.float32))
    f.create_dataset("t-coordinate", data=np.linspace(0, 1, t + 1, dtype=np.float32))
    f.attrs["eta"], f.attrs["zeta"], f.attrs["M"] = 0.1, 0.1, 1.0
  return str(path)


def pdebench_groups(path, samples) -> str:
  """samples: (N, T, X, Y, C), one group per sample, as gen_diff_react.py writes them (lzf)."""
  with h5py.File(path, "w") as f:
    for i, sample in enumerate(samples):
      key = str(i).zfill(4)
      f.create_dataset(f"{key}/data", data=sample, dtype="float32", compression="lzf")
      f.create_dataset(f"{key}/grid/x", data=np.linspace(-1, 1, sample.shape[1], dtype=np.float32))
      f.create_dataset(f"{key}/grid/y", data=np.linspace(-1, 1, sample.shape[2], dtype=np.float32))
      f.create_dataset(f"{key}/grid/t", data=np.linspace(0, 1, sample.shape[0], dtype=np.float32))
  return str(path)


def the_well(path, t0: dict, t1: dict = None, t2: dict = None, constant: dict = None, n_spatial_dims: int = 2,
             field_attrs: dict = None) -> str:
  """t0 / t1 / t2: name -> (N, T, X, Y) / (N, T, X, Y, 2) / (N, T, X, Y, 2, 2); constant: name -> (X, Y)."""
  t1, t2, constant, field_attrs = t1 or {}, t2 or {}, constant or {}, field_attrs or {}
  n, frames, x, y = next(iter(t0.values())).shape[:4]
  with h5py.File(path, "w") as f:
    f.attrs["dataset_name"], f.attrs["grid_type"] = "example", "cartesian"
    f.attrs["n_spatial_dims"], f.attrs["n_trajectories"] = n_spatial_dims, n
    f.attrs["simulation_parameters"] = ["Re"]
    f.attrs["Re"] = 100.0
    dims = f.create_group("dimensions")
    dims.attrs["spatial_dims"] = ["x", "y"]
    dims.create_dataset("time", data=np.arange(frames, dtype=np.float32)).attrs["sample_varying"] = False
    for name, size in (("x", x), ("y", y)):
      d = dims.create_dataset(name, data=np.linspace(0, 1, size, dtype=np.float32))
      d.attrs["sample_varying"], d.attrs["time_varying"] = False, False
    bc = f.create_group("boundary_conditions").create_group("x_periodic")
    bc.attrs["bc_type"], bc.attrs["associated_dims"] = "periodic", ["x"]
    f.create_group("scalars").attrs["field_names"] = []
    for order, (group_name, fields) in enumerate((("t0_fields", {**t0, **constant}), ("t1_fields", t1),
                                                  ("t2_fields", t2))):
      group = f.create_group(group_name)
      group.attrs["field_names"] = list(fields)
      for name, value in fields.items():
        d = group.create_dataset(name, data=value)
        const = name in constant
        d.attrs["dim_varying"] = [True, True]
        d.attrs["sample_varying"], d.attrs["time_varying"] = not const, not const
        if order == 2:
          d.attrs["symmetric"], d.attrs["antisymmetric"] = False, False
        for key, value in field_attrs.get(name, {}).items():
          d.attrs[key] = value
  return str(path)


def master_json(path, table: dict) -> str:
  with open(path, "w") as f:
    json.dump(table, f)
  return str(path)


def entry(train, test, n_train, n_test, t_test, **kw) -> dict:
  return {"train_path": str(train), "test_path": str(test), "train_size": n_train, "test_size": n_test,
          "t_test": t_test, **kw}
