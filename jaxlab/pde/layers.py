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
  """The exact GELU x * (1 + erf(x / sqrt 2)) / 2, as PyTorch's ``nn.GELU()`` computes it.

  Not ``jax.nn.gelu(approximate=False)``: that one goes through erfc, which XLA:CPU evaluates
  ~2x slower (~5% of a DPOT-Ti train step). The tanh form would differ by up to ~1e-3. Computes in
  ``x``'s dtype (a Python constant is weakly typed: float32 for float32, bfloat16 for bfloat16).
  """
  return 0.5 * x * (1.0 + jax.lax.erf(x * (1 / math.sqrt(2))))


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
  check(isinstance(name, str) and name in ACTIVATIONS, f"act={name!r} is not one of {sorted(ACTIVATIONS)}")
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
  """``torch.nn.GroupNorm(groups, D)`` on channels-last ``(B, X, Y, D)``: biased variance, affine per channel.

  Statistics, normalisation and affine map in float32 (at least), the result in ``x``'s dtype: bfloat16's
  8-bit mantissa would round a variance of nearly equal values away (flax's norms do the same).
  """
  b, h, w, d = x.shape
  check(groups >= 1 and d % groups == 0, f"group_norm: {d} channels are not divisible into {groups} groups")
  g = x.reshape(b, h, w, groups, d // groups).astype(jnp.promote_types(x.dtype, jnp.float32))
  mean = jnp.mean(g, axis=(1, 2, 4), keepdims=True)
  centred = g - mean
  var = jnp.mean(jnp.square(centred), axis=(1, 2, 4), keepdims=True)
  return ((centred * jax.lax.rsqrt(var + eps)).reshape(x.shape) * scale + bias).astype(x.dtype)


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
  return init_dense_layers(key, {"layer": (kernel_shape, fan_in)}, dtype)["layer"]


def init_dense_layers(key: Array, layers: dict[str, tuple[tuple[int, ...], int]], dtype=jnp.float32) -> Params:
  """Several ``{"kernel", "bias"}`` layers, ``name -> (kernel_shape, fan_in)``, from ONE uniform draw.

  Same distribution as :func:`torch_uniform_init` per layer; one draw instead of two per layer
  because each distinct random op costs ~0.3 s of XLA compile time on CPU (threefry), which
  dominated the compile of a small model's ``init``.
  """
  sizes = []
  for kernel_shape, _ in layers.values():
    sizes += [math.prod(kernel_shape), kernel_shape[-1]]
  flat = jax.random.uniform(key, (sum(sizes),), dtype, -1.0, 1.0)
  out, offset = {}, 0
  for name, (kernel_shape, fan_in) in layers.items():
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    parts = []
    for shape in (kernel_shape, kernel_shape[-1:]):
      n = math.prod(shape)
      parts.append(bound * flat[offset:offset + n].reshape(shape))
      offset += n
    out[name] = {"kernel": parts[0], "bias": parts[1]}
  return out
