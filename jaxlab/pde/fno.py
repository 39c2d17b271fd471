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

from typing import Any

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


def init_lift(key: Array, n_in: int, width: int) -> dict[str, Array]:
  """The pointwise lift ``{"kernel": (n_in, width), "bias"}``, PyTorch's default initialisation."""
  return init_dense_layers(key, {"fc0": ((n_in, width), n_in)})["fc0"]


def init_project(key: Array, width: int, projection_dim: int, n_out: int) -> dict[str, dict[str, Array]]:
  """The projection ``{"fc1": width -> projection_dim, "fc2": projection_dim -> n_out}``."""
  return init_dense_layers(key, {"fc1": ((width, projection_dim), width), "fc2": ((projection_dim, n_out), projection_dim)})


def init_spectral(key: Array, modes: int, width: int) -> dict[str, Array]:
  """``{"w_pos", "w_neg"}`` (2, modes, modes, width, width): the reference init scale * U[0, 1) for real and
  imaginary parts, scale = 1 / width^2."""
  scale = 1.0 / (width * width)
  return {name: scale * jax.random.uniform(jax.random.fold_in(key, j), (2, modes, modes, width, width))
          for j, name in enumerate(("w_pos", "w_neg"))}


def init_pointwise(key: Array, width: int) -> dict[str, Array]:
  """The Fourier layer's pointwise ``W v`` (a 1x1 convolution width -> width)."""
  return init_dense_layers(key, {"w": ((width, width), width)})["w"]


def fno2d(params: dict, x: Array, *, n_layers: int, out_timesteps: int, out_channels: int,
          act: str = "gelu") -> Array:
  """The FNO-2D forward pass (Li et al., Sec. 5.3) on parameters ``lift``, ``spectral_{i}``, ``pointwise_{i}``, ``project``.

  Args:
    params: the :class:`FNO2d` parameter tree.
    x: (B, X, Y, T_in, C_in).
    n_layers: Fourier layers (``spectral_0`` ... ``spectral_{n_layers-1}``).
    out_timesteps: T_out.
    out_channels: C_out.
    act: activation name (``jaxlab.pde.layers.ACTIVATIONS``).

  Returns:
    (B, X, Y, T_out, C_out).
  """
  act_fn = get_activation(act)
  b, nx, ny, t, c = x.shape
  grid = jnp.asarray(grid_coordinates(nx, ny, 1)[:, :, 0, :2], x.dtype)
  v = jnp.concatenate([x.reshape(b, nx, ny, t * c), jnp.broadcast_to(grid, (b, nx, ny, 2))], axis=-1)
  v = dense(params["lift"], v)
  for i in range(n_layers):
    spectral = params[f"spectral_{i}"]
    v = spectral_conv2d(v, spectral["w_pos"], spectral["w_neg"]) + dense(params[f"pointwise_{i}"], v)
    if i < n_layers - 1:
      v = act_fn(v)
  project = params["project"]
  y = dense(project["fc2"], act_fn(dense(project["fc1"], v)))
  return y.reshape(b, nx, ny, out_timesteps, out_channels)


def check_fno_input(model: Any, x: Array) -> None:
  """InputError for an input (B, X, Y, T, C) that ``model`` (an FNO2d's settings) cannot take."""
  check(x.ndim == 5, f"FNO2d input must be (B, X, Y, T, C); got shape {tuple(x.shape)}")
  _, nx, ny, t, c = x.shape
  check(c == model.in_channels, f"input has {c} channels; the model has in_channels={model.in_channels}")
  check(t == model.in_timesteps, f"input has T={t} time steps; the model has in_timesteps={model.in_timesteps}")
  check(2 * model.modes <= nx and model.modes <= ny // 2 + 1,
        f"modes={model.modes} needs X >= 2*modes and Y//2+1 >= modes; got X={nx}, Y={ny}")


class FNO2d(nn.Module):
  """FNO-2D: (B, X, Y, T_in, C_in) -> (B, X, Y, T_out, C_out) (``fno2d`` on this module's parameters)."""
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
    check_fno_input(self, x)
    t, c = x.shape[3:]
    width, m = self.width, self.modes
    params = {"lift": self.param("lift", init_lift, t * c + 2, width),
              "project": self.param("project", init_project, width, self.projection_dim,
                                    self.out_channels * self.out_timesteps)}
    for i in range(self.n_layers):
      params[f"spectral_{i}"] = self.param(f"spectral_{i}", init_spectral, m, width)
      params[f"pointwise_{i}"] = self.param(f"pointwise_{i}", init_pointwise, width)
    return fno2d(params, x, n_layers=self.n_layers, out_timesteps=self.out_timesteps,
                 out_channels=self.out_channels, act=self.act)
