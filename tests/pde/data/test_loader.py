"""Window batches: pure in (seed, step), per-row, weighted, channel-padded, split by trajectory."""

import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.data import (make_dataset, mixture_batch, mixture_plan, mixture_probabilities, rollout_eval_data,
                             windows)


def _coded(n, frames, channels, grid=4, offset=0):
  """value = 1000 * (offset + trajectory) + 10 * frame + channel + 1, the same at every grid point."""
  i, t, c = np.meshgrid(np.arange(n), np.arange(frames), np.arange(channels), indexing="ij")
  value = (1000 * (offset + i) + 10 * t + c + 1).astype(np.float32)
  return np.broadcast_to(value[:, :, None, None, :], (n, frames, grid, grid, channels)).copy()


def _decode(window):
  """(X, Y, T, C) -> trajectory ids (T,), frames (T,) from channel 0 at one grid point."""
  v = window[0, 0, :, 0].astype(int) - 1
  return v // 1000, (v % 1000) // 10


@pytest.fixture
def sets():
  return [make_dataset("a", _coded(10, 12, 1), num_test=2),
          make_dataset("b", _coded(6, 8, 2, offset=100), num_test=1),
          make_dataset("c", _coded(5, 9, 1, offset=200), num_test=1)]


def test_same_seed_and_step_same_batch_and_rows_agree(sets):
  args = (sets, [1.0, 2.0, 1.0], 3, 17, 32, None, 2, 1)
  full = mixture_batch(*args)
  again = mixture_batch([make_dataset(d.name, np.array(d.trajectories), num_test=d.num_test)
                         for d in sets], *args[1:])  # fresh objects: no hidden state
  for key in ("x", "y", "dataset", "channel_mask"):
    np.testing.assert_array_equal(full[key], again[key])
  rows = [31, 0, 5, 5, 12]
  part = mixture_batch(sets, [1.0, 2.0, 1.0], 3, 17, 32, rows, 2, 1)
  for key in full:
    np.testing.assert_array_equal(part[key], full[key][rows])
  assert not np.array_equal(mixture_batch(sets, [1.0, 2.0, 1.0], 3, 18, 32, None, 2, 1)["x"], full["x"])
  assert not np.array_equal(mixture_batch(sets, [1.0, 2.0, 1.0], 4, 17, 32, None, 2, 1)["x"], full["x"])


def test_shapes_dtypes_and_consecutive_frames(sets):
  b = mixture_batch(sets, [1, 1, 1], 0, 0, 16, None, 3, 2)
  assert b["x"].shape == (16, 4, 4, 3, 2) and b["y"].shape == (16, 4, 4, 2, 2)
  assert b["x"].dtype == b["y"].dtype == np.float32
  assert b["dataset"].dtype == np.int32 and b["channel_mask"].dtype == bool
  for j in range(16):
    both = np.concatenate([b["x"][j], b["y"][j]], axis=2)
    traj, frames = _decode(both)
    assert len(set(traj)) == 1 and list(np.diff(frames)) == [1] * 4
    assert traj[0] // 100 == b["dataset"][j]  # the offset tells the data set


def test_weights_are_honoured(sets):
  # rule="weight": proportional to the weights alone (the sizes 8 / 5 / 4 do not count)
  b = mixture_batch(sets, [1.0, 3.0, 0.0], 1, 2, 20000, [0], 1, 1, rule="weight")  # one row read, plan for all
  plan = mixture_plan(sets, [1.0, 3.0, 0.0], 1, 2, 20000, 1, 1, rule="weight")
  freq = np.bincount(plan.dataset, minlength=3) / 20000
  np.testing.assert_allclose(freq, [0.25, 0.75, 0.0], atol=0.015)  # ~5 sigma
  assert b["x"].shape[0] == 1
  # Every start frame and every training trajectory is reachable, uniformly.
  a = plan.dataset == 0
  np.testing.assert_array_equal(np.unique(plan.start[a]), np.arange(12 - 2 + 1))
  np.testing.assert_array_equal(np.unique(plan.trajectory[a]), np.arange(8))
  assert np.bincount(plan.trajectory[a]).min() > 0.7 * a.sum() / 8


def _sized(*num_train, frames=4):
  return [make_dataset(f"s{i}", _coded(n + 1, frames, 1, grid=2, offset=100 * i), num_test=1)
          for i, n in enumerate(num_train)]


def test_default_mixture_rule_is_dpots_size_times_weight():
  """DPOT's sampler (utils/griddataset.py:54): set i ~ n_train_i x w_i, so sizes (220, 100) at weights (1, 1)
  give 220/320 = 0.6875 and 100/320 = 0.3125 (both exact in binary), not 1/2 each."""
  sets = _sized(220, 100)
  assert list(mixture_probabilities(sets, [1, 1])) == [220 / 320, 100 / 320] == [0.6875, 0.3125]
  assert list(mixture_probabilities(sets, [1, 1], rule="weight")) == [0.5, 0.5]  # jaxlab's earlier rule
  assert list(mixture_probabilities(sets, [1, 3])) == [220 / 520, 300 / 520]
  g = 20000
  freq = np.bincount(mixture_plan(sets, [1, 1], 0, 7, g, 2, 1).dataset, minlength=2) / g
  np.testing.assert_allclose(freq, [0.6875, 0.3125], atol=5 * np.sqrt(0.6875 * 0.3125 / g))  # 5 sigma
  # the split's own sizes count: the test split is 1 trajectory per set
  assert list(mixture_probabilities(sets, [1, 1], split="test")) == [0.5, 0.5]
  with pytest.raises(InputError, match="mixture rule='sizes'; allowed: 'size_times_weight', 'weight'"):
    mixture_probabilities(sets, [1, 1], rule="sizes")


