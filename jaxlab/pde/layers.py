"""Pure building blocks shared by DPOT and FNO: activations, GroupNorm, patch (de)embedding, coordinates.

Every array is channels-last (NHWC): a feature map is ``(batch, X, Y, channels)``. A layer's
parameters are a dict ``{"kernel": ..., "bias": ...}`` with the kernel laid out ``(in, ..., out)``
so that a 1x1 convolution is ``x @ kernel``; conversion from PyTorch layouts lives in
``jaxlab.pde.convert``. Initialisers reproduce PyTorch's defaults, so a freshly built model has
the official initialisation *distribution* (not the same numbers).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import check

Array = jax.Array
Params = dict


def gelu(x: Array) -> Array:
  """The exact (erf) GELU, PyTorch's ``nn.GELU()`` default; the tanh form differs by up to ~1e-3."""
  return jax.nn.gelu(x, approximate=False)


# The official ACTIVATION table (models/dpot.py), same names and constants.
ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": gelu,
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "relu": jax.nn.relu,
    "leaky_relu": lambda x: jax.nn.leaky_relu(x, 0.1),
    "softplus": jax.nn.softplus,
    "ELU": jax.nn.elu,
    "silu": jax.nn.silu,
}


def get_activation(name: str) -> Callable[[Array], Array]:
  check(name in ACTIVATIONS, f"act={name!r} is not one of {sorted(ACTIVATIONS)}")
  return ACTIVATIONS[name]


def torch_linspace(start: float, end: float, num: int) -> np.ndarray:
  """``torch.linspace(start, end, num)`` in float32, bit for bit (for num < 64, checked against torch 2.13).

  PyTorch fills the first half as ``start + step * i`` and the second as ``end - step * (num-1-i)``,
  each a fused multiply-add (one rounding). NumPy's linspace rounds differently in the last bit,
  which matters here because DPOT multiplies ``t`` by learned frequencies up to 2**10.
  """
  if num == 1:
    return np.array([start], np.float32)
  s, e = np.float32(start), np.float32(end)
  step = np.float64(np.float32((e - s) / np.float32(num - 1)))
  i = np.arange(num)
  first = i < num // 2
  k = np.where(first, i, num - 1 - i).astype(np.float64)
  # float64 holds the exact float32 product, so one final rounding emulates the FMA.
  return np.where(first, np.float64(s) + step * k, np.float64(e) - step * k).astype(np.float32)


def grid_coordinates(x_size: int, y_size: int, t_size: int) -> np.ndarray:
  """(X, Y, T, 3) float32: linspace(0, 1) along X, Y and T, DPOT's ``get_grid_3d`` (NumPy linspace)."""
  gx, gy, gt = (np.linspace(0, 1, n).astype(np.float32) for n in (x_size, y_size, t_size))
  shape = (x_size, y_size, t_size)
  return np.stack([np.broadcast_to(gx[:, None, None], shape), np.broadcast_to(gy[None, :, None], shape),
                   np.broadcast_to(gt[None, None, :], shape)], axis=-1)


def dense(p: Params, x: Array) -> Array:
  """A Linear layer or 1x1 convolution: ``x @ kernel + bias`` over the last axis."""
  return jnp.dot(x, p["kernel"]) + p["bias"]


def group_norm(x: Array, scale: Array, bias: Array, groups: int = 8, eps: float = 1e-5) -> Array:
  """``torch.nn.GroupNorm(groups, D)`` on channels-last ``(B, X, Y, D)``: biased variance, affine per channel."""
  b, h, w, d = x.shape
  g = x.reshape(b, h, w, groups, d // groups)
  mean = jnp.mean(g, axis=(1, 2, 4), keepdims=True)
  centred = g - mean
  var = jnp.mean(jnp.square(centred), axis=(1, 2, 4), keepdims=True)
  return (centred * jax.lax.rsqrt(var + eps)).reshape(x.shape) * scale + bias


def patchify_conv(p: Params, x: Array, patch: int) -> Array:
  """Conv2d with kernel = stride = ``patch`` as a matmul over patches.

  Notation: n images, x/y patch grid, i/j offset inside a patch, c input and h output channels.
  ``p["kernel"]`` is ``(patch, patch, C_in, C_out)`` (flax's HWIO).
  """
  n, xs, ys, c = x.shape
  patches = x.reshape(n, xs // patch, patch, ys // patch, patch, c)
  return jnp.einsum("nxiyjc,ijch->nxyh", patches, p["kernel"]) + p["bias"]


def unpatchify(x: Array, patch: int) -> Array:
  """``(B, h, w, patch, patch, C)`` -> ``(B, h*patch, w*patch, C)``: pixel (h*p+i, w*p+j) <- [h, w, i, j]."""
  b, h, w, _, _, c = x.shape
  return x.transpose(0, 1, 3, 2, 4, 5).reshape(b, h * patch, w * patch, c)


def torch_uniform_init(fan_in: int) -> Callable:
  """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for Linear/Conv weights (kaiming_uniform, a=sqrt 5) and biases."""
  bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0

  def init(key: Array, shape: tuple[int, ...], dtype=jnp.float32) -> Array:
    return jax.random.uniform(key, shape, dtype, -bound, bound)
  return init


def init_dense(key: Array, kernel_shape: tuple[int, ...], fan_in: int, dtype=jnp.float32) -> Params:
  """``{"kernel", "bias"}`` with PyTorch's default initialisation; the bias has the kernel's last dim."""
  k_key, b_key = jax.random.split(key)
  init = torch_uniform_init(fan_in)
  return {"kernel": init(k_key, kernel_shape, dtype), "bias": init(b_key, kernel_shape[-1:], dtype)}
