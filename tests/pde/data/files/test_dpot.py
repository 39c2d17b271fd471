"""DPOT's layouts: one file with ``data`` (N, X, Y, T[, C]) and scatter storage (data_{i}.hdf5), read as written."""

import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.data import mixture_batch, mixture_plan, rollout_eval_data
from jaxlab.pde.data.files import DPOTFile, DPOTScatter, check_entry, open_set
from tests.support import pde_file_layouts as layouts


def _random(*shape, seed=0):
  return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("channels", [None, 3])
def test_one_file_frames_are_data_i_moved_to_time_first(tmp_path, channels):
  shape = (5, 6, 7, 9) + ((channels,) if channels else ())
  data = _random(*shape)
  records = DPOTFile("fno", layouts.dpot_file(tmp_path / "train.hdf5", data))
  assert records.shape == (5, 9, 6, 7, channels or 1)
  expected = data if channels else data[..., None]            # a 4-D sample gets a channel axis
  # frames 2..5 of trajectory 3: data[3, :, :, 2:6] with time moved first; copies, so bit-equal
  np.testing.assert_array_equal(records[3, 2:6], np.moveaxis(expected[3, :, :, 2:6], 2, 0))
  np.testing.assert_array_equal(records[1:3, :4], np.moveaxis(expected[1:3, :, :, :4], 3, 1))


def _dpot_bilinear(a, size):
  """torch's F.interpolate(mode='bilinear', align_corners=False) over axes 0, 1 of ``a``, by np.interp."""
  for axis, n_out in ((0, size), (1, size)):
    n_in = a.shape[axis]
    src = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0.0)  # clamped at 0; np.interp clamps the end
    a = np.apply_along_axis(lambda v: np.interp(src, np.arange(n_in), v), axis, a)
  return a


def test_one_file_split_reads_every_point_and_carries_downsample(tmp_path):
  train, test = _random(6, 8, 8, 10), _random(3, 8, 8, 10, seed=1)
  raw = layouts.entry(layouts.dpot_file(tmp_path / "a_train.hdf5", train),
                      layouts.dpot_file(tmp_path / "a_test.hdf5", test), 4, 2, 5,
                      downsample=[2, 2], in_size=[8, 8], n_channels=1, t_total=10)
  ds = open_set(check_entry("a", raw, "test"), str(tmp_path))
  # the stored grid is read whole: DPOT strides after resizing to res, in the loader
  assert (ds.num_train, ds.num_test, ds.num_frames, ds.resolution, ds.downsample) == (4, 2, 10, (8, 8), (2, 2))
  # the first train_size records of the train file, then the first test_size of the test file
  np.testing.assert_array_equal(ds.trajectories[3, :], np.moveaxis(train[3, ..., None], 2, 0))
  np.testing.assert_array_equal(ds.trajectories[5, 1:3], np.moveaxis(test[1, :, :, 1:3, None], 2, 0))


