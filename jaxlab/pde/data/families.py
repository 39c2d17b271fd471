"""The PDE families jaxlab generates: equations, documented default parameters, initial states.

Every family maps (parameters, grid size N, PRNG key) to one trajectory of shape
(num_frames + 1, N, N, C): frame 0 is the initial state (after any warm-up), then one frame every
``frame_interval`` time units. Time steps are fixed (no adaptivity, so every trajectory of a
batch runs the same program under ``vmap``); the defaults were chosen from Courant numbers
measured on generated data and a half-dt comparison (docs/methods/dpot.md, "PDE data: accuracy";
benchmarks/pde_data_accuracy.py).

* ``ns_fno``: FNO's forced 2-D Navier-Stokes vorticity (Li et al., ICLR 2021, Sec. 5.3), 1 channel.
* ``kolmogorov``: Kolmogorov flow, vorticity form (exponax ``KolmogorovFlowVorticity``), 1 channel.
* ``diffusion_reaction``: PDEBench's FitzHugh-Nagumo system (Takamoto et al. 2022), 2 channels (u, v).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp

from jaxlab.errors import InputError, check, is_int, is_real
from jaxlab.pde.data import grf
from jaxlab.registry import optional_imports

#: What needs exponax, in the one line a missing one gives (reading data sets from files does not).
GENERATED = "a generated PDE data set"


def _solvers() -> tuple[Any, Any]:
  """exponax and jaxlab's steppers on it, imported on first generation (importing jaxlab.pde.data needs neither)."""
  with optional_imports(GENERATED):
    import exponax
    from jaxlab.pde.data import steppers
  return exponax, steppers


@dataclasses.dataclass(frozen=True)
class Bound:
  """The allowed values of one family parameter; ``why`` says what it is (the message ends with it)."""

  why: str
  low: float | None = None      # None: no lower bound
  high: float | None = None     # None: no upper bound (always inclusive)
  open_low: bool = False        # True: value > low; False: value >= low
  integer: bool = False
  optional: bool = False        # None allowed

  def allows(self, value: Any) -> bool:
    if value is None:
      return self.optional
    if not (is_int(value) if self.integer else is_real(value)) or not math.isfinite(value):
      return False
    if self.low is not None and (value <= self.low if self.open_low else value < self.low):
      return False
    return self.high is None or value <= self.high

  def describe(self) -> str:
    text = "an int" if self.integer else "a finite number"
    if self.low is not None and self.high is not None:
      text += f" in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}]"
    elif self.low is not None:
      text += f" {'>' if self.open_low else '>='} {self.low:g}"
    elif self.high is not None:
      text += f" <= {self.high:g}"
    return f"None or {text}" if self.optional else text


@dataclasses.dataclass(frozen=True)
class Family:
  """A PDE family: ``simulate(params, num_points, key) -> (num_frames + 1, N, N, C)`` float32.

  ``bounds`` holds the allowed values of every parameter in ``defaults``; ``check_grid`` (optional)
  refuses parameters that do not fit the solver grid of N points (e.g. a forcing above Nyquist).
  """

  name: str
  channel_names: tuple[str, ...]
  defaults: Mapping[str, Any]
  simulate: Callable[[Mapping[str, Any], int, jax.Array], jax.Array]
  summary: str
  bounds: Mapping[str, Bound] = dataclasses.field(default_factory=dict)
  check_grid: Callable[[Mapping[str, Any], int], None] | None = None

  @property
  def num_channels(self) -> int:
    return len(self.channel_names)


def check_params(family: Family, params: Mapping[str, Any], num_points: int) -> None:
  """Refuses (one line, naming the parameter) any value outside its :class:`Bound` or the grid's reach.

  Run on concrete values before anything is compiled: a negative viscosity or diffusivity, an
  ETDRK order of 0 (which drops the nonlinear term) or a GRF that makes no field would otherwise
  surface as NaN trajectories blamed on the time step, or as silently wrong data.
  """
  for key, bound in family.bounds.items():
    value = params[key]
    check(bound.allows(value), f"{key}={value!r} of family {family.name!r}; must be {bound.describe()} ({bound.why})")
  if family.check_grid is not None:
    family.check_grid(params, num_points)


def substeps(params: Mapping[str, Any], interval_key: str = "frame_interval") -> int:
  """How many ``dt`` steps make one ``params[interval_key]``; the ratio must be an integer."""
  ratio = params[interval_key] / params["dt"]
  count = round(ratio)
  check(count >= 1 and math.isclose(ratio, count, rel_tol=1e-9),
        f"{interval_key}={params[interval_key]} must be a positive integer multiple of dt={params['dt']}")
  return count


