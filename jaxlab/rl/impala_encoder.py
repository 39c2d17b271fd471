"""The IMPALA encoder (Espeholt et al., ICML 2018, Fig. 3 right), as Dopamine defines it.

Dopamine's ``jax/networks.py`` ``ImpalaEncoder`` / ``Stack``, the encoder of the Soft-MoE paper's
Rainbow runs (``labs/moes/configs/full_rainbow.gin``, ``dqn_impala.gin``: ``encoder_type =
'IMPALA'``): three stacks of ``16, 32, 32`` channels (times ``nn_scale``), each

  Conv(c, 3x3, SAME) -> MaxPool(3x3, stride 2, SAME) -> 2 x [x + Conv(ReLU(Conv(ReLU(x))))]

then a final ReLU. 84x84 frames give 42x42x16, 21x21x32 and 11x11x32 features (121 tokens of 32,
the paper's Fig. 3 shapes for IMPALA). Kernel initialisation is Dopamine's, which differs by
layer: the stack's first convolution is Glorot-uniform, the four residual convolutions keep
flax's default (LeCun-normal); biases are zero.

``conv`` chooses how each convolution is computed, with the same parameters and values:
``"xla"`` is ``nn.Conv``; ``"patches"`` is :class:`~jaxlab.rl.networks_encoders.PatchConv` (a matmul
over 3x3 patches, many times faster than XLA:CPU's convolution inside the jitted RL loop);
``"auto"`` (default) is the patch matmul on CPU and XLA's convolution on every other platform,
chosen when the program is lowered. The max-pool is ``nn.max_pool`` in every case.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check_choice, check_int
from jaxlab.rl.networks_encoders import CONVS, PatchConv

#: Channels of the three stacks (Dopamine's ``ImpalaEncoder.stack_sizes``).
IMPALA_STACK_SIZES = (16, 32, 32)
_GLOROT = nn.initializers.xavier_uniform()
_FLAX_DEFAULT = nn.initializers.lecun_normal()  # what Dopamine's residual nn.Conv layers get


def _conv(features: int, kernel_init: nn.initializers.Initializer, conv: str, name: str) -> nn.Module:
  """A 3x3, stride-1, SAME convolution named ``name``, computed as ``conv`` says."""
  if conv == "xla":
    return nn.Conv(features, (3, 3), strides=(1, 1), padding="SAME", kernel_init=kernel_init, name=name)
  return PatchConv(features, 3, 1, kernel_init=kernel_init, cpu_only=conv == "auto", name=name)


class ImpalaStack(nn.Module):
  """One IMPALA stack: conv, 3x3/2 max-pool, ``num_blocks`` pre-activation residual blocks
  (Dopamine's ``Stack``; parameters ``Conv_0`` .. ``Conv_{2 * num_blocks}`` as there)."""

  features: int
  num_blocks: int = 2
  conv: str = "auto"

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = _conv(self.features, _GLOROT, self.conv, "Conv_0")(x)
    x = nn.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding="SAME")
    for i in range(self.num_blocks):
      h = _conv(self.features, _FLAX_DEFAULT, self.conv, f"Conv_{2 * i + 1}")(nn.relu(x))
      x = x + _conv(self.features, _FLAX_DEFAULT, self.conv, f"Conv_{2 * i + 2}")(nn.relu(h))
    return x


class ImpalaEncoder(nn.Module):
  """IMPALA torso, observations [b, H, W, C] -> features [b, ceil(H/8), ceil(W/8), 32 * nn_scale].

  Integer (uint8 frame) observations are scaled to [0, 1] in float32 first (Dopamine's
  ``preprocess_atari_inputs``); float ones keep their dtype.

  Attributes:
    nn_scale: channel multiplier of every stack (Dopamine's ``nn_scale``).
    stack_sizes: channels of the stacks before ``nn_scale``.
    num_blocks: residual blocks per stack.
    conv: ``"auto"``, ``"patches"`` or ``"xla"`` (module docstring).
  """

  nn_scale: int = 1
  stack_sizes: Sequence[int] = IMPALA_STACK_SIZES
  num_blocks: int = 2
  conv: str = "auto"

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    check_choice(self.conv, "ImpalaEncoder.conv", CONVS)
    check_int(self.nn_scale, "ImpalaEncoder.nn_scale", meaning="channel multiplier")
    check_int(self.num_blocks, "ImpalaEncoder.num_blocks", minimum=0)
    x = obs if jnp.issubdtype(obs.dtype, jnp.floating) else obs.astype(jnp.float32)
    if jnp.issubdtype(obs.dtype, jnp.integer):
      x = x / 255.0
    for i, size in enumerate(self.stack_sizes):
      x = ImpalaStack(size * self.nn_scale, self.num_blocks, self.conv, name=f"Stack_{i}")(x)
    return nn.relu(x)
