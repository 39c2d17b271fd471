"""Batched generation: determinism, chunking, every family, refusal of non-finite trajectories."""

import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.data import dataset_spec, generate
from jaxlab.pde.data import generator
from tests.support.tolerances import assert_close_to_scale, ops_rtol

TINY = dict(resolution=16, num_frames=2, dt=0.125, order=2)  # ns_fno, quick to compile


def _spec(n=3, **kw):
  return dataset_spec("ns_fno", n, **{**TINY, **kw})


@pytest.fixture(scope="module")
def base():
  return generate(_spec(3), chunk_size=3, progress=False)


def test_same_seed_same_data_other_seed_other_data(base):
  assert base.shape == (3, 3, 16, 16, 1) and base.dtype == np.float32
  np.testing.assert_array_equal(generate(_spec(3), chunk_size=3, progress=False), base)  # one program, twice
  assert not np.allclose(generate(_spec(3, seed=1), chunk_size=3, progress=False), base)
  assert not np.allclose(base[0], base[1])  # trajectories differ from each other


def test_data_do_not_depend_on_chunking_or_count(base):
  # Each trajectory's initial condition comes from its own key, so chunking changes nothing but
  # the solver's batch size; XLA may fuse a batch of 2 and of 3 differently (jax 0.12: a few
  # elements differ in the last float32 bit), so the bound is the solver's rounding: 2 frames of
  # 8 steps, each a few FFTs of 16 x 16 (log2(256) = 8 rounding stages each, Higham Sec. 24.1)
  # and the pointwise products, ~100 roundings per step, relative to the field's scale.
  tol = ops_rtol(2 * 8 * 100)
  assert_close_to_scale(generate(_spec(3), chunk_size=2, progress=False), base, tol)
  assert_close_to_scale(generate(_spec(2), chunk_size=2, progress=False), base[:2], tol)


@pytest.mark.parametrize("family, extra", [
    ("kolmogorov", dict(warmup_time=0.5, dt=0.05, frame_interval=0.25)),
    ("diffusion_reaction", dict(dt=0.025))])
def test_other_families_generate_finite_frames_with_their_channels(family, extra):
  spec = dataset_spec(family, 2, resolution=16, num_frames=2, order=2, **extra)
  out = generate(spec, progress=False)
  assert out.shape == spec.shape and np.isfinite(out).all() and out.std() > 0.01
  assert not np.allclose(out[:, 1], out[:, 2])  # it evolves


def test_non_finite_generated_trajectory_is_refused_by_index(monkeypatch):
  def fake_simulator(spec):
    chunks = []

    def run(keys):
      out = np.zeros((len(keys), *spec.shape[1:]), np.float32)
      if len(chunks) == 1:
        out[1, 1, 0, 0, 0] = np.inf  # second chunk of two: global trajectory 3
      chunks.append(len(keys))
      return out

    return run

  monkeypatch.setattr(generator, "batch_simulator", fake_simulator)
  with pytest.raises(InputError, match=r"data set 'ns_fno': generated trajectory 3 has non-finite"):
    generate(_spec(5), chunk_size=2, progress=False)


def test_unstable_settings_are_refused_by_name():
  spec = dataset_spec("diffusion_reaction", 2, resolution=16, num_frames=2, dt=0.5,
                      frame_interval=0.5, ic_std=30.0, name="dr_unstable")
  with pytest.raises(InputError, match=r"data set 'dr_unstable': generated trajectory 0 .*lower dt=0.5"):
    generate(spec, progress=False)