def _check_ns_fno_grid(params: Mapping[str, Any], num_points: int) -> None:
  grf.check_parameters(num_points, params["grf_alpha"], params["grf_tau"], where="family 'ns_fno': ")


def _check_kolmogorov_grid(params: Mapping[str, Any], num_points: int) -> None:
  # exponax adds the forcing at rfft wavenumber injection_mode; above Nyquist there is none.
  mode = params["injection_mode"]
  check(mode <= num_points // 2, f"injection_mode={mode} of family 'kolmogorov'; must be <= {num_points // 2} "
        f"(Nyquist of the {num_points}-point solver grid); a higher mode is not on the grid, so the flow "
        "would be unforced")


def _channels_last(trajectory: jax.Array) -> jax.Array:
  return jnp.moveaxis(trajectory, 1, -1).astype(jnp.float32)  # (T+1, C, N, N) -> (T+1, N, N, C)


def _simulate_ns_fno(params: Mapping[str, Any], num_points: int, key: jax.Array) -> jax.Array:
  _, steppers = _solvers()
  stepper = steppers.ForcedNavierStokesVorticity(
      params["domain_extent"], num_points, params["dt"], diffusivity=params["viscosity"],
      forcing=steppers.fno_forcing(num_points, params["forcing_amplitude"]),
      convection_scale=params["convection_scale"], order=params["order"],
      dealiasing_fraction=params["dealiasing_fraction"])
  w0 = grf.fno_gaussian_random_field(key, num_points, params["grf_alpha"], params["grf_tau"])
  trajectory = steppers.rollout_frames(stepper, w0[None], substeps=substeps(params),
                                       num_frames=params["num_frames"])
  return _channels_last(trajectory.at[0].set(w0[None]))  # frame 0 is w0 exactly, as in FNO's 'a'


def _simulate_kolmogorov(params: Mapping[str, Any], num_points: int, key: jax.Array) -> jax.Array:
  exponax, steppers = _solvers()
  stepper = exponax.stepper.KolmogorovFlowVorticity(
      2, params["domain_extent"], num_points, params["dt"], diffusivity=params["viscosity"],
      convection_scale=params["convection_scale"], drag=params["drag"],
      injection_mode=params["injection_mode"], injection_scale=params["injection_scale"],
      order=params["order"], dealiasing_fraction=params["dealiasing_fraction"])
  # A random smooth start; the warm-up carries it onto the attractor, which is what is recorded.
  w0 = params["ic_scale"] * grf.fno_gaussian_random_field(key, num_points)
  warmup = 0 if params["warmup_time"] == 0 else substeps(params, "warmup_time")
  return _channels_last(steppers.rollout_frames(
      stepper, w0[None], substeps=substeps(params), num_frames=params["num_frames"], warmup_steps=warmup))


def _simulate_diffusion_reaction(params: Mapping[str, Any], num_points: int,
                                 key: jax.Array) -> jax.Array:
  _, steppers = _solvers()
  stepper = steppers.FitzHughNagumo(
      params["domain_extent"], num_points, params["dt"], diffusivity_u=params["diffusivity_u"],
      diffusivity_v=params["diffusivity_v"], k=params["k"], order=params["order"],
      dealiasing_fraction=params["dealiasing_fraction"])
  u0 = params["ic_std"] * jax.random.normal(key, (2, num_points, num_points), jnp.float32)
  return _channels_last(steppers.rollout_frames(stepper, u0, substeps=substeps(params),
                                                num_frames=params["num_frames"]))


#: FNO's three viscosities -> (frames after w0, dt). FNO records t = 1..T (T = 50, 30, 20); dt keeps
#: the Courant number max|u| dt / dx <= ~0.6 on the generated data (ETDRK4 blew up at 2x these dt
#: for some trajectories; docs/methods/dpot.md, "PDE data: accuracy").
FNO_VISCOSITIES: dict[float, tuple[int, float]] = {1e-3: (50, 1 / 32), 1e-4: (30, 1 / 64),
                                                   1e-5: (20, 1 / 64)}

_COMMON_BOUNDS = dict(
    num_frames=Bound("frames stored after the initial state", low=1, integer=True),
    frame_interval=Bound("time between stored frames, a whole number of dt", low=0, open_low=True),
    dt=Bound("the solver's time step", low=0, open_low=True),
    order=Bound("ETDRK order; 0 would drop the nonlinear term", low=1, high=4, integer=True),
    dealiasing_fraction=Bound("fraction of the modes kept in the nonlinear term; None: no dealiasing", low=0,
                              high=1, open_low=True, optional=True),
    domain_extent=Bound("side length of the periodic square", low=0, open_low=True),
)
_VISCOSITY = Bound("kinematic viscosity nu; 0 or less is not a viscous flow and blows up", low=0, open_low=True)

