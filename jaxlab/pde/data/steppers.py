"""exponax steppers for the PDE families exponax does not ship, and a frame-recording rollout.

exponax (Koehler et al.) integrates u_t = L u + N(u) pseudo-spectrally with exponential time
differencing Runge-Kutta (ETDRK, Cox & Matthews 2002; coefficients by Kassam & Trefethen 2005):
L is diagonal in Fourier space and integrated exactly, N is evaluated in physical space. A new
PDE is a :class:`exponax.BaseStepper` subclass giving L (``_build_linear_operator``) and N
(``_build_nonlinear_fun``).
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import check_int, check_range
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  import exponax
  from exponax._spectral import build_laplace_operator
  from exponax.nonlin_fun import BaseNonlinearFun, VorticityConvection2d


def _check_diffusivity(name: str, value) -> None:
  """A concrete negative (anti-diffusive, ill-posed) or non-finite value is refused; a traced one passes."""
  if isinstance(value, numbers.Real):
    check_range(value, name, 0, meaning="a negative diffusivity is ill-posed: anti-diffusion")


def fno_forcing(num_points: int, amplitude: float = 0.1) -> np.ndarray:
  """FNO's forcing a (sin 2 pi (x1 + x2) + cos 2 pi (x1 + x2)), unit-square grid (Li et al. 2021, Sec. 5.3)."""
  x = np.arange(num_points) / num_points
  x1, x2 = np.meshgrid(x, x, indexing="ij")
  phase = 2 * np.pi * (x1 + x2)
  return (amplitude * (np.sin(phase) + np.cos(phase))).astype(np.float32)


class _ForcedVorticityConvection(VorticityConvection2d):
  """N(w) = -b ([1, -1] * grad(Delta^{-1} w)) . grad w + f, with a time-independent forcing f."""

  forcing_hat: jax.Array

  def __init__(self, num_points: int, *, forcing_hat: jax.Array, convection_scale: float,
               derivative_operator: jax.Array, dealiasing_fraction: float):
    super().__init__(2, num_points, convection_scale=convection_scale,
                     derivative_operator=derivative_operator, dealiasing_fraction=dealiasing_fraction)
    self.forcing_hat = forcing_hat

  def __call__(self, u_hat: jax.Array) -> jax.Array:
    return super().__call__(u_hat) + self.forcing_hat


class ForcedNavierStokesVorticity(exponax.BaseStepper):
  r"""2-D incompressible Navier-Stokes in vorticity form with a fixed forcing (Li et al. 2021, Sec. 5.3).

  FNO's equation on the periodic square: w_t + u . grad w = nu Delta w + f, with velocity
  u = (d_2 psi, -d_1 psi) from the stream function -Delta psi = w (their solver divides w_hat by
  +4 pi^2 |k|^2). exponax's ``VorticityConvection2d`` builds its velocity from Delta psi = +w, the
  opposite sign, so ``convection_scale=-1`` reproduces FNO's equation (checked against an
  independent Crank-Nicolson reference in tests/pde/data/test_steppers.py). ``convection_scale=+1``
  (exponax's default) solves the equation for -w with forcing -f instead.
  """

  diffusivity: float
  convection_scale: float
  dealiasing_fraction: float
  forcing_hat: jax.Array

  def __init__(self, domain_extent: float, num_points: int, dt: float, *, diffusivity: float,
               forcing: np.ndarray, convection_scale: float = -1.0, order: int = 4,
               dealiasing_fraction: float = 2 / 3):
    _check_diffusivity("diffusivity", diffusivity)
    self.diffusivity = diffusivity
    self.convection_scale = convection_scale
    self.dealiasing_fraction = dealiasing_fraction
    self.forcing_hat = exponax.fft(jnp.asarray(forcing, jnp.float32)[None], num_spatial_dims=2)
    super().__init__(num_spatial_dims=2, domain_extent=domain_extent, num_points=num_points, dt=dt,
                     num_channels=1, order=order)

  def _build_linear_operator(self, derivative_operator: jax.Array) -> jax.Array:
    return self.diffusivity * build_laplace_operator(derivative_operator, order=2)

  def _build_nonlinear_fun(self, derivative_operator: jax.Array) -> BaseNonlinearFun:
    return _ForcedVorticityConvection(
        self.num_points, forcing_hat=self.forcing_hat, convection_scale=self.convection_scale,
        derivative_operator=derivative_operator, dealiasing_fraction=self.dealiasing_fraction)


