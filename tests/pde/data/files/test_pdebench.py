"""PDEBench's 2-D compressible NS (one dataset per field) and per-sample-group files, read as written."""

import numpy as np

from jaxlab.pde.data.files import CFD_FIELDS, PDEBenchCFD, PDEBenchGroups, check_entry, open_set
from tests.support import pde_file_layouts as layouts


def _fields(n=7, t=6, x=8, y=8):
  rng = np.random.default_rng(0)
  return {name: rng.normal(size=(n, t, x, y)).astype(np.float32) for name in ("density", "pressure", "Vx", "Vy")}


def test_cfd_channels_are_dpots_order_by_default(tmp_path):
  fields = _fields()
  path = layouts.pdebench_cfd(tmp_path / "2D_CFD_Rand_M1.0_Eta0.1_Zeta0.1_periodic_128_Train.hdf5", fields)
  records = PDEBenchCFD("cfd", path)
  assert CFD_FIELDS == ("Vx", "Vy", "density", "pressure") and records.shape == (7, 6, 8, 8, 4)
  got = records[4, 1:5]
  for c, name in enumerate(CFD_FIELDS):
    np.testing.assert_array_equal(got[..., c], fields[name][4, 1:5])
  own = PDEBenchCFD("cfd", path, fields=("density", "pressure", "Vx", "Vy"))  # PDEBench's FNO order
  np.testing.assert_array_equal(own[4, 1:5][..., 0], fields["density"][4, 1:5])


def test_cfd_one_file_split_takes_the_last_records_for_test(tmp_path):
  fields = _fields()
  path = layouts.pdebench_cfd(tmp_path / "cfd.hdf5", fields)
  ds = open_set(check_entry("cfd", layouts.entry(path, path, 4, 2, 3, format="pdebench_cfd", n_channels=4,
                                                 t_total=6, in_size=[8, 8]), "test"), str(tmp_path))
  assert (ds.num_train, ds.num_test) == (4, 2) and ds.channel_names == CFD_FIELDS
  np.testing.assert_array_equal(ds.trajectories[3, :][..., 0], fields["Vx"][3])   # train: records 0..3
  np.testing.assert_array_equal(ds.trajectories[4, :][..., 0], fields["Vx"][5])   # test: records 5, 6
  np.testing.assert_array_equal(ds.trajectories[5, :][..., 2], fields["density"][6])


def test_groups_are_the_sorted_samples(tmp_path):
  samples = np.random.default_rng(1).normal(size=(5, 9, 8, 8, 2)).astype(np.float32)
  path = layouts.pdebench_groups(tmp_path / "2D_diff-react_NA_NA.h5", samples)
  records = PDEBenchGroups("dr", path, stride=(2, 1))
  assert records.keys == ["0000", "0001", "0002", "0003", "0004"] and records.shape == (5, 9, 4, 8, 2)
  np.testing.assert_array_equal(records[3, 2:7], samples[3, 2:7, ::2])
