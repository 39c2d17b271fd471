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


CONVS = ("auto", "patches", "xla")


def _patch_matmul(x: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
  """3x3 SAME convolution as one matmul over the 9 shifted copies of ``x`` (im2col)."""
  c, h, w = x.shape[-1], x.shape[1], x.shape[2]
  padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  patches = jnp.concatenate([padded[:, i:i + h, j:j + w, :] for i in range(3) for j in range(3)], axis=-1)
  return patches @ kernel.reshape(9 * c, kernel.shape[-1]) + bias


def _xla_conv(x: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
  """The same convolution as XLA's convolution op (what ``nn.Conv`` computes)."""
  return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + bias


class PatchConv3x3(nn.Module):
  """A 3x3, stride 1, SAME convolution computed as im2col patches @ kernel.

  Same parameters (``kernel [3, 3, C, F]``, ``bias [F]``) and outputs as ``nn.Conv(F, (3, 3))``.
  Why: inside a ``lax.scan`` (the jitted RL loop) XLA:CPU runs small convolutions and their
  gradients several times slower than the same work as one matmul; outside loops the two cost
  about the same. That is XLA:CPU's tuning, so with ``cpu_only=True`` the patch matmul runs on
  CPU and XLA's convolution op (``nn.Conv``'s) on every other platform, chosen when the program
  is lowered (``jax.lax.platform_dependent``).
  """

  features: int
  kernel_init: nn.initializers.Initializer = _INIT
  cpu_only: bool = False

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    check_int(self.features, "PatchConv3x3.features")
    c = x.shape[-1]
    kernel = self.param("kernel", self.kernel_init, (3, 3, c, self.features))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    if self.cpu_only:
      return jax.lax.platform_dependent(x, kernel, bias, cpu=_patch_matmul, default=_xla_conv)
    return _patch_matmul(x, kernel, bias)


def _as_float(obs: jax.Array) -> jax.Array:
  """Boolean / integer observations as float32; float ones as they are (bfloat16 under a bfloat16
  compute dtype, where the caller casts them to the params' dtype)."""
  return obs if jnp.issubdtype(obs.dtype, jnp.floating) else obs.astype(jnp.float32)


class MinAtarEncoder(nn.Module):
  """Conv(16, 3x3) + ReLU on MinAtar's 10x10xC boolean grids (cast to float32; float input keeps its dtype).

  ``conv`` (same params and values in each case): ``"xla"`` is ``nn.Conv``; ``"patches"``
  computes the convolution as a matmul over 3x3 patches (faster inside the jitted RL loop on
  CPU); ``"auto"`` (default) is the patch matmul on CPU and XLA's convolution elsewhere
  (``PatchConv3x3(cpu_only=True)``).
  """

  features: int = 16
  conv: str = "auto"

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    check(self.conv in CONVS, f"conv={self.conv!r}; choose one of {CONVS}")
    check_int(self.features, "MinAtarEncoder.features")
    x = _as_float(obs)
    if self.conv != "xla":
      return nn.relu(PatchConv3x3(self.features, cpu_only=self.conv == "auto", name="Conv_0")(x))
    return nn.relu(nn.Conv(self.features, (3, 3), strides=(1, 1), kernel_init=_INIT)(x))


class NatureEncoder(nn.Module):
  """The Nature DQN torso; integer (uint8 frame) inputs are scaled to [0, 1] first (in float32; float
  input keeps its dtype)."""

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    x = _as_float(obs)
    if jnp.issubdtype(obs.dtype, jnp.integer):
      x = x / 255.0  # dopamine's preprocess_atari_inputs
    for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
      x = nn.relu(nn.Conv(features, (kernel, kernel), strides=(stride, stride),
                          kernel_init=_INIT)(x))
    return x


def make_encoder(name: str) -> nn.Module:
  check(name in ENCODERS, f"encoder={name!r}; choose one of {ENCODERS}")
  return MinAtarEncoder() if name == "minatar" else NatureEncoder()
