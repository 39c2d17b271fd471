"""Convolutional encoders for value networks: observation [b, H, W, C] -> features [b, h, w, c].

* MinAtar (Young & Tian 2019): one Conv(16, 3x3, stride 1, SAME) + ReLU, as dopamine's
  ``labs/environments/minatar/minatar_env.MinatarDQNNetwork`` (10x10xC -> 10x10x16).
* Nature DQN (Mnih et al., Nature 2015): Conv(32, 8x8, /4), Conv(64, 4x4, /2), Conv(64, 3x3, /1)
  with ReLUs, SAME padding as in dopamine's ``NatureDQNMoE`` (84x84x4 -> 11x11x64).

Kernels are Glorot-uniform (dopamine's ``xavier_uniform``), biases zero.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check, check_int

_INIT = nn.initializers.xavier_uniform()
ENCODERS = ("minatar", "nature")
NATURE_LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (features, kernel, stride), Mnih et al. 2015


def same_padding(size: int, kernel: int, stride: int) -> tuple[tuple[int, int], int]:
  """``((low, high), out)``: XLA's SAME padding of one spatial side (what ``nn.Conv`` uses) and the
  output size ``ceil(size / stride)``; the extra pixel of an odd total goes to the high side."""
  out = -(-size // stride)
  total = max((out - 1) * stride + kernel - size, 0)
  return (total // 2, total - total // 2), out


class PatchConv(nn.Module):
  """A ``kernel_size`` x ``kernel_size``, stride ``stride``, SAME convolution as patches @ kernel.

  Same parameters (``kernel [k, k, C, F]``, ``bias [F]``) and outputs as
  ``nn.Conv(F, (k, k), strides=(stride, stride))``. Why: inside a ``lax.scan`` (the jitted RL
  loop) XLA:CPU runs convolutions and their gradients many times slower than the same work as
  one matmul over gathered patches (the Nature CNN's update: 2.4 s vs 0.19 s outside the loop,
  BUILD_NOTES.md "Atari through envpool"); outside loops the two cost about the same.

  A strided convolution is first rearranged space-to-depth (blocks of ``stride x stride`` pixels
  become channels) and its kernel, zero-padded to a multiple of the stride, likewise, so the
  patches are ``ceil(k / stride)**2`` unstrided slices rather than ``k**2`` strided ones: the
  same matmul, a smaller program (half the Nature CNN gradient's compile time).
  """

  features: int
  kernel_size: int = 3
  stride: int = 1
  kernel_init: nn.initializers.Initializer = _INIT

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    check_int(self.features, f"{type(self).__name__}.features")
    k, s = self.kernel_size, self.stride
    b, height, width, c = x.shape
    kernel = self.param("kernel", self.kernel_init, (k, k, c, self.features))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    m = -(-k // s)  # kernel blocks per side
    (top, _), h = same_padding(height, k, s)
    (left, _), w = same_padding(width, k, s)
    rows, cols = h + m - 1, w + m - 1  # blocks per side after padding
    x = jnp.pad(x, ((0, 0), (top, s * rows - height - top), (left, s * cols - width - left), (0, 0)))
    blocks = x.reshape(b, rows, s, cols, s, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, rows, cols, s * s * c)
    patches = jnp.concatenate([blocks[:, i:i + h, j:j + w, :] for i in range(m) for j in range(m)], axis=-1)
    kernel = jnp.pad(kernel, ((0, m * s - k), (0, m * s - k), (0, 0), (0, 0)))
    kernel = kernel.reshape(m, s, m, s, c, self.features).transpose(0, 2, 1, 3, 4, 5)
    return patches @ kernel.reshape(m * m * s * s * c, self.features) + bias


class PatchConv3x3(PatchConv):
  """A 3x3, stride 1, SAME :class:`PatchConv` (the MinAtar encoder's)."""

  kernel_size: int = 3
  stride: int = 1


class MinAtarEncoder(nn.Module):
  """Conv(16, 3x3) + ReLU on MinAtar's 10x10xC boolean grids (cast to float32).

  ``conv="patches"`` (default) computes the convolution as a matmul over 3x3 patches (same
  params and values as ``conv="xla"``, ``nn.Conv``; faster inside the jitted RL loop on CPU).
  """

  features: int = 16
  conv: str = "patches"

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    check(self.conv in ("patches", "xla"), f"conv={self.conv!r}; choose 'patches' or 'xla'")
    check_int(self.features, "MinAtarEncoder.features")
    x = obs.astype(jnp.float32)
    if self.conv == "patches":
      return nn.relu(PatchConv3x3(self.features, name="Conv_0")(x))
    return nn.relu(nn.Conv(self.features, (3, 3), strides=(1, 1), kernel_init=_INIT)(x))


class NatureEncoder(nn.Module):
  """The Nature DQN torso; integer (uint8 frame) inputs are scaled to [0, 1] first.

  84x84 frames give 21x21x32, 11x11x64 and 11x11x64 features (SAME padding, as flax's default
  in dopamine's ``NatureDQNNetwork`` / ``NatureDQNMoE``). ``conv="patches"`` (default) computes
  each convolution as :class:`PatchConv` (same params ``Conv_0..2`` and values as ``conv="xla"``,
  ``nn.Conv``; many times faster inside the jitted RL loop on CPU).
  """

  conv: str = "patches"

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    check(self.conv in ("patches", "xla"), f"conv={self.conv!r}; choose 'patches' or 'xla'")
    x = obs.astype(jnp.float32)
    if jnp.issubdtype(obs.dtype, jnp.integer):
      x = x / 255.0  # dopamine's preprocess_atari_inputs
    for i, (features, kernel, stride) in enumerate(NATURE_LAYERS):
      if self.conv == "patches":
        conv = PatchConv(features, kernel, stride, name=f"Conv_{i}")
      else:
        conv = nn.Conv(features, (kernel, kernel), strides=(stride, stride), kernel_init=_INIT, name=f"Conv_{i}")
      x = nn.relu(conv(x))
    return x


def make_encoder(name: str) -> nn.Module:
  """The encoder module registered as ``name`` (one of ``ENCODERS``)."""
  check(name in ENCODERS, f"encoder={name!r}; choose one of {ENCODERS}")
  return MinAtarEncoder() if name == "minatar" else NatureEncoder()
