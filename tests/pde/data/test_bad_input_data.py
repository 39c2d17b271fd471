"""Bad input to PDE data generation: each case ends in ONE line naming the bad value.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Every family
parameter, grid and count is checked on concrete values when the spec is made, before anything
is generated or compiled, so every case takes milliseconds (none solves a PDE).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from jaxlab.pde.data import (FAMILIES, dataset_spec, default_mixture, fno_navier_stokes, generate,  # noqa: E402
                             load_or_generate, make_dataset, mixture_batch, rollout_eval_data)
from jaxlab.pde.data import store  # noqa: E402
from jaxlab.pde.data.grf import fno_gaussian_random_field  # noqa: E402
from jaxlab.pde.data.steppers import FitzHughNagumo, ForcedNavierStokesVorticity, rollout_frames  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]


def _spec(family: str, **kw: Any) -> Callable[[], Any]:
  return lambda: dataset_spec(family, 4, resolution=16, **kw)


def _ns(**kw: Any) -> Callable[[], Any]:
  return _spec("ns_fno", **kw)


def _ko(**kw: Any) -> Callable[[], Any]:
  return _spec("kolmogorov", **kw)


def _dr(**kw: Any) -> Callable[[], Any]:
  return _spec("diffusion_reaction", **kw)


_DATASET = make_dataset("d", np.zeros((6, 8, 8, 8, 1), np.float32), num_test=2)


def _rollout_data(*args: Any, **kw: Any) -> Callable[[], Any]:
  return lambda: rollout_eval_data([_DATASET], *args, **kw)


def _truncated(path, shape) -> None:
  np.save(path, np.zeros(shape, np.float32))
  os.truncate(path, os.path.getsize(path) // 2)


def _npz(path) -> None:
  with open(path, "wb") as f:  # a file object: np.savez would append .npz to a name
    np.savez(f, a=np.zeros(3))


def _damaged_cache(write: Callable[[Any, tuple], None], settings: bytes | None = None) -> Callable[[], Any]:
  """Loads a tiny set from a cache folder whose files ``write`` (and ``settings``) damage; nothing is generated."""
  def run():
    spec = dataset_spec("ns_fno", 2, resolution=8)
    cache = tempfile.mkdtemp(prefix="jaxlab-bad-cache-")
    try:
      folder = store.dataset_dir(spec, cache)
      folder.mkdir(parents=True)
      (folder / store.SETTINGS_FILE).write_bytes(settings or json.dumps(spec.settings()).encode())
      write(folder / store.DATA_FILE, spec.shape)
      return load_or_generate(spec, cache, progress=False)
    finally:
      shutil.rmtree(cache, ignore_errors=True)
  return run


CASES: list[Case] = [
    # physical parameters: a sign that makes the PDE ill-posed is refused, not blamed on dt later
    ("pde data", "negative NS viscosity", _ns(viscosity=-1e-3),
     "viscosity=-0.001 of family 'ns_fno'; must be a finite number > 0 (kinematic viscosity nu"),
    ("pde data", "zero Kolmogorov viscosity (Re = inf)", _ko(viscosity=0.0),
     "viscosity=0.0 of family 'kolmogorov'; must be a finite number > 0"),
    ("pde data", "viscosity as a string", _ns(viscosity="1e-3"), "viscosity='1e-3' of family 'ns_fno'"),
    ("pde data", "negative diffusivity of u", _dr(diffusivity_u=-1e-3),
     "diffusivity_u=-0.001 of family 'diffusion_reaction'; must be a finite number >= 0"),
    ("pde data", "negative diffusivity of v", _dr(diffusivity_v=-5e-3), "diffusivity_v=-0.005 of family"),
    ("pde data", "non-finite reaction constant", _dr(k=float("nan")),
     "k=nan of family 'diffusion_reaction'; must be a finite number (FitzHugh-Nagumo reaction constant)"),
    ("pde data", "reaction constant as a string", _dr(k="5e-3"), "k='5e-3' of family 'diffusion_reaction'"),
    ("pde data", "anti-damping Kolmogorov drag", _ko(drag=0.1),
     "drag=0.1 of family 'kolmogorov'; must be a finite number <= 0 (linear drag rate"),
    ("pde data", "Kolmogorov forcing mode 0", _ko(injection_mode=0),
     "injection_mode=0 of family 'kolmogorov'; must be an int >= 1"),
    ("pde data", "Kolmogorov forcing above Nyquist", _ko(injection_mode=9),
     "injection_mode=9 of family 'kolmogorov'; must be <= 8 (Nyquist of the 16-point solver grid)"),
    ("pde data", "non-finite Kolmogorov forcing", _ko(injection_scale=float("inf")), "injection_scale=inf of family"),
    ("pde data", "non-finite NS forcing", _ns(forcing_amplitude=float("nan")),
     "forcing_amplitude=nan of family 'ns_fno'"),
    ("pde data", "zero initial-state scale (identical trajectories)", _ko(ic_scale=0.0),
     "ic_scale=0.0 of family 'kolmogorov'; must be a finite number > 0"),
    ("pde data", "zero initial-state std", _dr(ic_std=0.0), "ic_std=0.0 of family 'diffusion_reaction'; must be"),
    # the GRF initial state
    ("pde data", "GRF exponent <= 1", _ns(grf_alpha=1.0),
     "grf_alpha=1.0 of family 'ns_fno'; must be a finite number > 1"),
    ("pde data", "negative GRF exponent", _ns(grf_alpha=-50.0), "grf_alpha=-50.0 of family 'ns_fno'"),
    ("pde data", "GRF exponent that overflows", _ns(grf_alpha=500.0),
     "grf_alpha=500.0, grf_tau=7.0 make no field on 16^2 points: the GRF amplitudes overflow float32"),
    ("pde data", "GRF that underflows to zero", _ns(grf_alpha=300.0, grf_tau=1e-3),
     "grf_alpha=300.0, grf_tau=0.001 make no field on 16^2 points: the GRF amplitudes underflow to 0"),
    ("pde data", "GRF tau <= 0", _ns(grf_tau=0.0), "grf_tau=0.0 of family 'ns_fno'; must be a finite number > 0"),
    ("pde data", "GRF sampler: exponent", lambda: fno_gaussian_random_field(jax.random.key(0), 16, alpha=-1.0),
     "grf_alpha=-1.0; must be a finite number > 1"),
    ("pde data", "GRF sampler: 0 points", lambda: fno_gaussian_random_field(jax.random.key(0), 0),
     "num_points=0; must be an int >= 2"),
    # solver settings
    ("pde data", "ETDRK order 0 (drops the nonlinearity)", _ns(order=0),
     "order=0 of family 'ns_fno'; must be an int in [1, 4] (ETDRK order"),
    ("pde data", "ETDRK order 5", _dr(order=5), "order=5 of family 'diffusion_reaction'; must be an int in [1, 4]"),
    ("pde data", "dealiasing fraction 0", _ns(dealiasing_fraction=0.0),
     "dealiasing_fraction=0.0 of family 'ns_fno'; must be None or a finite number in (0, 1]"),
    ("pde data", "dealiasing fraction above 1", _ko(dealiasing_fraction=1.5), "dealiasing_fraction=1.5 of family"),
    ("pde data", "zero dt", _ns(dt=0.0),
     "dt=0.0 of family 'ns_fno'; must be a finite number > 0 (the solver's time step)"),
    ("pde data", "boolean dt", _dr(dt=True), "dt=True of family 'diffusion_reaction'; must be a finite number > 0"),
    ("pde data", "negative frame interval", _ns(frame_interval=-1.0),
     "frame_interval=-1.0 of family 'ns_fno'; must be"),
    ("pde data", "frame interval not a multiple of dt", _ns(dt=0.3),
     "frame_interval=1.0 must be a positive integer multiple of dt=0.3"),
    ("pde data", "negative warm-up", _ko(warmup_time=-1.0),
     "warmup_time=-1.0 of family 'kolmogorov'; must be a finite number >= 0"),
    ("pde data", "zero domain", _dr(domain_extent=0.0), "domain_extent=0.0 of family 'diffusion_reaction'; must be"),
    ("pde data", "zero frames", _ns(num_frames=0), "num_frames=0 of family 'ns_fno'; must be an int >= 1"),
    ("pde data", "fractional frames", _ko(num_frames=2.5),
     "num_frames=2.5 of family 'kolmogorov'; must be an int >= 1"),
    ("pde data", "unknown parameter", _ns(viscocity=1e-3), "unknown parameters ['viscocity'] for family 'ns_fno'"),
    # grid, counts, seeds
    ("pde data", "odd resolution", lambda: dataset_spec("ns_fno", 4, resolution=33),
     "resolution=33 must be an even int >= 8"),
    ("pde data", "solver resolution 0", lambda: dataset_spec("ns_fno", 4, resolution=16, solver_resolution=0),
     "solver_resolution=0 must be a multiple of resolution=16"),
    ("pde data", "negative solver resolution", lambda: dataset_spec("ns_fno", 4, resolution=16, solver_resolution=-16),
     "solver_resolution=-16 must be a multiple of resolution=16"),
    ("pde data", "zero trajectories", lambda: dataset_spec("kolmogorov", 0),
     "num_trajectories=0 must be an int in [1, 2^32)"),
    ("pde data", "trajectories beyond the key range", lambda: dataset_spec("kolmogorov", 2 ** 32),
     "num_trajectories=4294967296 must be an int in [1, 2^32)"),
    ("pde data", "negative seed", lambda: dataset_spec("kolmogorov", 4, seed=-1),
     "seed=-1 must be an int in [0, 2^63)"),
    ("pde data", "seed beyond jax's range", lambda: dataset_spec("kolmogorov", 4, seed=2 ** 64),
     "seed=18446744073709551616 must be an int in [0, 2^63)"),
    ("pde data", "empty name", lambda: dataset_spec("kolmogorov", 4, name=""),
     "name='' must be a non-empty str or None"),
    ("pde data", "unknown family", lambda: dataset_spec("burgers", 4), "unknown PDE family 'burgers'; known:"),
    ("pde data", "FNO preset: viscosity as a string", lambda: fno_navier_stokes("1e-3", 4),
     "viscosity='1e-3' must be a number"),
    ("pde data", "FNO preset: unknown viscosity", lambda: fno_navier_stokes(2e-3, 4),
     "viscosity=0.002 has no FNO preset"),
    ("pde data", "mixture: zero trajectories", lambda: default_mixture(0), "num_trajectories=0 must be an int"),
    ("pde data", "generate: chunk size 0", lambda: generate(dataset_spec("kolmogorov", 2, resolution=8), chunk_size=0),
     "chunk_size=0 must be an int >= 1 (trajectories per vmapped solver call)"),
    ("pde data", "data set larger than the disk",
     lambda: load_or_generate(dataset_spec("kolmogorov", 2 ** 32 - 1, resolution=64), tempfile.mkdtemp()),
     "data set 'kolmogorov' needs"),
    # the steppers and the frame recorder (public building blocks)
    ("pde data", "stepper: negative NS diffusivity",
     lambda: ForcedNavierStokesVorticity(1.0, 16, 0.01, diffusivity=-1e-3, forcing=np.zeros((16, 16))),
     "diffusivity=-0.001; must be a finite number >= 0"),
    ("pde data", "stepper: negative FitzHugh-Nagumo diffusivity",
     lambda: FitzHughNagumo(2.0, 16, 0.01, diffusivity_u=1e-3, diffusivity_v=-1.0, k=5e-3),
     "diffusivity_v=-1.0; must be a finite number >= 0"),
    ("pde data", "frame recorder: negative frame count",
     lambda: rollout_frames(None, jnp.zeros((1, 8, 8)), substeps=1, num_frames=-1),
     "num_frames=-1; must be an int >= 1"),
    ("pde data", "frame recorder: 0 substeps",
     lambda: rollout_frames(None, jnp.zeros((1, 8, 8)), substeps=0, num_frames=2), "substeps=0; must be an int >= 1"),
    # windows and the rollout evaluation data
    ("pde data", "rollout of 0 frames (L2RE 0/0)", _rollout_data(3, 0),
     "num_steps=0 for data set 'd' must be an int >= 1 (frames to roll out) or None"),
    ("pde data", "negative rollout length", _rollout_data(3, [-2]),
     "num_steps[0]=-2 for data set 'd' must be an int >= 1"),
    ("pde data", "rollout past the last frame", _rollout_data(3, 6),
     "data set 'd': t_in=3 + num_steps=6 = 9 exceeds its 8 frames"),
    ("pde data", "t_in leaves no frame", _rollout_data(8, None),
     "data set 'd': no frames left after t_in=8 of its 8 frames"),
    ("pde data", "negative max_trajectories", _rollout_data(3, 2, max_trajectories=-1),
     "max_trajectories=-1 must be None (all test trajectories) or an int >= 1"),
    ("pde data", "t_in of 0 in the rollout data", _rollout_data(0, 2), "t_in=0; must be an int >= 1"),
    ("pde data", "non-finite padding value", _rollout_data(3, 2, num_channels=2, pad_value=float("nan")),
     "pad_value=nan must be a finite number"),
    ("pde data", "t_in as a string", lambda: mixture_batch([_DATASET], [1.0], 0, 0, 2, None, "3", 1),
     "t_in='3' and t_out=1 must both be ints >= 1"),
    ("pde data", "num_channels below the data's",
     lambda: mixture_batch([_DATASET], [1.0], 0, 0, 2, None, 3, 1, num_channels=0),
     "num_channels=0 is below the widest data set's 1 channels; must be an int >= 1"),
    ("pde data", "num_test of all trajectories",
     lambda: make_dataset("d", np.zeros((4, 3, 8, 8, 1), np.float32), num_test=4),
     "data set 'd': num_test=4 must be in [0, 3]"),
    # a damaged cache file is named, not numpy's error
    ("pde data", "truncated cached .npy", _damaged_cache(lambda path, shape: _truncated(path, shape)),
     "trajectories.npy is not a readable .npy array ("),
    ("pde data", "object-dtype cached .npy", _damaged_cache(
        lambda path, shape: np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)),
     "trajectories.npy is not a readable .npy array (Array can't be memory-mapped"),
    ("pde data", "an .npz archive as the cached .npy", _damaged_cache(lambda path, shape: _npz(path)),
     "trajectories.npy is an .npz archive, not one .npy array; delete the folder"),
    ("pde data", "non-UTF-8 cache settings", _damaged_cache(
        lambda path, shape: np.save(path, np.zeros(shape, np.float32)), settings=b"\xff{}"),
     "settings.json is not readable JSON ("),
]


def test_every_family_parameter_has_a_bound():
  for family in FAMILIES.values():
    assert set(family.bounds) == set(family.defaults), family.name
    for key, value in family.defaults.items():
      assert family.bounds[key].allows(value), (family.name, key, value)


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