def test_dpots_ones_padding_and_per_set_horizons(sets):
  b = mixture_batch(sets, [1, 1, 1], 0, 5, 64, None, 2, 2, num_channels=3, pad_value=1.0)
  for j in range(64):
    width = 2 if b["dataset"][j] == 1 else 1
    np.testing.assert_array_equal(b["channel_mask"][j], np.arange(3) < width)
    assert np.all(b["x"][j][..., width:] == 1) and np.all(b["y"][j][..., width:] == 1)
    assert np.all(b["x"][j][..., :width] > 1)
  out = rollout_eval_data(sets, 3, [4, None, 2], num_channels=2, pad_value=1.0)
  assert [out[n]["y"].shape[3] for n in "abc"] == [4, 8 - 3, 2]   # None: every remaining frame
  assert np.all(out["a"]["x"][..., 1] == 1) and np.all(out["a"]["y"][..., 1] == 1)
  with pytest.raises(InputError, match="num_steps has 2 entries for 3 data sets"):
    rollout_eval_data(sets, 3, [4, 2])
  with pytest.raises(InputError, match="data set 'c': t_in=3 \\+ num_steps\\[2\\]=7 = 10 exceeds its 9 frames"):
    rollout_eval_data(sets, 3, [4, 2, 7])


def test_channels_are_zero_padded_and_masked(sets):
  b = mixture_batch(sets, [1, 1, 1], 0, 5, 64, None, 2, 2, num_channels=4)
  assert b["x"].shape[-1] == 4
  for j in range(64):
    width = 2 if b["dataset"][j] == 1 else 1
    np.testing.assert_array_equal(b["channel_mask"][j], np.arange(4) < width)
    assert np.all(b["x"][j][..., width:] == 0) and np.all(b["y"][j][..., width:] == 0)
    assert np.all(b["x"][j][..., :width] > 0)
  with pytest.raises(InputError, match="num_channels=1 is below the widest data set's 2"):
    mixture_batch(sets, [1, 1, 1], 0, 5, 4, None, 2, 2, num_channels=1)


def test_training_never_sees_test_trajectories(sets):
  test_ids = {(d, int(t)) for d, ds in enumerate(sets) for t in ds.split_indices("test")}
  seen = set()
  for step in range(50):
    plan = mixture_plan(sets, [1, 1, 1], 0, step, 64, 2, 1)
    seen |= set(zip(plan.dataset.tolist(), plan.trajectory.tolist()))
  assert not seen & test_ids
  assert len(seen) == 8 + 5 + 4  # every training trajectory did come up
  test_plan = mixture_plan(sets, [1, 1, 1], 0, 0, 64, 2, 1, split="test")
  assert set(zip(test_plan.dataset.tolist(), test_plan.trajectory.tolist())) <= test_ids


def test_single_dataset_windows(sets):
  w = windows(sets[1], 0, 3, 8, 4, 2)
  assert w["x"].shape == (8, 4, 4, 4, 2) and w["y"].shape == (8, 4, 4, 2, 2)
  np.testing.assert_array_equal(w["x"], windows(sets[1], 0, 3, 8, 4, 2, rows=range(8))["x"])


def test_rollout_eval_data_is_the_test_trajectories_from_frame_zero(sets):
  out = rollout_eval_data(sets, 3, num_channels=2)
  assert list(out) == ["a", "b", "c"]
  a = out["a"]
  assert a["x"].shape == (2, 4, 4, 3, 2) and a["y"].shape == (2, 4, 4, 9, 2)
  traj, frames = _decode(np.concatenate([a["x"][1], a["y"][1]], axis=2))
  assert set(traj) == {9} and list(frames) == list(range(12))
  np.testing.assert_array_equal(a["channel_mask"], [[True, False]] * 2)
  assert list(a["dataset"]) == [0, 0] and list(out["b"]["dataset"]) == [1]
  short = rollout_eval_data(sets, 2, num_steps=4, max_trajectories=1)
  assert short["a"]["y"].shape == (1, 4, 4, 4, 2) and short["c"]["x"].shape == (1, 4, 4, 2, 2)


def test_bad_requests_are_refused(sets):
  with pytest.raises(InputError, match="share one grid"):
    mixture_batch([sets[0], make_dataset("big", _coded(3, 12, 1, grid=8))], [1, 1], 0, 0, 4, None, 2, 1)
  with pytest.raises(InputError, match="data set 'b': t_in \\+ t_out = 9 exceeds its 8 frames"):
    mixture_batch(sets, [1, 1, 1], 0, 0, 4, None, 6, 3)
  with pytest.raises(InputError, match="rows must lie in \\[0, 4\\)"):
    mixture_batch(sets, [1, 1, 1], 0, 0, 4, [4], 2, 1)
  with pytest.raises(InputError, match="weights"):
    mixture_batch(sets, [0, 0, 0], 0, 0, 4, None, 2, 1)
  with pytest.raises(InputError, match="one weight per data set"):
    mixture_batch(sets, [1, 1], 0, 0, 4, None, 2, 1)
  with pytest.raises(InputError, match="step=-1"):
    mixture_batch(sets, [1, 1, 1], 0, -1, 4, None, 2, 1)
  with pytest.raises(InputError, match="no test trajectories"):
    rollout_eval_data([make_dataset("n", _coded(3, 5, 1), num_test=0)], 2)
  bad = _coded(4, 5, 1)
  bad[2, 3, 1, 1, 0] = np.nan
  with pytest.raises(InputError, match="data set 'nan': loaded trajectory 2 has non-finite"):
    make_dataset("nan", bad)
