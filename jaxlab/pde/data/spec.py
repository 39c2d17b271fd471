"""What to generate: a family, its full parameter set, the grid, the count and the seed.

A :class:`DatasetSpec` holds every generation parameter (family defaults filled in), so its
:meth:`DatasetSpec.settings` is the cache key's content: any changed setting is a new data set.
Trajectory i's initial state comes from ``fold_in(key(seed), i)`` alone, so the data do not
depend on chunk sizes, and the first n trajectories of a bigger set equal a set of n.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Mapping

from jaxlab.errors import check, is_int, is_real
from jaxlab.pde.data.families import FAMILIES, FNO_VISCOSITIES, GENERATED, check_params, get_family, substeps
from jaxlab.registry import optional_imports

# Bump when the generator's numerics change, so old caches are not reused.
GENERATOR_VERSION = 1


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """One generated data set. Build with :func:`dataset_spec` (which validates and fills defaults)."""

  name: str
  family: str
  num_trajectories: int
  seed: int
  resolution: int
  solver_resolution: int
  params: tuple[tuple[str, Any], ...]  # every family parameter, sorted by name

  @property
  def param_dict(self) -> dict[str, Any]:
    return dict(self.params)

  @property
  def num_channels(self) -> int:
    return get_family(self.family).num_channels

  @property
  def num_frames(self) -> int:
    """Stored frames per trajectory (the initial state plus ``params['num_frames']``)."""
    return self.param_dict["num_frames"] + 1

  @property
  def shape(self) -> tuple[int, int, int, int, int]:
    """(trajectories, frames, X, Y, C) of the stored array."""
    return (self.num_trajectories, self.num_frames, self.resolution, self.resolution,
            self.num_channels)

  def settings(self) -> dict[str, Any]:
    """Everything that decides the data (not the display name), JSON-serialisable."""
    with optional_imports(GENERATED):  # the solver's version is part of the cache key
      import exponax
    return dict(family=self.family, num_trajectories=self.num_trajectories, seed=self.seed,
                resolution=self.resolution, solver_resolution=self.solver_resolution,
                params=dict(self.params), generator_version=GENERATOR_VERSION,
                exponax_version=exponax.__version__, dtype="float32",
                layout="trajectory,frame,x,y,channel")

  def cache_key(self) -> str:
    text = json.dumps(self.settings(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def dataset_spec(family: str, num_trajectories: int, *, seed: int = 0, resolution: int = 64,
                 solver_resolution: int | None = None, name: str | None = None,
                 **params: Any) -> DatasetSpec:
  """Validated spec; ``params`` override the family's defaults (unknown names are refused).

  ``solver_resolution`` (default: ``resolution``) solves on a finer grid and keeps every r-th
  point, as FNO did (256^2 solve, 64^2 data); it must be a multiple of ``resolution``.
  """
  fam = get_family(family)
  unknown = sorted(set(params) - set(fam.defaults))
  check(not unknown, f"unknown parameters {unknown} for family {family!r}; known: {sorted(fam.defaults)}")
  check(is_int(num_trajectories) and 1 <= num_trajectories < 2 ** 32,
        f"num_trajectories={num_trajectories!r} must be an int in [1, 2^32)")
  check(is_int(seed) and 0 <= seed < 2 ** 63, f"seed={seed!r} must be an int in [0, 2^63) (a jax PRNG seed)")
  check(is_int(resolution) and resolution >= 8 and resolution % 2 == 0,
        f"resolution={resolution!r} must be an even int >= 8")
  solver_resolution = resolution if solver_resolution is None else solver_resolution
  check(is_int(solver_resolution) and solver_resolution >= resolution and solver_resolution % resolution == 0,
        f"solver_resolution={solver_resolution!r} must be a multiple of resolution={resolution} "
        "(1, 2, ... times it; the data keep every r-th point)")
  check(name is None or (isinstance(name, str) and name != ""), f"name={name!r} must be a non-empty str or None")
  merged = {**fam.defaults, **params}
  check_params(fam, merged, solver_resolution)  # every value in range, before anything is compiled
  substeps(merged)  # frame_interval must be a whole number of dt steps
  if merged.get("warmup_time", 0) != 0:
    substeps(merged, "warmup_time")
  # Python ints (not NumPy ones): the spec's settings are hashed as JSON.
  return DatasetSpec(name=name or family, family=family, num_trajectories=int(num_trajectories), seed=int(seed),
                     resolution=int(resolution), solver_resolution=int(solver_resolution),
                     params=tuple(sorted(merged.items())))


def fno_navier_stokes(viscosity: float, num_trajectories: int, *, seed: int = 0,
                      resolution: int = 64, solver_resolution: int | None = None,
                      **overrides: Any) -> DatasetSpec:
  """FNO's NS set for viscosity 1e-3, 1e-4 or 1e-5: its frame count (50, 30, 20) and our dt."""
  check(is_real(viscosity),
        f"viscosity={viscosity!r} must be a number; FNO's presets: {sorted(FNO_VISCOSITIES)}")
  matches = [v for v in FNO_VISCOSITIES if abs(v - viscosity) <= 1e-12]
  check(bool(matches), f"viscosity={viscosity} has no FNO preset; allowed: {sorted(FNO_VISCOSITIES)} "
        "(or call dataset_spec('ns_fno', ..., viscosity=..., num_frames=..., dt=...))")
  num_frames, dt = FNO_VISCOSITIES[matches[0]]
  params = {"viscosity": matches[0], "num_frames": num_frames, "dt": dt, **overrides}  # overrides win
  return dataset_spec("ns_fno", num_trajectories, seed=seed, resolution=resolution,
                      solver_resolution=solver_resolution, name=f"ns_fno_nu{matches[0]:.0e}", **params)