class _FitzHughNagumoReaction(BaseNonlinearFun):
  """The reaction terms that are not diagonal-linear: (-u^3 - k - v, u)."""

  k: float

  def __init__(self, num_points: int, *, k: float, dealiasing_fraction: float | None):
    super().__init__(2, num_points, dealiasing_fraction=dealiasing_fraction)
    self.k = k

  def __call__(self, u_hat: jax.Array) -> jax.Array:
    u, v = self.ifft(u_hat)
    return self.fft(jnp.stack([-u ** 3 - self.k - v, u]))


class FitzHughNagumo(exponax.BaseStepper):
  r"""PDEBench's 2-D diffusion-reaction (FitzHugh-Nagumo) system (Takamoto et al., NeurIPS 2022 D&B).

      u_t = D_u Delta u + u - u^3 - k - v,     v_t = D_v Delta v + u - v.

  L = diag(D_u Delta + 1, D_v Delta - 1) is exact; N = (-u^3 - k - v, u). PDEBench uses no-flow
  (Neumann) walls and finite volumes; exponax is periodic, so this is the periodic analogue.
  ``dealiasing_fraction=None`` evaluates the cubic pointwise on the grid (collocation), which
  is what a finite-volume reaction term does; a 1/2 cut would silently drop the grid-scale part
  of the white-noise initial state from the reaction.
  """

  diffusivity_u: float
  diffusivity_v: float
  k: float
  dealiasing_fraction: float | None

  def __init__(self, domain_extent: float, num_points: int, dt: float, *, diffusivity_u: float,
               diffusivity_v: float, k: float, order: int = 4,
               dealiasing_fraction: float | None = None):
    _check_diffusivity("diffusivity_u", diffusivity_u)
    _check_diffusivity("diffusivity_v", diffusivity_v)
    self.diffusivity_u = diffusivity_u
    self.diffusivity_v = diffusivity_v
    self.k = k
    self.dealiasing_fraction = dealiasing_fraction
    super().__init__(num_spatial_dims=2, domain_extent=domain_extent, num_points=num_points, dt=dt,
                     num_channels=2, order=order)

  def _build_linear_operator(self, derivative_operator: jax.Array) -> jax.Array:
    laplace = build_laplace_operator(derivative_operator, order=2)
    return jnp.concatenate([self.diffusivity_u * laplace + 1.0, self.diffusivity_v * laplace - 1.0])

  def _build_nonlinear_fun(self, derivative_operator: jax.Array) -> BaseNonlinearFun:
    return _FitzHughNagumoReaction(self.num_points, k=self.k,
                                   dealiasing_fraction=self.dealiasing_fraction)


def rollout_frames(stepper: exponax.BaseStepper, u0: jax.Array, *, substeps: int, num_frames: int,
                   warmup_steps: int = 0) -> jax.Array:
  """Runs ``warmup_steps`` unrecorded steps, then records ``num_frames`` frames ``substeps`` apart.

  Stays in Fourier space between frames (one inverse FFT per frame). u0: (C, N, N);
  returns (num_frames + 1, C, N, N): the state after the warm-up, then each recorded frame.
  """
  for name, value, low in (("substeps", substeps, 1), ("num_frames", num_frames, 1), ("warmup_steps", warmup_steps, 0)):
    check_int(value, name, low)
  num_points = u0.shape[-1]
  step = lambda _, u_hat: stepper.step_fourier(u_hat)
  u_hat = exponax.fft(u0, num_spatial_dims=2)
  u_hat = jax.lax.fori_loop(0, warmup_steps, step, u_hat)

  def frame(u_hat, _):
    u_hat = jax.lax.fori_loop(0, substeps, step, u_hat)
    return u_hat, exponax.ifft(u_hat, num_spatial_dims=2, num_points=num_points)

  first = exponax.ifft(u_hat, num_spatial_dims=2, num_points=num_points)
  _, frames = jax.lax.scan(frame, u_hat, None, length=num_frames)
  return jnp.concatenate([first[None], frames])
