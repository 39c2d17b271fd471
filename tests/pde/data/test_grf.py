"""FNO's initial-vorticity Gaussian random field: its variance, spectrum and zero mean."""

import jax
import numpy as np

from jaxlab.pde.data.grf import fno_gaussian_random_field, grf_pointwise_variance


def test_pointwise_variance_is_the_sum_over_modes():
  # Written out per integer wavenumber: 2 sigma^2 (4 pi^2 |k|^2 + tau^2)^-alpha, sigma = 7^1.5.
  total = sum(2 * 7.0 ** 3 * (4 * np.pi ** 2 * (a * a + b * b) + 49.0) ** -2.5
              for a in range(-32, 32) for b in range(-32, 32) if (a, b) != (0, 0))
  np.testing.assert_allclose(grf_pointwise_variance(64), total, rtol=1e-10)
  np.testing.assert_allclose(np.sqrt(total), 0.2620, atol=5e-4)  # rms of FNO's w0 on 64^2


def test_samples_have_that_variance_and_spectrum():
  keys = jax.random.split(jax.random.key(0), 512)
  w = np.asarray(jax.vmap(lambda k: fno_gaussian_random_field(k, 32))(keys), np.float64)
  assert w.shape == (512, 32, 32) and w.dtype == np.float64
  np.testing.assert_allclose(w.var(), grf_pointwise_variance(32), rtol=0.05)
  np.testing.assert_allclose(w.mean(axis=(1, 2)), 0.0, atol=1e-6)  # k = 0 is excluded
  power = (np.abs(np.fft.fft2(w)) ** 2).mean(0)
  lam = lambda a, b: (4 * np.pi ** 2 * (a * a + b * b) + 49.0) ** -2.5
  # Real part of an unpaired complex mode: |w_hat(k)|^2 gets k's and -k's halves.
  np.testing.assert_allclose(power[2, 0] / power[1, 0], lam(2, 0) / lam(1, 0), rtol=0.15)
  np.testing.assert_allclose(power[1, 1] / power[1, 0], lam(1, 1) / lam(1, 0), rtol=0.15)


def test_same_key_same_field():
  a = fno_gaussian_random_field(jax.random.key(5), 16)
  b = fno_gaussian_random_field(jax.random.key(5), 16)
  c = fno_gaussian_random_field(jax.random.key(6), 16)
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, c)
