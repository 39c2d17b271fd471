"""AFNO2D, the Fourier-attention token mixer of DPOT: a pure function and a flax layer.

Guibas et al., "Adaptive Fourier Neural Operators: Efficient Token Mixers for Transformers",
ICLR 2022 (Sec. 3: FFT over the token grid, a block-diagonal complex two-layer MLP shared by all
modes, inverse FFT, skip). As in DPOT (Hao et al., ICML 2024, Sec. 3.2, and the official
``AFNO2D``) there is no soft-shrinkage, the activation acts on the real and imaginary parts
separately, and only the corner ``[:modes, :modes]`` of the ``rfft2`` spectrum is mixed, so on
the full-FFT axis (X) only the non-negative frequencies 0..modes-1 survive; the rest is zeroed.
The haiku layer over the same function is in ``jaxlab.pde.afno_haiku``.

Notation (einsums): n the kept modes of all samples, k the n_blocks channel blocks, i the input
and o the output channels of one block; stacking [real, imag] makes each complex block a real
one of twice the width, so a layer is one batched matmul.
"""

from __future__ import annotations

import math
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import check, check_int
from jaxlab.pde.layers import get_activation

Array = jax.Array


def _complex_as_real(w: Array) -> Array:
  """(2, k, i, o) [real, imag] -> (k, 2i, 2o) real block ``[[wr, wi], [-wi, wr]]``.

  With z = [zr | zi] (length 2i), ``z @ W`` = [zr wr - zi wi | zr wi + zi wr] = [Re, Im] of (zr + i zi)(wr + i wi).
  """
  wr, wi = w[0], w[1]
  top = jnp.concatenate([wr, wi], axis=-1)
  bottom = jnp.concatenate([-wi, wr], axis=-1)
  return jnp.concatenate([top, bottom], axis=-2)


def spectral_block_mlp(zr: Array, zi: Array, w1: Array, b1: Array, w2: Array, b2: Array,
                       act: Callable[[Array], Array]) -> tuple[Array, Array]:
  """The block-diagonal complex MLP on kept modes; ``zr, zi``: (b, x, y, k, i). Returns (real, imag).

  o1 = act(Re(z w1) + b1[0]) + i act(Im(z w1) + b1[1]);  o2 = o1 w2 + b2  (bias per real/imag part,
  applied at every kept mode, as the official code does). The modes are gathered block-major,
  (k, n = b*x*y, 2i), so each layer is a batched matmul with the batch axis leading (XLA:CPU
  sends the block-in-the-middle form to a slower kernel, ~5% of a DPOT-Ti step).
  """
  b, nx, ny, k, i = zr.shape
  z = jnp.concatenate([zr, zi], axis=-1).reshape(b * nx * ny, k, 2 * i).transpose(1, 0, 2)   # (k, n, 2i)
  h = jnp.einsum("kni,kio->kno", z, _complex_as_real(w1))
  h = act(h + jnp.concatenate([b1[0], b1[1]], axis=-1)[:, None, :])
  o = jnp.einsum("kni,kio->kno", h, _complex_as_real(w2))
  o = o + jnp.concatenate([b2[0], b2[1]], axis=-1)[:, None, :]
  o = o.transpose(1, 0, 2).reshape(b, nx, ny, k, -1)
  half = o.shape[-1] // 2
  return o[..., :half], o[..., half:]


