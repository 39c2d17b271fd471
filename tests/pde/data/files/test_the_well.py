"""The Well's format read with h5py: channels t0, t1 (D components), t2 (D^2), constant fields left out."""

import numpy as np

from jaxlab.pde.data.files import TheWell, check_entry, open_set
from tests.support import pde_file_layouts as layouts


def _arrays(n, seed=0, t=5, x=8, y=6):
  rng = np.random.default_rng(seed)
  return (rng.normal(size=(n, t, x, y)).astype(np.float32), rng.normal(size=(n, t, x, y, 2)).astype(np.float32),
          rng.normal(size=(n, t, x, y, 2, 2)).astype(np.float32), rng.normal(size=(x, y)).astype(np.float32))


def test_channels_in_the_wells_order(tmp_path):
  pressure, velocity, stress, mask = _arrays(3)
  path = layouts.the_well(tmp_path / "shear_flow_0.hdf5", {"pressure": pressure}, {"velocity": velocity},
                          {"stress": stress}, constant={"mask": mask})
  well = TheWell("well", path)
  assert well.channel_names == ("pressure", "velocity_x", "velocity_y", "stress_xx", "stress_xy", "stress_yx",
                                "stress_yy")  # the constant field is not a channel
  got = well[2, 1:4]
  assert got.shape == (3, 8, 6, 7)
  np.testing.assert_array_equal(got[..., 0], pressure[2, 1:4])
  np.testing.assert_array_equal(got[..., 1:3], velocity[2, 1:4])
  np.testing.assert_array_equal(got[..., 3:], stress[2, 1:4].reshape(3, 8, 6, 4))
  only = TheWell("well", path, fields=("velocity",), stride=(2, 2))
  np.testing.assert_array_equal(only[0, :], velocity[0, :, ::2, ::2])


def test_a_folder_of_files_numbers_trajectories_file_by_file(tmp_path):
  (tmp_path / "train").mkdir()
  first, second = _arrays(2, seed=1)[0], _arrays(3, seed=2)[0]
  layouts.the_well(tmp_path / "train" / "b.hdf5", {"u": second})
  layouts.the_well(tmp_path / "train" / "a.hdf5", {"u": first})       # sorted: a.hdf5 first
  raw = layouts.entry("train", "train", 4, 1, 2, format="the_well")
  ds = open_set(check_entry("w", raw, "test"), str(tmp_path))
  assert ds.trajectories.shape == (5, 5, 8, 6, 1)
  np.testing.assert_array_equal(ds.trajectories[1, :][..., 0], first[1])
  np.testing.assert_array_equal(ds.trajectories[2, :][..., 0], second[0])
  np.testing.assert_array_equal(ds.trajectories[4, :][..., 0], second[2])  # the last record is the test one


def test_a_field_stored_once_for_every_trajectory_is_broadcast(tmp_path):
  u, forcing = _arrays(3)[0], _arrays(1, seed=3)[0][0]              # forcing (T, X, Y): not sample-varying
  path = layouts.the_well(tmp_path / "f.hdf5", {"u": u})
  import h5py
  with h5py.File(path, "a") as f:
    d = f["t0_fields"].create_dataset("forcing", data=forcing)
    d.attrs["dim_varying"], d.attrs["sample_varying"], d.attrs["time_varying"] = [True, True], False, True
    f["t0_fields"].attrs["field_names"] = ["u", "forcing"]
  well = TheWell("well", path)
  np.testing.assert_array_equal(well[1, 2:4][..., 1], forcing[2:4])
  np.testing.assert_array_equal(well[2, 2:4][..., 1], forcing[2:4])