#: DPOT's test horizon for FNO's three sets (thu-ml/DPOT @ dcd2f9a, utils/make_master_file.py, ``t_test``
#: at lines 44, 30, 17), viscosity -> frames predicted auto-regressively after t_in = 10 frames of
#: FNO's ``u`` (which starts at t = 1; w0 is FNO's ``a`` and not in DPOT's data). So DPOT tests
#: t = 11..30, 11..30 and 11..20 of trajectories of T = 50 / 30 / 20.
DPOT_T_TEST: dict[float, int] = {1e-3: 20, 1e-4: 20, 1e-5: 10}


def dpot_t_test(spec: DatasetSpec) -> int | None:
  """DPOT's test horizon for an FNO preset (``ns_fno`` at an FNO viscosity with its frame count), else None."""
  if spec.family != "ns_fno":
    return None
  params = spec.param_dict
  for nu, (num_frames, _) in FNO_VISCOSITIES.items():
    if abs(params["viscosity"] - nu) <= 1e-12 and params["num_frames"] == num_frames:
      return DPOT_T_TEST[nu]
  return None


def default_mixture(num_trajectories: int = 200, *, seed: int = 0,
                    resolution: int = 64) -> list[DatasetSpec]:
  """The five 64^2 sets for multi-data-set pre-training: FNO NS x3, Kolmogorov, diffusion-reaction.

  Each set gets its own seed (seed + index) so no two share initial-state noise.
  """
  specs = [fno_navier_stokes(nu, num_trajectories, seed=seed + i, resolution=resolution)
           for i, nu in enumerate(sorted(FNO_VISCOSITIES, reverse=True))]
  specs.append(dataset_spec("kolmogorov", num_trajectories, seed=seed + 3, resolution=resolution))
  specs.append(dataset_spec("diffusion_reaction", num_trajectories, seed=seed + 4,
                            resolution=resolution))
  return specs


def describe(spec: DatasetSpec) -> Mapping[str, Any]:
  """A small human-readable summary (family equation, channels, shape)."""
  fam = FAMILIES[spec.family]
  return dict(name=spec.name, family=spec.family, equation=fam.summary,
              channels=list(fam.channel_names), shape=list(spec.shape))