def afno2d(x: Array, w1: Array, b1: Array, w2: Array, b2: Array, *, modes: int,
           act: Callable[[Array], Array] | str = "gelu") -> Array:
  """AFNO2D on channels-last ``x`` (B, X, Y, D); returns x + irfft2(MLP(rfft2(x)[:modes, :modes])).

  Args:
    x: (B, X, Y, D) real.
    w1: (2, n_blocks, D/n_blocks, hidden); [0] real, [1] imaginary part (the official layout).
    b1: (2, n_blocks, hidden).
    w2: (2, n_blocks, hidden, D/n_blocks).
    b2: (2, n_blocks, D/n_blocks).
    modes: kept modes on each axis; larger than the grid keeps everything (the official slice).
    act: activation (or its name in ``jaxlab.pde.layers.ACTIVATIONS``).

  The transforms are orthonormal, over (X, Y) with the half spectrum on Y; the inverse takes
  s=(X, Y) and, like numpy/pocketfft, ignores the imaginary part of the DC/Nyquist columns.
  For a bfloat16 ``x`` the transforms run in float32 (XLA's FFT has no bfloat16, and cuFFT's
  half precision none for arbitrary sizes) and the block MLP on the kept modes in bfloat16; the
  result has ``x``'s dtype.
  """
  check_int(modes, "afno2d modes", meaning="Fourier modes kept per axis")
  if isinstance(act, str):
    act = get_activation(act)
  b, nx, ny, d = x.shape
  n_blocks = w1.shape[1]
  check(d == n_blocks * w1.shape[2],
        f"AFNO2D input has {d} channels; w1 {tuple(w1.shape)} expects n_blocks*block = {n_blocks * w1.shape[2]}")
  fft_dtype = jnp.promote_types(x.dtype, jnp.float32)
  spec = jnp.fft.rfft2(x.astype(fft_dtype), axes=(1, 2), norm="ortho")  # (B, X, Y//2+1, D) complex
  mx, my = min(modes, nx), min(modes, spec.shape[2])
  kept = spec[:, :mx, :my].reshape(b, mx, my, n_blocks, d // n_blocks)
  out_r, out_i = spectral_block_mlp(kept.real.astype(x.dtype), kept.imag.astype(x.dtype), w1, b1, w2, b2, act)
  mixed = jax.lax.complex(out_r.astype(fft_dtype), out_i.astype(fft_dtype)).reshape(b, mx, my, d)
  mixed = jnp.pad(mixed, ((0, 0), (0, nx - mx), (0, spec.shape[2] - my), (0, 0)))
  return jnp.fft.irfft2(mixed, s=(nx, ny), axes=(1, 2), norm="ortho").astype(x.dtype) + x


def afno_param_shapes(width: int, n_blocks: int, hidden_size_factor: int = 1) -> dict[str, tuple[int, ...]]:
  """Shapes of w1, b1, w2, b2 (the official layout) for a ``width``-channel AFNO2D."""
  check_afno_sizes("AFNO2D", width, n_blocks, hidden_size_factor)
  check(width % n_blocks == 0, f"AFNO2D width {width} is not divisible by n_blocks {n_blocks}")
  block = width // n_blocks
  hidden = block * hidden_size_factor
  return {"w1": (2, n_blocks, block, hidden), "b1": (2, n_blocks, hidden),
          "w2": (2, n_blocks, hidden, block), "b2": (2, n_blocks, block)}


def check_afno_sizes(module: str, width: int, n_blocks: int, hidden_size_factor: int, modes: int = 1) -> None:
  """InputError ``<module>.<size>=...`` for a size that builds no AFNO layer (before any division by it)."""
  check_int(width, f"{module}.width", meaning="channels")
  check_int(n_blocks, f"{module}.n_blocks", meaning="channel blocks of the block-diagonal weights")
  check_int(hidden_size_factor, f"{module}.hidden_size_factor")
  check_int(modes, f"{module}.modes", meaning="Fourier modes kept per axis")


def afno_init_scale(width: int, n_blocks: int, hidden_size_factor: int = 1) -> float:
  """The official init: every AFNO parameter is ``scale * U[0, 1)`` with scale = 1/(block^2 * factor)."""
  check_afno_sizes("AFNO2D", width, n_blocks, hidden_size_factor)
  block = width // n_blocks
  return 1.0 / (block * block * hidden_size_factor)


def split_uniform(key: Array, shapes: dict[str, tuple[int, ...]], scale: float) -> dict[str, Array]:
  """``scale * U[0, 1)`` arrays of the given shapes, cut from one draw."""
  sizes = [math.prod(s) for s in shapes.values()]
  flat = scale * jax.random.uniform(key, (sum(sizes),), jnp.float32)
  offsets = np.cumsum([0] + sizes)
  return {name: flat[offsets[i]:offsets[i + 1]].reshape(shape) for i, (name, shape) in enumerate(shapes.items())}


class AFNO2D(nn.Module):
  """Flax layer over :func:`afno2d`; input and output (B, X, Y, width), channels-last.

  Params ``w1, b1, w2, b2`` in the official (2=[real, imag], n_blocks, in, out) layout, with the
  official initialisation scale * U[0, 1).
  """
  width: int
  n_blocks: int = 8
  modes: int = 32
  hidden_size_factor: int = 1
  act: str = "gelu"

  @nn.compact
  def __call__(self, x: Array) -> Array:
    check_afno_sizes("AFNO2D", self.width, self.n_blocks, self.hidden_size_factor, self.modes)
    check(x.shape[-1] == self.width, f"AFNO2D input has {x.shape[-1]} channels, expected width={self.width}")
    scale = afno_init_scale(self.width, self.n_blocks, self.hidden_size_factor)
    shapes = afno_param_shapes(self.width, self.n_blocks, self.hidden_size_factor)
    # one uniform draw for all four (each distinct random op costs XLA compile time on CPU)
    # (flax also calls init functions abstractly in apply, to check shapes: hence the zeros)
    draws = split_uniform(self.make_rng("params"), shapes, scale) if self.is_initializing() else {}
    p = {name: self.param(name, lambda _key, name=name: draws.get(name, jnp.zeros(shapes[name]))) for name in shapes}
    return afno2d(x, p["w1"], p["b1"], p["w2"], p["b2"], modes=self.modes, act=self.act)