#: The PDE families by name (``DatasetSpec.family``): FNO's Navier-Stokes (``ns_fno``), Kolmogorov
#: flow and PDEBench's diffusion-reaction, with their default settings and allowed ranges.
FAMILIES: dict[str, Family] = {
    "ns_fno": Family(
        name="ns_fno",
        channel_names=("vorticity",),
        defaults=dict(viscosity=1e-3, num_frames=50, frame_interval=1.0, dt=1 / 32, order=4,
                      dealiasing_fraction=2 / 3, convection_scale=-1.0, forcing_amplitude=0.1,
                      grf_alpha=2.5, grf_tau=7.0, domain_extent=1.0),
        simulate=_simulate_ns_fno,
        summary="w_t + u.grad w = nu Lap w + 0.1(sin 2pi(x+y) + cos 2pi(x+y)), w0 ~ GRF(2.5, 7), [0,1)^2",
        bounds=dict(_COMMON_BOUNDS, viscosity=_VISCOSITY,
                    convection_scale=Bound("sign and scale of the convection term; -1 is FNO's equation"),
                    forcing_amplitude=Bound("amplitude of FNO's forcing; 0: unforced"),
                    grf_alpha=Bound("smoothness of the initial GRF; its variance is finite only for alpha > 1 "
                                    "in 2-D", low=1, open_low=True),
                    grf_tau=Bound("inverse length scale of the initial GRF", low=0, open_low=True)),
        check_grid=_check_ns_fno_grid),
    "kolmogorov": Family(
        name="kolmogorov",
        channel_names=("vorticity",),
        defaults=dict(viscosity=0.02, drag=-0.1, injection_mode=4, injection_scale=1.0,
                      num_frames=40, frame_interval=0.5, warmup_time=20.0, dt=0.02, order=4,
                      dealiasing_fraction=2 / 3, convection_scale=-1.0, ic_scale=4.0,
                      domain_extent=2 * math.pi),
        simulate=_simulate_kolmogorov,
        summary="w_t + u.grad w = nu Lap w - 0.1 w - 4 cos(4y), [0, 2pi)^2, Re = 1/nu = 50, after a warm-up",
        bounds=dict(_COMMON_BOUNDS, viscosity=dataclasses.replace(_VISCOSITY, why=_VISCOSITY.why + "; Re = 1/nu"),
                    drag=Bound("linear drag rate; > 0 would amplify every mode", high=0),
                    injection_mode=Bound("wavenumber of the forcing", low=1, integer=True),
                    injection_scale=Bound("forcing amplitude; 0: unforced"),
                    warmup_time=Bound("unrecorded time before frame 0, a whole number of dt", low=0),
                    convection_scale=Bound("sign and scale of the convection term"),
                    ic_scale=Bound("scale of the random initial vorticity; 0 would make every trajectory the "
                                   "same", low=0, open_low=True)),
        check_grid=_check_kolmogorov_grid),
    "diffusion_reaction": Family(
        name="diffusion_reaction",
        channel_names=("u", "v"),
        defaults=dict(diffusivity_u=1e-3, diffusivity_v=5e-3, k=5e-3, num_frames=100,
                      frame_interval=0.05, dt=0.025, order=4, dealiasing_fraction=None,
                      ic_std=1.0, domain_extent=2.0),
        simulate=_simulate_diffusion_reaction,
        summary="PDEBench FitzHugh-Nagumo on [-1, 1]^2 (periodic), u0, v0 ~ N(0, 1) per grid point, T = 5",
        bounds=dict(_COMMON_BOUNDS,
                    diffusivity_u=Bound("diffusivity of u; a negative one is ill-posed: anti-diffusion", low=0),
                    diffusivity_v=Bound("diffusivity of v; a negative one is ill-posed: anti-diffusion", low=0),
                    k=Bound("FitzHugh-Nagumo reaction constant"),
                    ic_std=Bound("std of the random initial state; 0 would make every trajectory the same",
                                 low=0, open_low=True))),
}


def get_family(name: str) -> Family:
  """The family ``name`` in :data:`FAMILIES`; any other name is an InputError listing the known ones."""
  if not isinstance(name, str) or name not in FAMILIES:
    raise InputError(f"unknown PDE family {name!r}; known: {sorted(FAMILIES)}")
  return FAMILIES[name]
