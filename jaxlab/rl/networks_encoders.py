"""Encoders for value networks: images [b, H, W, C] -> features [b, h, w, c]; vectors [b, F] -> [b, F'].

* MinAtar (Young & Tian 2019): one Conv(16, 3x3, stride 1, SAME) + ReLU, as dopamine's
  ``labs/environments/minatar/minatar_env.MinatarDQNNetwork`` (10x10xC -> 10x10x16).
* Nature DQN (Mnih et al., Nature 2015): Conv(32, 8x8, /4), Conv(64, 4x4, /2), Conv(64, 3x3, /1)
  with ReLUs, SAME padding as in dopamine's ``NatureDQNMoE`` (84x84x4 -> 11x11x64).
* IMPALA (Espeholt et al., ICML 2018): three residual stacks, 84x84x4 -> 11x11x32
  (:mod:`jaxlab.rl.impala_encoder`, Dopamine's ``ImpalaEncoder``).

* MLP, for vector observations: Dense + ReLU layers, as the first layers of dopamine's
  ``ClassicControlDQNNetwork`` (dopamine/jax/networks.py: 2 x Dense(512) + ReLU, then Q); the
  value network's penultimate layer (dense or MoE) is that network's second layer.

Kernels are Glorot-uniform (dopamine's ``xavier_uniform``), biases zero.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check_choice, check_int
from jaxlab.registry import Registry

_INIT = nn.initializers.xavier_uniform()
#: Encoder names; ``"auto"`` is "mlp" for vector observations [b, F] and "minatar" for images.
ENCODERS = ("auto", "minatar", "nature", "impala", "mlp")
NATURE_LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (features, kernel, stride), Mnih et al. 2015


CONVS = ("auto", "patches", "xla")


def same_padding(size: int, kernel: int, stride: int) -> tuple[tuple[int, int], int]:
  """``((low, high), out)``: XLA's SAME padding of one spatial side (what ``nn.Conv`` uses) and the
  output size ``ceil(size / stride)``; the extra pixel of an odd total goes to the high side."""
  out = -(-size // stride)
  total = max((out - 1) * stride + kernel - size, 0)
  return (total // 2, total - total // 2), out


def _patch_matmul(x: jax.Array, kernel: jax.Array, bias: jax.Array, stride: int) -> jax.Array:
  """A SAME convolution as one matmul over gathered patches (space-to-depth first when strided)."""
  k, s, f = kernel.shape[0], stride, kernel.shape[-1]
  b, height, width, c = x.shape
  m = -(-k // s)  # kernel blocks per side
  (top, _), h = same_padding(height, k, s)
  (left, _), w = same_padding(width, k, s)
  rows, cols = h + m - 1, w + m - 1  # blocks per side after padding
  x = jnp.pad(x, ((0, 0), (top, s * rows - height - top), (left, s * cols - width - left), (0, 0)))
  blocks = x.reshape(b, rows, s, cols, s, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, rows, cols, s * s * c)
  patches = jnp.concatenate([blocks[:, i:i + h, j:j + w, :] for i in range(m) for j in range(m)], axis=-1)
  kernel = jnp.pad(kernel, ((0, m * s - k), (0, m * s - k), (0, 0), (0, 0)))
  kernel = kernel.reshape(m, s, m, s, c, f).transpose(0, 2, 1, 3, 4, 5)
  return patches @ kernel.reshape(m * m * s * s * c, f) + bias


def _xla_conv(x: jax.Array, kernel: jax.Array, bias: jax.Array, stride: int) -> jax.Array:
  """The same convolution as XLA's convolution op (what ``nn.Conv`` computes)."""
  return jax.lax.conv_general_dilated(x, kernel.astype(x.dtype), (stride, stride), "SAME",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC")) + bias


def patch_conv(x: jax.Array, kernel: jax.Array, bias: jax.Array, stride: int, cpu_only: bool = False) -> jax.Array:
  """:class:`PatchConv`'s SAME convolution of ``x`` [b, H, W, C] by ``kernel`` [k, k, C, F] (+ ``bias`` [F]).

  The patch matmul; with ``cpu_only`` it on CPU and XLA's convolution op elsewhere, chosen when the
  program is lowered.
  """
  patch = functools.partial(_patch_matmul, stride=stride)
  if cpu_only:
    return jax.lax.platform_dependent(x, kernel, bias, cpu=patch, default=functools.partial(_xla_conv, stride=stride))
  return patch(x, kernel, bias)


class PatchConv(nn.Module):
  """A ``kernel_size`` x ``kernel_size``, stride ``stride``, SAME convolution as patches @ kernel.

  Same parameters (``kernel [k, k, C, F]``, ``bias [F]``) and outputs as
  ``nn.Conv(F, (k, k), strides=(stride, stride))``. Why: inside a ``lax.scan`` (the jitted RL
  loop) XLA:CPU runs convolutions and their gradients many times slower than the same work as
  one matmul over gathered patches (the Nature CNN's update: 2.4 s vs 0.19 s outside the loop,
  docs/methods/soft_moe_rl.md, "Atari through envpool"); outside loops the two cost about the same.

  A strided convolution is first rearranged space-to-depth (blocks of ``stride x stride`` pixels
  become channels) and its kernel, zero-padded to a multiple of the stride, likewise, so the
  patches are ``ceil(k / stride)**2`` unstrided slices rather than ``k**2`` strided ones: the
  same matmul, a smaller program (half the Nature CNN gradient's compile time).

  That is XLA:CPU's tuning, so with ``cpu_only=True`` the patch matmul runs on CPU and XLA's
  convolution op on every other platform, chosen when the program is lowered
  (``jax.lax.platform_dependent``).
  """

  features: int
  kernel_size: int = 3
  stride: int = 1
  kernel_init: nn.initializers.Initializer = _INIT
  cpu_only: bool = False

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    check_int(self.features, f"{type(self).__name__}.features")
    k, s = self.kernel_size, self.stride
    kernel = self.param("kernel", self.kernel_init, (k, k, x.shape[-1], self.features))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    return patch_conv(x, kernel, bias, s, self.cpu_only)


class PatchConv3x3(PatchConv):
  """A 3x3, stride 1, SAME :class:`PatchConv` (the MinAtar encoder's)."""

  kernel_size: int = 3
  stride: int = 1


def _as_float(obs: jax.Array) -> jax.Array:
  """Boolean / integer observations as float32; float ones as they are (bfloat16 under a bfloat16
  compute dtype, where the caller casts them to the params' dtype)."""
  return obs if jnp.issubdtype(obs.dtype, jnp.floating) else obs.astype(jnp.float32)


def frames_as_float(obs: jax.Array) -> jax.Array:
  """Integer (uint8 frame) observations as float32 in [0, 1] (dopamine's ``preprocess_atari_inputs``);
  boolean ones as float32 0/1, float ones as they are."""
  x = _as_float(obs)
  if jnp.issubdtype(obs.dtype, jnp.integer):
    x = x / 255.0  # dopamine's preprocess_atari_inputs
  return x


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
    check_choice(self.conv, "conv", CONVS)
    check_int(self.features, "MinAtarEncoder.features")
    x = _as_float(obs)
    if self.conv != "xla":
      return nn.relu(PatchConv3x3(self.features, cpu_only=self.conv == "auto", name="Conv_0")(x))
    return nn.relu(nn.Conv(self.features, (3, 3), strides=(1, 1), kernel_init=_INIT)(x))


class NatureEncoder(nn.Module):
  """The Nature DQN torso; integer (uint8 frame) inputs are scaled to [0, 1] first (in float32; float
  input keeps its dtype).

  84x84 frames give 21x21x32, 11x11x64 and 11x11x64 features (SAME padding, as flax's default
  in dopamine's ``NatureDQNNetwork`` / ``NatureDQNMoE``). ``conv`` (same params ``Conv_0..2`` and
  values in each case): ``"xla"`` is ``nn.Conv``; ``"patches"`` computes each convolution as
  :class:`PatchConv` (many times faster inside the jitted RL loop on CPU); ``"auto"`` (default) is
  the patch matmul on CPU and XLA's convolution elsewhere.
  """

  conv: str = "auto"

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    check_choice(self.conv, "conv", CONVS)
    x = frames_as_float(obs)
    for i, (features, kernel, stride) in enumerate(NATURE_LAYERS):
      if self.conv != "xla":
        conv = PatchConv(features, kernel, stride, cpu_only=self.conv == "auto", name=f"Conv_{i}")
      else:
        conv = nn.Conv(features, (kernel, kernel), strides=(stride, stride), kernel_init=_INIT, name=f"Conv_{i}")
      x = nn.relu(conv(x))
    return x


class MLPEncoder(nn.Module):
  """Dense(f) + ReLU for each ``f`` of ``features`` on flattened observations [b, ...] -> [b, features[-1]].

  Boolean / integer observations are cast to float32 (float input keeps its dtype), not rescaled.
  """

  features: tuple[int, ...] = (512,)

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    x = _as_float(obs).reshape(obs.shape[0], -1)
    for f in self.features:
      x = nn.relu(nn.Dense(f, kernel_init=_INIT)(x))
    return x


def resolve_encoder(name: str, obs_ndim: int) -> str:
  """``name`` with "auto" resolved for observations of rank ``obs_ndim`` (batch included)."""
  check_choice(name, "encoder", ENCODERS)
  if name == "auto":
    return "mlp" if obs_ndim == 2 else "minatar"
  return name


def _impala(mlp_features: tuple[int, ...]) -> nn.Module:
  del mlp_features
  from jaxlab.rl.impala_encoder import ImpalaEncoder  # noqa: PLC0415 - it builds on this module
  return ImpalaEncoder()


#: The encoder modules by name (``ENCODERS`` but "auto"), each ``mlp_features -> module``.
ENCODER_MODULES: Registry = Registry("encoder")
ENCODER_MODULES.register("minatar")(lambda mlp_features: MinAtarEncoder())
ENCODER_MODULES.register("nature")(lambda mlp_features: NatureEncoder())
ENCODER_MODULES.register("impala")(_impala)
ENCODER_MODULES.register("mlp")(lambda mlp_features: MLPEncoder(tuple(mlp_features)))


def make_encoder(name: str, mlp_features: tuple[int, ...] = (512,)) -> nn.Module:
  """The encoder module registered as ``name`` (one of ``ENCODERS`` but "auto"; see :func:`resolve_encoder`)."""
  check_choice(name, "encoder", ENCODERS[1:])
  return ENCODER_MODULES.get(name)(mlp_features)