"""DPOT's mixed resolutions: bilinear resampling (torch's align_corners=False rule) and the test mask's points."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.pde.data import make_dataset, mixture_batch, mixture_plan, rollout_eval_data
from jaxlab.pde.data.resample import bilinear_weights, evaluation_points, resample
from tests.support.tolerances import assert_close_to_scale, ops_rtol


@pytest.mark.parametrize("source, target", [((8, 8), (16, 16)), ((16, 16), (8, 8)), ((12, 12), (8, 8)),
                                            ((6, 10), (16, 4))])
def test_matches_jax_image_resize(source, target):
  """An independent implementation of the same rule: jax.image.resize, bilinear, no anti-aliasing."""
  x = np.random.default_rng(0).normal(size=(*source, 3, 2)).astype(np.float32)
  reference = jax.image.resize(jnp.asarray(x), (*target, 3, 2), method="bilinear", antialias=False)
  # Each output is a weighted sum of 4 inputs (weights summing to 1), rounded in float32 on both sides.
  assert_close_to_scale(resample(x, target), reference, ops_rtol(8))


def test_hand_computed_upsampling():
  # source coordinates of 4 outputs from 2 points: (i + 0.5) / 2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25
  np.testing.assert_allclose(bilinear_weights(2, 4), [[1, 0], [0.75, 0.25], [0.25, 0.75], [0, 1]])
  np.testing.assert_array_equal(bilinear_weights(5, 5), np.eye(5))


def test_the_test_mask_keeps_the_points_of_the_sets_own_grid():
  mask = evaluation_points((8, 8), 16)
  assert mask.sum() == 64 and mask[::2, ::2].all()                   # every 2nd point: 8 x 8 of them
  assert evaluation_points((16, 16), 16).all() and evaluation_points((32, 32), 16).all()


def _sets():
  rng = np.random.default_rng(1)
  coarse = make_dataset("coarse", rng.normal(size=(5, 6, 8, 8, 1)).astype(np.float32), num_test=2)
  fine = make_dataset("fine", rng.normal(size=(4, 6, 16, 16, 2)).astype(np.float32), num_test=1,
                      eval_channels=1)
  return [coarse, fine]


def test_sets_at_two_grids_train_together_at_one():
  sets = _sets()
  b = mixture_batch(sets, [1, 1], 0, 0, 10, None, 3, 1, pad_value=1.0, resolution=16)
  plan = mixture_plan(sets, [1, 1], 0, 0, 10, 3, 1)
  assert b["x"].shape == (10, 16, 16, 3, 2) and set(b["dataset"].tolist()) == {0, 1}
  for j in range(10):
    ds = sets[plan.dataset[j]]
    window = np.moveaxis(ds.trajectories[plan.trajectory[j], plan.start[j]:plan.start[j] + 4], 0, 2)
    expected = resample(window, 16)  # the same function on the same window: equal bits
    np.testing.assert_array_equal(np.concatenate([b["x"][j], b["y"][j]], axis=2)[..., :ds.num_channels], expected)
    np.testing.assert_array_equal(b["x"][j][..., ds.num_channels:], 1.0)  # DPOT's ones padding


def test_evaluation_data_carry_dpots_test_mask():
  e = rollout_eval_data(_sets(), 3, None, resolution=16)
  assert e["coarse"]["x"].shape == (2, 16, 16, 3, 2)
  score = e["coarse"]["score_mask"]
  assert score.shape == (2, 16, 16, 2) and score[:, ::2, ::2, 0].all() and score.sum() == 2 * 64
  fine = e["fine"]["score_mask"]
  assert fine[..., 0].all() and not fine[..., 1].any()               # eval_channels=1 (DPOT's pred_channels)
  np.testing.assert_array_equal(e["fine"]["channel_mask"], [[True, True]])  # both channels are real