def test_downsample_strides_after_the_resize_to_res_as_dpot(tmp_path):
  # DPOT (utils/griddataset.py:150, 169-171): resize the sample to res x res, then keep every k-th point.
  # A 12^2 set, res 8, downsample (2, 2): 4^2 points of the 8^2 grid (striding first would give 6^2 -> 8^2).
  train, test = _random(3, 12, 12, 6), _random(2, 12, 12, 6, seed=1)
  raw = layouts.entry(layouts.dpot_file(tmp_path / "train.hdf5", train),
                      layouts.dpot_file(tmp_path / "test.hdf5", test), 3, 2, 3, downsample=(2, 2))
  ds = open_set(check_entry("a", raw, "test"), str(tmp_path))
  b = mixture_batch([ds], [1.0], seed=0, step=0, global_batch_size=2, rows=None, t_in=2, t_out=1, resolution=8)
  plan = mixture_plan([ds], [1.0], 0, 0, 2, 2, 1)
  for j in range(2):
    sample = train[plan.trajectory[j], :, :, plan.start[j]:plan.start[j] + 3]    # (X, Y, T): DPOT's H, W, T
    want = _dpot_bilinear(sample, 8)[::2, ::2]
    np.testing.assert_allclose(b["x"][j, ..., 0], want[:, :, :2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b["y"][j, ..., 0], want[:, :, 2:], rtol=1e-5, atol=1e-6)
  ev = rollout_eval_data([ds], t_in=2, num_steps=3, resolution=8)["a"]
  np.testing.assert_allclose(ev["y"][1, ..., 0], _dpot_bilinear(test[1, :, :, 2:5], 8)[::2, ::2], rtol=1e-5,
                             atol=1e-6)
  assert ev["score_mask"].shape == (2, 4, 4, 1) and ev["score_mask"].all()  # a finer set: every point scored


def test_scatter_storage_reads_data_i(tmp_path):
  trajectories = [_random(8, 8, 6, 2, seed=i) for i in range(4)]
  folder = layouts.dpot_scatter(tmp_path / "train", trajectories)
  records = DPOTScatter("pdb", folder, 3)  # only the first train_size files are the set
  assert records.shape == (3, 6, 8, 8, 2)
  np.testing.assert_array_equal(records[2, 1:4], np.moveaxis(trajectories[2][:, :, 1:4], 2, 0))
  # a relative folder in the table is found under the root; the test folder's data_0 is the first test record
  layouts.dpot_scatter(tmp_path / "test", trajectories[3:])
  raw = layouts.entry("train", "test", 3, 1, 2, scatter_storage=True)
  ds = open_set(check_entry("pdb", raw, "test"), str(tmp_path))
  np.testing.assert_array_equal(ds.trajectories[3, :], np.moveaxis(trajectories[3], 2, 0))  # test = test/data_0


def test_a_symlinked_test_file_is_the_train_file(tmp_path):
  # one file by device and inode: its last test_size records are the test set, not its first ones
  data = _random(6, 8, 8, 10)
  train = layouts.dpot_file(tmp_path / "train.hdf5", data)
  (tmp_path / "test.hdf5").symlink_to(train)
  ds = open_set(check_entry("a", layouts.entry(train, tmp_path / "test.hdf5", 4, 2, 2), "test"), str(tmp_path))
  np.testing.assert_array_equal(ds.trajectories[4, :], np.moveaxis(data[4, ..., None], 2, 0))


def test_external_links_are_followed_when_allowed(tmp_path):
  import h5py
  data = _random(4, 8, 8, 6)
  other = layouts.dpot_file(tmp_path / "elsewhere.hdf5", data)
  with h5py.File(tmp_path / "train.hdf5", "w") as f:
    f["data"] = h5py.ExternalLink(other, "/data")
  records = DPOTFile("a", str(tmp_path / "train.hdf5"), allow_external_links=True)
  np.testing.assert_array_equal(records[2, :], np.moveaxis(data[2, ..., None], 2, 0))


def test_a_non_square_grid_needs_the_table_to_say_so(tmp_path):
  """Without in_size / t_total, a DPOT file must read as a square grid: (N, T, X, Y, C) data of any grid reads as a
  T x X grid (refused), and so does legitimate non-square data until the table's in_size or t_total confirms it; an
  in_size of the real grid refuses the swapped file too. A 8x8 grid of 8 frames reads alike in every order:
  accepted (what the check cannot catch, as the guide says)."""
  def entry(path, **kw):
    return check_entry("s", layouts.entry(path, path, 4, 2, 2, **kw), "m")

  swapped = layouts.dpot_file(tmp_path / "a.hdf5", np.moveaxis(_random(6, 16, 8, 10, 2), 3, 1))  # (6, 10, 16, 8, 2)
  with pytest.raises(InputError, match=r"reads as a 10x16 grid of T=8 frames; a grid that is not square"):
    open_set(entry(swapped), str(tmp_path))
  with pytest.raises(InputError, match=r"in_size=\(16, 8\) in the master table, but .* has a 10x16 grid"):
    open_set(entry(swapped, in_size=[16, 8]), str(tmp_path))
  with pytest.raises(InputError, match=r"t_total=10 in the master table, but .* has T=8 frames"):
    open_set(entry(swapped, t_total=10), str(tmp_path))
  wide = layouts.dpot_file(tmp_path / "b.hdf5", _random(6, 16, 8, 10, 2))
  with pytest.raises(InputError, match=r"allowed: the axes in the order \(N, X, Y, T\[, C\]\), or, if this is the "
                     r"data's shape, in_size=\[16, 8\] or t_total=10 in the master table"):
    open_set(entry(wide), str(tmp_path))
  for declared in ({"in_size": [16, 8]}, {"t_total": 10}):
    assert open_set(entry(wide, **declared), str(tmp_path)).trajectories.shape == (6, 10, 16, 8, 2)
  square = layouts.dpot_file(tmp_path / "c.hdf5", _random(6, 8, 8, 8))
  assert open_set(entry(square), str(tmp_path)).num_frames == 8
