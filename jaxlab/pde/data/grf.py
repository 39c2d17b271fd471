"""The FNO paper's Gaussian random field for initial vorticity on the periodic unit square.

Li et al., "Fourier Neural Operator for Parametric PDEs", ICLR 2021, Sec. 5.3 and its appendix:
w0 ~ N(0, 7^{3/2} (-Delta + 49 I)^{-2.5}), i.e. alpha = 2.5, tau = 7. The official sampler
(``data_generation/navier_stokes/random_fields.py``, the 2020 version that made the released
data) draws, on an N x N grid,

  w0(x) = Re sum_k sqrt(2) sigma (4 pi^2 |k|^2 + tau^2)^{-alpha/2} (a_k + i b_k) e^{2 pi i k.x},
  sigma = tau^{(2 alpha - d) / 2},  a_k, b_k ~ N(0, 1) independent,  k = 0 excluded,

over the N^2 integer wavenumbers k in [-N/2, N/2)^2 (no Hermitian pairing: the real part is
taken at the end). Its pointwise variance is therefore sum_k 2 sigma^2 (4 pi^2 |k|^2 + tau^2)^{-alpha}
(:func:`grf_pointwise_variance`). (Later versions of that file draw ``torch.randn(cfloat)``, whose
real and imaginary parts have variance 1/2: a field sqrt(2) smaller. We follow the 2020 one.)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import check, check_int, is_real


def _eigen_sqrt(num_points: int, alpha: float, tau: float) -> np.ndarray:
  """sqrt(2) sigma (4 pi^2 |k|^2 + tau^2)^{-alpha/2} on the fft grid, zero at k = 0; (N, N)."""
  sigma = tau ** (0.5 * (2 * alpha - 2))
  k = np.fft.fftfreq(num_points, 1.0 / num_points)
  kx, ky = np.meshgrid(k, k, indexing="ij")
  amplitude = np.sqrt(2.0) * sigma * (4 * np.pi ** 2 * (kx ** 2 + ky ** 2) + tau ** 2) ** (-alpha / 2)
  amplitude[0, 0] = 0.0
  return amplitude


def _is_real(value) -> bool:
  return is_real(value) and math.isfinite(value)


def check_parameters(num_points: int, alpha: float, tau: float, where: str = "") -> None:
  """Refuses a grid or (alpha, tau) that gives no field: alpha <= 1 (infinite variance in 2-D),
  tau <= 0, or amplitudes that overflow or underflow float32 on this grid (e.g. alpha = 500)."""
  check_int(num_points, f"{where}num_points", 2, "grid points per axis")
  check(_is_real(alpha) and alpha > 1, f"{where}grf_alpha={alpha!r}; must be a finite number > 1 (smoothness "
        "of the GRF; its variance is finite only for alpha > 1 in 2-D)")
  check(_is_real(tau) and tau > 0, f"{where}grf_tau={tau!r}; must be a finite number > 0 (inverse length scale "
        "of the GRF)")
  try:
    with np.errstate(all="ignore"):  # an overflow is what this check reports
      largest = float(np.max(np.abs(_eigen_sqrt(num_points, alpha, tau).astype(np.float32))))
  except OverflowError:  # sigma = tau^(alpha - 1) beyond float64
    largest = math.inf
  fix = ("overflow float32 (lower grf_alpha or grf_tau)" if not math.isfinite(largest)
         else "underflow to 0 in float32 (lower grf_alpha or raise grf_tau)")
  check(math.isfinite(largest) and largest > 0, f"{where}grf_alpha={alpha}, grf_tau={tau} make no field on "
        f"{num_points}^2 points: the GRF amplitudes {fix}; FNO's are alpha=2.5, tau=7")


def fno_gaussian_random_field(key: jax.Array, num_points: int, alpha: float = 2.5,
                              tau: float = 7.0) -> jax.Array:
  """One sample of the FNO initial-vorticity field (module docstring), shape (N, N), float32.

  Axis 0 is x1 and axis 1 is x2 (``indexing="ij"``), grid points x = i / N. ``num_points``,
  ``alpha`` and ``tau`` must be concrete (:func:`check_parameters`).
  """
  check_parameters(num_points, alpha, tau)
  amplitude = jnp.asarray(_eigen_sqrt(num_points, alpha, tau), jnp.float32)
  a, b = jax.random.normal(key, (2, num_points, num_points), jnp.float32)
  # ifft2 divides by N^2; the official sampler multiplies its eigenvalues by N^2 to undo it.
  return (jnp.fft.ifft2(amplitude * (a + 1j * b)) * num_points ** 2).real.astype(jnp.float32)


def grf_pointwise_variance(num_points: int, alpha: float = 2.5, tau: float = 7.0) -> float:
  """Exact pointwise variance of :func:`fno_gaussian_random_field` (the same at every x)."""
  return float(np.sum(_eigen_sqrt(num_points, alpha, tau) ** 2))
