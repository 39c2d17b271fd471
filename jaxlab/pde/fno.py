"""FNO-2D baseline (Li et al., "Fourier Neural Operator for Parametric PDEs", ICLR 2021), in flax.

The 2D+time Navier-Stokes model of the paper (Sec. 5.3; neuraloperator's fourier_2d_time.py):
the T_in input frames and (x, y) coordinates are lifted pointwise to ``width`` channels, then
``n_layers`` Fourier layers v <- act(K v + W v) (no activation after the last), then a
pointwise projection width -> 128 -> C_out*T_out. K keeps ``modes`` frequencies on both axes:
on the full-FFT axis X that is modes non-negative AND modes negative ones (rows [:m] and [-m:]),
on the half-spectrum axis Y the first ``modes``; each kept mode has its own complex
(width x width) matrix. Same input/output convention as DPOT: (B, X, Y, T_in, C) ->
(B, X, Y, T_out, C_out), channel index t*C + c.

Notation (einsums): b batch, x/y kept modes, i/o channels in/out.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check, check_int
from jaxlab.pde.layers import dense, get_activation, grid_coordinates, init_dense_layers

Array = jax.Array


def spectral_conv2d(v: Array, w_pos: Array, w_neg: Array) -> Array:
  """The Fourier integral operator of Li et al. (Sec. 4): irfft2(R * rfft2(v)), R zero outside the kept modes.

  v: (B, X, Y, I). w_pos, w_neg: (2=[real, imag], m1, m2, I, O) for rows [:m1] and [-m1:].
  Unnormalised forward transform and 1/(XY) inverse (numpy's default "backward" norm), as the
  reference code. For a bfloat16 ``v`` (or weights) the transforms and the complex mixing run in
  float32 / complex64 (there is no bfloat16 complex type); the result has ``v``'s dtype.
  """
  b, nx, ny, _ = v.shape
  m1, m2, c_out = w_pos.shape[1], w_pos.shape[2], w_pos.shape[-1]
  check(1 <= m1 and 2 * m1 <= nx and 1 <= m2 <= ny // 2 + 1,
        f"spectral_conv2d weights keep {m1}x{m2} modes; need 1 <= {m1} <= X/2 and 1 <= {m2} <= Y//2+1 "
        f"for the grid X={nx}, Y={ny}")
  real = jnp.promote_types(v.dtype, jnp.float32)
  spec = jnp.fft.rfft2(v.astype(real), axes=(1, 2))

  def mix(z, w):
    return jnp.einsum("bxyi,xyio->bxyo", z, jax.lax.complex(w[0].astype(real), w[1].astype(real)))
  top = mix(spec[:, :m1, :m2], w_pos)
  bottom = mix(spec[:, nx - m1:, :m2], w_neg)
  middle = jnp.zeros((b, nx - 2 * m1, m2, c_out), top.dtype)
  out = jnp.concatenate([top, middle, bottom], axis=1)
  out = jnp.pad(out, ((0, 0), (0, 0), (0, spec.shape[2] - m2), (0, 0)))
  return jnp.fft.irfft2(out, s=(nx, ny), axes=(1, 2)).astype(v.dtype)


class FNO2d(nn.Module):
  """FNO-2D: (B, X, Y, T_in, C_in) -> (B, X, Y, T_out, C_out)."""
  modes: int = 12
  width: int = 20
  in_channels: int = 1
  out_channels: int = 1
  in_timesteps: int = 10
  out_timesteps: int = 1
  n_layers: int = 4
  projection_dim: int = 128
  act: str = "gelu"

  def check_config(self) -> None:
    """InputError ``FNO2d.<attribute>=...`` for a size that builds no model (static: runs before any compile)."""
    sizes = {"modes": "Fourier modes kept per axis", "width": "channels of the Fourier layers",
             "in_channels": "input channels", "out_channels": "output channels", "in_timesteps": "input frames",
             "out_timesteps": "predicted frames", "n_layers": "Fourier layers", "projection_dim": "projection width"}
    for name, meaning in sizes.items():
      check_int(getattr(self, name), f"FNO2d.{name}", meaning=meaning)
    get_activation(self.act)

  @nn.compact
  def __call__(self, x: Array) -> Array:
    self.check_config()
    check(x.ndim == 5, f"FNO2d input must be (B, X, Y, T, C); got shape {tuple(x.shape)}")
    b, nx, ny, t, c = x.shape
    check(c == self.in_channels, f"input has {c} channels; the model has in_channels={self.in_channels}")
    check(t == self.in_timesteps, f"input has T={t} time steps; the model has in_timesteps={self.in_timesteps}")
    check(2 * self.modes <= nx and self.modes <= ny // 2 + 1,
          f"modes={self.modes} needs X >= 2*modes and Y//2+1 >= modes; got X={nx}, Y={ny}")
    act = get_activation(self.act)
    width, m = self.width, self.modes
    n_in, n_out = t * c + 2, self.out_channels * self.out_timesteps

    grid = jnp.asarray(grid_coordinates(nx, ny, 1)[:, :, 0, :2], x.dtype)
    v = jnp.concatenate([x.reshape(b, nx, ny, t * c), jnp.broadcast_to(grid, (b, nx, ny, 2))], axis=-1)
    lift = self.param("lift", lambda key: init_dense_layers(key, {"fc0": ((n_in, width), n_in)})["fc0"])
    project = self.param("project", lambda key: init_dense_layers(key, {
        "fc1": ((width, self.projection_dim), width), "fc2": ((self.projection_dim, n_out), self.projection_dim)}))
    v = dense(lift, v)
    scale = 1.0 / (width * width)   # the reference init: scale * U[0, 1) for real and imaginary parts
    for i in range(self.n_layers):
      spectral = self.param(f"spectral_{i}", lambda key: {
          name: scale * jax.random.uniform(jax.random.fold_in(key, j), (2, m, m, width, width))
          for j, name in enumerate(("w_pos", "w_neg"))})
      pointwise = self.param(f"pointwise_{i}", lambda key: init_dense_layers(key, {"w": ((width, width), width)})["w"])
      v = spectral_conv2d(v, spectral["w_pos"], spectral["w_neg"]) + dense(pointwise, v)
      if i < self.n_layers - 1:
        v = act(v)
    y = dense(project["fc2"], act(dense(project["fc1"], v)))
    return y.reshape(b, nx, ny, self.out_timesteps, self.out_channels)
