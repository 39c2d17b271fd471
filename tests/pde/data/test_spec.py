"""Data-set specs: defaults, validation, and a cache key that sees every setting."""

import pytest

from jaxlab.errors import InputError
from jaxlab.pde.data import FAMILIES, dataset_spec, default_mixture, fno_navier_stokes


def test_every_setting_changes_the_cache_key():
  base = dataset_spec("ns_fno", 4, resolution=16)
  changed = [dataset_spec("ns_fno", 5, resolution=16), dataset_spec("ns_fno", 4, resolution=16, seed=1),
             dataset_spec("ns_fno", 4, resolution=32), dataset_spec("ns_fno", 4, resolution=16,
                                                                     solver_resolution=32)]
  for key, value in FAMILIES["ns_fno"].defaults.items():
    new = value + 1 if isinstance(value, (int, float)) else 0.5
    if key in ("dt", "dealiasing_fraction"):  # dealiasing_fraction must stay in (0, 1]
      new = value / 2
    if key == "order":  # ETDRK orders are 1..4
      new = value - 1
    if key == "frame_interval":
      new = 2 * value
    changed.append(dataset_spec("ns_fno", 4, resolution=16, **{key: new}))
  keys = {s.cache_key() for s in changed}
  assert base.cache_key() not in keys and len(keys) == len(changed)
  assert dataset_spec("ns_fno", 4, resolution=16, name="other").cache_key() == base.cache_key()


def test_bad_settings_are_refused():
  with pytest.raises(InputError, match="unknown parameters \\['viscocity'\\]"):
    dataset_spec("ns_fno", 4, viscocity=1e-3)
  with pytest.raises(InputError, match="unknown PDE family"):
    dataset_spec("navier", 4)
  with pytest.raises(InputError, match="integer multiple of dt"):
    dataset_spec("ns_fno", 4, dt=0.3)
  with pytest.raises(InputError, match="multiple of resolution"):
    dataset_spec("ns_fno", 4, resolution=64, solver_resolution=96)
  with pytest.raises(InputError, match="no FNO preset"):
    fno_navier_stokes(2e-3, 4)
  with pytest.raises(InputError, match="num_trajectories"):
    dataset_spec("kolmogorov", 0)


def test_fno_presets_and_default_mixture():
  spec = fno_navier_stokes(1e-4, 10)
  assert spec.param_dict["num_frames"] == 30 and spec.num_frames == 31
  assert spec.shape == (10, 31, 64, 64, 1) and spec.name == "ns_fno_nu1e-04"
  specs = default_mixture(100)
  assert [s.family for s in specs] == ["ns_fno"] * 3 + ["kolmogorov", "diffusion_reaction"]
  assert len({s.seed for s in specs}) == 5 and {s.resolution for s in specs} == {64}
  assert [s.num_channels for s in specs] == [1, 1, 1, 1, 2]
