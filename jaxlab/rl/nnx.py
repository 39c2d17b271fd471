"""Flax NNX modules of the Q-network and its parts, over the same functions as the linen ones.

:class:`QNetwork` computes what :class:`jaxlab.rl.QNetwork` computes: the same encoders
(MinAtar, Nature, IMPALA, MLP), tokenizers, heads (dense, Soft MoE, Top-1 MoE, token heads)
and Rainbow output layers (:class:`NoisyDense`, :class:`RainbowHead`), on parameters in the linen
module's layout (:mod:`jaxlab.nnx_params`; so the attribute names are linen's, e.g.
``MinAtarEncoder_0``, ``SoftMoE_0``, ``Dense_0``), built for an observation shape given up front.
flax's own layers stand in for flax's linen ones (``nnx.Linear`` for ``nn.Dense``, ``nnx.Conv``
for ``nn.Conv``); everything else calls the functions the linen modules call.

Noise: a noisy layer draws its key from the ``noise`` stream of the ``rngs`` it was built with
(forked, as ``nnx.Dropout`` does), or from the ``rngs`` given to the call. The linen layer derives
its key from the ``"noise"`` RNG of ``apply`` and its scope instead, so one seed gives the two
different noise; given the same key, a noisy layer computes the same output in both
(``jaxlab.rl.rainbow_layers.noisy_dense``). ``deterministic=True`` uses the means and needs no key.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

from jaxlab.errors import check, check_bool, check_int
from jaxlab.moe import experts as experts_lib
from jaxlab.moe import nnx as moe_nnx
from jaxlab.nnx_params import LinenLayout, linen_config, param_dict, param_values
from jaxlab.rl import networks
from jaxlab.rl import networks_encoders as encoders
from jaxlab.rl import networks_token_heads as token_heads
from jaxlab.rl import networks_tokens as tokens
from jaxlab.rl import rainbow_layers
from jaxlab.rl.impala_encoder import IMPALA_STACK_SIZES

__all__ = ["ImpalaEncoder", "MLPEncoder", "MinAtarEncoder", "NatureEncoder", "NoisyDense", "PatchConv",
           "PerFeatureEmbedding", "PerPatch", "QNetwork", "RainbowHead", "TokenDense", "TokenMLP"]

Array = jax.Array
_GLOROT = nn.initializers.xavier_uniform()   # dopamine's xavier_uniform, as the linen layers
_LECUN = nn.initializers.lecun_normal()      # flax's default, which Dopamine's IMPALA residual convs keep


def _noise_stream(rngs: nnx.Rngs) -> Any:
  """A fork of ``rngs``' ``noise`` stream (or ``default``) for a layer's own noise; None without one."""
  has_stream = any(name in ("noise", "default") for name in rngs)
  return rngs["noise"].fork() if has_stream else nnx.data(None)


def _noise_key(rngs: nnx.Rngs | nnx.RngStream | jax.Array) -> Array:
  if isinstance(rngs, nnx.Rngs):
    return rngs["noise"]()
  if isinstance(rngs, nnx.RngStream):
    return rngs()
  return rngs


class NoisyDense(LinenLayout):
  r"""Factorised noisy linear layer (Fortunato et al. 2018, Eqs. 8-11), the NNX twin of :class:`jaxlab.rl.NoisyDense`.

  Parameters ``kernel_mu``, ``kernel_sigma`` [p, q], ``bias_mu``, ``bias_sigma`` [q], initialised
  as the linen layer's (:math:`\mu \sim U[-1/\sqrt{p}, 1/\sqrt{p}]`, :math:`\sigma = 0.1/\sqrt{p}`).

  Args:
    in_features: p.
    features: q.
    deterministic: use the means only (no noise, no key needed).
    factorised: apply the noise in its factorised form (``jaxlab.rl.rainbow_layers.noisy_dense``), which
      forms no noisy weight matrix: the form for noise drawn per batch row under ``jax.vmap``.
    rngs: ``params`` initialises the parameters; the ``noise`` stream (or ``default``) is forked
      for the noise of each call, unless a call passes its own.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import NoisyDense
    >>> layer = NoisyDense(16, 4, rngs=nnx.Rngs(0))
    >>> x = jnp.ones((2, 16))
    >>> bool(jnp.all(layer(x) == layer(x)))  # a fresh key per call
    False
    >>> bool(jnp.all(layer(x, rngs=nnx.Rngs(noise=1)) == layer(x, rngs=nnx.Rngs(noise=1))))
    True
    >>> layer(x, deterministic=True).shape
    (2, 4)
  """

  def __init__(self, in_features: int, features: int, *, deterministic: bool = False, factorised: bool = False,
               rngs: nnx.Rngs):
    check_int(in_features, "NoisyDense.in_features")
    check_int(features, "NoisyDense.features")
    check_bool(deterministic, "NoisyDense.deterministic")
    check_bool(factorised, "NoisyDense.factorised")
    p, q = in_features, features
    self.kernel_mu = nnx.Param(rainbow_layers.init_noisy_mu(rngs.params(), (p, q), p))
    self.kernel_sigma = nnx.Param(rainbow_layers.init_noisy_sigma(None, (p, q), p))
    self.bias_mu = nnx.Param(rainbow_layers.init_noisy_mu(rngs.params(), (q,), p))
    self.bias_sigma = nnx.Param(rainbow_layers.init_noisy_sigma(None, (q,), p))
    self.deterministic, self.factorised = deterministic, factorised
    self.rngs = _noise_stream(rngs)

  def __call__(self, x: Array, *, deterministic: bool | None = None,
               rngs: nnx.Rngs | nnx.RngStream | jax.Array | None = None) -> Array:
    """``x`` [..., p] -> [..., q] with one noise sample for the whole batch (``jaxlab.rl.rainbow_layers.noisy_dense``).

    Args:
      x: inputs [..., in_features].
      deterministic: overrides the constructor's.
      rngs: ``nnx.Rngs`` (its ``noise`` stream), an ``nnx.RngStream`` or a key for this call's noise;
        None: the layer's own stream.

    Returns:
      [..., features].
    """
    deterministic = self.deterministic if deterministic is None else deterministic
    key = None
    if not deterministic:
      source = rngs if rngs is not None else self.rngs
      check(source is not None, "NoisyDense has no noise stream: build it with rngs that have 'noise' (or "
            "'default'), pass rngs= to the call, or use deterministic=True")
      key = _noise_key(source)
    params = {"kernel_mu": self.kernel_mu[...], "kernel_sigma": self.kernel_sigma[...],
              "bias_mu": self.bias_mu[...], "bias_sigma": self.bias_sigma[...]}
    return rainbow_layers.noisy_dense(params, x, key, self.factorised)


class RainbowHead(LinenLayout):
  """Features [B, d] -> logits [B, A, N]: the NNX twin of :class:`jaxlab.rl.RainbowHead`.

  Value and advantage streams (``value``, ``advantage``) combined by :func:`jaxlab.rl.dueling_logits`,
  or one layer ``logits`` without ``dueling``; each a :class:`NoisyDense`, or ``nnx.Linear``
  (Glorot) without ``noisy``.

  Args:
    in_features: d.
    num_actions: A.
    num_atoms: N (1 with a non-distributional agent).
    noisy: noisy linear layers.
    dueling: value and advantage streams.
    deterministic: noisy layers use their means.
    factorised: the noisy layers compute in their factorised form (:class:`NoisyDense`).
    rngs: parameters and the noisy layers' streams.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import RainbowHead
    >>> head = RainbowHead(32, num_actions=6, num_atoms=51, rngs=nnx.Rngs(0))
    >>> head(jnp.ones((2, 32))).shape
    (2, 6, 51)
  """

  def __init__(self, in_features: int, num_actions: int, num_atoms: int = 51, *, noisy: bool = True,
               dueling: bool = True, deterministic: bool = False, factorised: bool = False, rngs: nnx.Rngs):
    check_int(in_features, "RainbowHead.in_features")
    check_int(num_actions, "RainbowHead.num_actions")
    check_int(num_atoms, "RainbowHead.num_atoms")
    check_bool(noisy, "RainbowHead.noisy")
    check_bool(dueling, "RainbowHead.dueling")

    def linear(features: int) -> nnx.Module:
      if noisy:
        return NoisyDense(in_features, features, deterministic=deterministic, factorised=factorised, rngs=rngs)
      return nnx.Linear(in_features, features, kernel_init=_GLOROT, rngs=rngs)
    a, n = num_actions, num_atoms
    if dueling:
      self.advantage, self.value = linear(a * n), linear(n)
    else:
      self.logits = linear(a * n)
    self.num_actions, self.num_atoms, self.noisy, self.dueling = a, n, noisy, dueling

  def __call__(self, x: Array, *, deterministic: bool | None = None, rngs: nnx.Rngs | None = None) -> Array:
    """Features [B, in_features] -> logits [B, num_actions, num_atoms].

    Args:
      x: [B, in_features].
      deterministic: overrides the noisy layers' setting.
      rngs: ``nnx.Rngs`` whose ``noise`` stream draws this call's noise (advantage first, then value);
        None: each layer's own stream.

    Returns:
      [B, num_actions, num_atoms].
    """
    kwargs = {"deterministic": deterministic, "rngs": rngs} if self.noisy else {}
    b, a, n = x.shape[0], self.num_actions, self.num_atoms
    if not self.dueling:
      return self.logits(x, **kwargs).reshape(b, a, n)
    advantages = self.advantage(x, **kwargs).reshape(b, a, n)
    return rainbow_layers.dueling_logits(self.value(x, **kwargs), advantages)


class PatchConv(LinenLayout):
  """A SAME convolution as a matmul over gathered patches: the NNX twin of ``jaxlab.rl.networks_encoders.PatchConv``.

  Parameters ``kernel`` [k, k, C, F] and ``bias`` [F], as ``nnx.Conv``'s.

  Args:
    in_features: C.
    features: F.
    kernel_size: k.
    stride: the stride on both axes.
    kernel_init: initialiser of the kernel (Glorot uniform).
    cpu_only: the patch matmul on CPU and XLA's convolution elsewhere (chosen when the program is lowered).
    rngs: the ``params`` stream initialises the kernel.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import PatchConv
    >>> PatchConv(4, 8, 3, 2, rngs=nnx.Rngs(0))(jnp.ones((1, 9, 9, 4))).shape
    (1, 5, 5, 8)
  """

  def __init__(self, in_features: int, features: int, kernel_size: int = 3, stride: int = 1, *,
               kernel_init: Any = _GLOROT, cpu_only: bool = False, rngs: nnx.Rngs):
    check_int(in_features, "PatchConv.in_features")
    check_int(features, "PatchConv.features")
    k = kernel_size
    self.kernel = nnx.Param(kernel_init(rngs.params(), (k, k, in_features, features)))
    self.bias = nnx.Param(jnp.zeros((features,)))
    self.stride, self.cpu_only = stride, cpu_only

  def __call__(self, x: Array) -> Array:
    """``x`` [b, H, W, C] -> [b, ceil(H / stride), ceil(W / stride), F].

    Args:
      x: [b, H, W, in_features].

    Returns:
      The convolution, as ``nnx.Conv(padding="SAME")`` computes it.
    """
    return encoders.patch_conv(x, self.kernel[...], self.bias[...], self.stride, self.cpu_only)


def _conv(in_features: int, features: int, kernel: int, stride: int, kernel_init: Any, conv: str,
          rngs: nnx.Rngs) -> nnx.Module:
  """A SAME convolution computed as ``conv`` says (the linen encoders' choice)."""
  if conv == "xla":
    return nnx.Conv(in_features, features, (kernel, kernel), strides=(stride, stride), padding="SAME",
                    kernel_init=kernel_init, rngs=rngs)
  return PatchConv(in_features, features, kernel, stride, kernel_init=kernel_init, cpu_only=conv == "auto", rngs=rngs)


class MinAtarEncoder(LinenLayout):
  """Conv(16, 3x3) + ReLU on MinAtar's 10x10xC grids: the NNX twin of ``jaxlab.rl.networks_encoders.MinAtarEncoder``.

  Args:
    in_channels: C.
    features: the convolution's channels.
    conv: ``"auto"``, ``"patches"`` or ``"xla"``, as the linen encoder's.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import MinAtarEncoder
    >>> MinAtarEncoder(4, rngs=nnx.Rngs(0))(jnp.ones((2, 10, 10, 4), bool)).shape
    (2, 10, 10, 16)
  """

  def __init__(self, in_channels: int, features: int = 16, *, conv: str = "auto", rngs: nnx.Rngs):
    check(conv in encoders.CONVS, f"conv={conv!r}; choose one of {encoders.CONVS}")
    check_int(features, "MinAtarEncoder.features")
    self.Conv_0 = _conv(in_channels, features, 3, 1, _GLOROT, conv, rngs)

  def __call__(self, obs: Array) -> Array:
    """Observations [b, H, W, C] (boolean, integer or float) -> ReLU features [b, H, W, features]."""
    return jax.nn.relu(self.Conv_0(encoders._as_float(obs)))


class NatureEncoder(LinenLayout):
  """The Nature DQN torso (84x84 frames -> 11x11x64): the NNX twin of ``jaxlab.rl.networks_encoders.NatureEncoder``.

  Args:
    in_channels: C (4 stacked frames).
    conv: ``"auto"``, ``"patches"`` or ``"xla"``.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import NatureEncoder
    >>> NatureEncoder(4, rngs=nnx.Rngs(0))(jnp.zeros((1, 84, 84, 4), jnp.uint8)).shape
    (1, 11, 11, 64)
  """

  def __init__(self, in_channels: int, *, conv: str = "auto", rngs: nnx.Rngs):
    check(conv in encoders.CONVS, f"conv={conv!r}; choose one of {encoders.CONVS}")
    channels = in_channels
    for i, (features, kernel, stride) in enumerate(encoders.NATURE_LAYERS):
      setattr(self, f"Conv_{i}", _conv(channels, features, kernel, stride, _GLOROT, conv, rngs))
      channels = features

  def __call__(self, obs: Array) -> Array:
    """Frames [b, H, W, C] (uint8 scaled to [0, 1]) -> features [b, ceil(H/8), ceil(W/8), 64]."""
    x = encoders.frames_as_float(obs)
    for i in range(len(encoders.NATURE_LAYERS)):
      x = jax.nn.relu(getattr(self, f"Conv_{i}")(x))
    return x


class MLPEncoder(LinenLayout):
  """Dense + ReLU layers on flattened observations: the NNX twin of :class:`jaxlab.rl.networks_encoders.MLPEncoder`.

  Args:
    in_features: the size of one flattened observation.
    features: the layers' widths.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import MLPEncoder
    >>> MLPEncoder(4, (32, 16), rngs=nnx.Rngs(0))(jnp.ones((2, 4))).shape
    (2, 16)
  """

  def __init__(self, in_features: int, features: Sequence[int] = (512,), *, rngs: nnx.Rngs):
    width = in_features
    for i, f in enumerate(features):
      setattr(self, f"Dense_{i}", nnx.Linear(width, f, kernel_init=_GLOROT, rngs=rngs))
      width = f
    self.num_layers = len(features)

  def __call__(self, obs: Array) -> Array:
    """Observations [b, ...] -> [b, features[-1]] (boolean / integer ones as float32, not rescaled)."""
    x = encoders._as_float(obs).reshape(obs.shape[0], -1)
    for i in range(self.num_layers):
      x = jax.nn.relu(getattr(self, f"Dense_{i}")(x))
    return x


class ImpalaStack(LinenLayout):
  """One IMPALA stack (conv, 3x3/2 max-pool, residual blocks), the NNX twin of linen's ``ImpalaStack``."""

  def __init__(self, in_features: int, features: int, num_blocks: int = 2, conv: str = "auto", *, rngs: nnx.Rngs):
    self.Conv_0 = _conv(in_features, features, 3, 1, _GLOROT, conv, rngs)
    for i in range(2 * num_blocks):
      setattr(self, f"Conv_{i + 1}", _conv(features, features, 3, 1, _LECUN, conv, rngs))
    self.num_blocks = num_blocks

  def __call__(self, x: Array) -> Array:
    """[b, H, W, in_features] -> [b, ceil(H/2), ceil(W/2), features]."""
    x = self.Conv_0(x)
    x = nnx.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding="SAME")
    for i in range(self.num_blocks):
      h = getattr(self, f"Conv_{2 * i + 1}")(jax.nn.relu(x))
      x = x + getattr(self, f"Conv_{2 * i + 2}")(jax.nn.relu(h))
    return x


class ImpalaEncoder(LinenLayout):
  """The IMPALA torso (Espeholt et al., ICML 2018): the NNX twin of :class:`jaxlab.rl.ImpalaEncoder`.

  Args:
    in_channels: C.
    nn_scale: channel multiplier of every stack.
    stack_sizes: channels of the stacks before ``nn_scale``.
    num_blocks: residual blocks per stack.
    conv: ``"auto"``, ``"patches"`` or ``"xla"``.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import ImpalaEncoder
    >>> ImpalaEncoder(4, rngs=nnx.Rngs(0))(jnp.zeros((1, 84, 84, 4), jnp.uint8)).shape
    (1, 11, 11, 32)
  """

  def __init__(self, in_channels: int, *, nn_scale: int = 1, stack_sizes: Sequence[int] = IMPALA_STACK_SIZES,
               num_blocks: int = 2, conv: str = "auto", rngs: nnx.Rngs):
    check(conv in encoders.CONVS, f"ImpalaEncoder.conv={conv!r}; choose one of {encoders.CONVS}")
    check_int(nn_scale, "ImpalaEncoder.nn_scale", meaning="channel multiplier")
    check_int(num_blocks, "ImpalaEncoder.num_blocks", minimum=0)
    channels = in_channels
    for i, size in enumerate(stack_sizes):
      setattr(self, f"Stack_{i}", ImpalaStack(channels, size * nn_scale, num_blocks, conv, rngs=rngs))
      channels = size * nn_scale
    self.num_stacks = len(stack_sizes)

  def __call__(self, obs: Array) -> Array:
    """Frames [b, H, W, C] (uint8 scaled to [0, 1]) -> ReLU features [b, ceil(H/8), ceil(W/8), 32 * nn_scale]."""
    x = encoders.frames_as_float(obs)
    for i in range(self.num_stacks):
      x = getattr(self, f"Stack_{i}")(x)
    return jax.nn.relu(x)


class PerPatch(LinenLayout):
  """Features [b, h, w, c] -> patch tokens [b, (h//ph)*(w//pw), embedding_size], the NNX twin of linen's ``PerPatch``.

  Args:
    in_features: c.
    embedding_size: width of each patch token.
    patch_size: (ph, pw).
    rngs: the ``params`` stream initialises the patch convolution ``embedding``.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import PerPatch
    >>> PerPatch(16, 8, (3, 3), rngs=nnx.Rngs(0))(jnp.ones((2, 10, 10, 16))).shape
    (2, 9, 8)
  """

  def __init__(self, in_features: int, embedding_size: int = 64, patch_size: Sequence[int] = (3, 3), *,
               rngs: nnx.Rngs):
    tokens.check_patch_settings("PerPatch", embedding_size, patch_size)
    ph, pw = patch_size
    self.embedding = nnx.Conv(in_features, embedding_size, (ph, pw), strides=(ph, pw), padding="VALID", rngs=rngs)
    self.patch_size = (ph, pw)

  def __call__(self, features: Array) -> Array:
    """Features [b, h, w, in_features] -> tokens [b, (h//ph)*(w//pw), embedding_size]."""
    ph, pw = self.patch_size
    check(features.shape[1] >= ph and features.shape[2] >= pw,
          f"PerPatch.patch_size={self.patch_size} is larger than the encoder's feature map "
          f"{features.shape[1:3]}; each side must be <= the map's")
    return tokens.per_conv(self.embedding(features))


class PerFeatureEmbedding(LinenLayout):
  """Vector features [b, F] -> tokens [b, F, d], the NNX twin of :class:`jaxlab.rl.networks_tokens.PerFeatureEmbedding`.

  Args:
    num_features: F.
    embedding_size: d, the width of each token.
    rngs: the ``params`` stream initialises ``kernel`` and ``bias`` [F, d], U(-1/sqrt(d), 1/sqrt(d)).

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import PerFeatureEmbedding
    >>> PerFeatureEmbedding(5, 8, rngs=nnx.Rngs(0))(jnp.ones((2, 5))).shape
    (2, 5, 8)
  """

  def __init__(self, num_features: int, embedding_size: int = 64, *, rngs: nnx.Rngs):
    check_int(embedding_size, "PerFeatureEmbedding.embedding_size", meaning="width of each per-feature token")
    shape = (num_features, embedding_size)
    self.kernel = nnx.Param(tokens.init_per_feature(rngs.params(), shape))
    self.bias = nnx.Param(tokens.init_per_feature(rngs.params(), shape))

  def __call__(self, features: Array) -> Array:
    """``token_j = h_j * kernel[j] + bias[j]`` for features [b, F] -> [b, F, embedding_size]."""
    return tokens.per_feature_embedding(features, self.kernel[...], self.bias[...])


class TokenDense(LinenLayout):
  """``relu(x W + c)`` on every token, the NNX twin of :class:`jaxlab.rl.networks_token_heads.TokenDense`.

  Args:
    token_dim: d.
    width: units of the shared layer ``Dense_0``.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import TokenDense
    >>> y, hidden = TokenDense(8, 32, rngs=nnx.Rngs(0))(jnp.ones((2, 5, 8)))
    >>> y.shape
    (2, 5, 32)
  """

  def __init__(self, token_dim: int, width: int = 512, *, rngs: nnx.Rngs):
    check_int(width, "TokenDense.width", meaning="units of the per-token layer")
    self.Dense_0 = nnx.Linear(token_dim, width, kernel_init=_GLOROT, rngs=rngs)

  def __call__(self, x: Array) -> tuple[Array, Array]:
    """Tokens [b, m, token_dim] -> (outputs [b, m, width], the same post-ReLU activations)."""
    token_heads._check_tokens("TokenDense", x)
    h = jax.nn.relu(self.Dense_0(x))
    return h, h


class TokenMLP(LinenLayout):
  """One expert MLP on every token, no router: the NNX twin of :class:`jaxlab.rl.networks_token_heads.TokenMLP`.

  Parameters ``experts/{w1: [1, d, h], b1, w2, b2}`` initialised as a Soft-MoE expert.

  Args:
    token_dim: d.
    hidden: the expert's hidden width h.
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import TokenMLP
    >>> y, hidden = TokenMLP(8, 32, rngs=nnx.Rngs(0))(jnp.ones((2, 5, 8)))
    >>> y.shape, hidden.shape
    ((2, 5, 8), (2, 5, 32))
  """

  def __init__(self, token_dim: int, hidden: int = 512, *, rngs: nnx.Rngs):
    check_int(hidden, "TokenMLP.hidden", meaning="hidden width of the per-token expert")
    self.experts = param_dict(experts_lib.init_experts(rngs.params(), 1, token_dim, hidden))

  def __call__(self, x: Array) -> tuple[Array, Array]:
    """Tokens [b, m, d] -> (outputs [b, m, d], hidden [b, m, hidden]) (``jaxlab.rl.networks_token_heads.token_mlp``)."""
    token_heads._check_tokens("TokenMLP", x)
    return token_heads.token_mlp(param_values(self.experts), x)


#: The :class:`jaxlab.rl.QNetwork` fields that :class:`QNetwork` implements (all of them; a field added
#: to the linen module and not here is refused when set, see :func:`jaxlab.nnx_params.linen_config`).
QNETWORK_SETTINGS = ("num_actions", "encoder", "head", "tokenizer", "num_experts", "expert_hidden", "width",
                     "width_multiplier", "capacity_factor", "normalize", "single_exponential", "moe_impl",
                     "patch_size", "embedding_size", "mlp_features", "importance_weight", "load_balancing_weight",
                     "num_atoms", "dueling", "noisy", "noisy_hidden", "noisy_experts", "noise_per_row",
                     "deterministic", "expert_means", "diagnostics")
#: Settings of the linen QNetwork this twin does not implement yet (the router options and their
#: diagnostics): set to other than their default, they are refused with one line naming the linen module.
QNETWORK_LINEN_ONLY = ("position_embedding", "pooling", "router_diagnostics")
# linen's automatic name of each encoder inside QNetwork
_ENCODER_NAMES = {"minatar": "MinAtarEncoder_0", "nature": "NatureEncoder_0", "impala": "ImpalaEncoder_0",
                  "mlp": "MLPEncoder_0"}


def _shape(fn: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
  """The output shape (without the batch axis) of ``fn`` on a batch of one input of ``shape``."""
  return tuple(jax.eval_shape(fn, jax.ShapeDtypeStruct((1, *shape), jnp.float32)).shape[1:])


class QNetwork(LinenLayout):
  """Q-values [b, num_actions] (or C51 logits) and a stats dict: the NNX twin of :class:`jaxlab.rl.QNetwork`.

  The linen module reads the observation shape from its first input; this one is built for
  ``obs_shape`` (its parameters need the shapes) and refuses other shapes. Its attributes are the
  linen module's parameter names (``MinAtarEncoder_0``, ``SoftMoE_0``, ``Dense_0``, ``rainbow_head``, ...).

  Args:
    obs_shape: one observation's shape, (H, W, C) for images or (F,) for vectors.
    rngs: ``params`` initialises the parameters; ``noise`` (or ``default``) seeds the noisy layers' streams.
    **settings: the fields of :class:`jaxlab.rl.QNetwork` (``num_actions``, ``encoder``, ``head``,
      ``num_experts``, ... : same names, defaults, meaning and checks), kept as ``config``, that linen module.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.rl.nnx import QNetwork
    >>> net = QNetwork((10, 10, 4), num_actions=6, head="softmoe", num_experts=4, expert_hidden=32,
    ...                rngs=nnx.Rngs(0))
    >>> q, stats = net(jnp.zeros((2, 10, 10, 4), bool))
    >>> q.shape, stats["expert_load"].shape
    ((2, 6), (4,))
    >>> sorted(net.linen_params())
    ['Dense_0', 'MinAtarEncoder_0', 'SoftMoE_0']
  """

  def __init__(self, obs_shape: Sequence[int], *, rngs: nnx.Rngs, **settings: Any):
    config = linen_config(networks.QNetwork, settings, QNETWORK_SETTINGS)
    config.check_config()
    obs_shape = tuple(obs_shape)
    check(len(obs_shape) in (1, 3) and all(isinstance(n, int) and n >= 1 for n in obs_shape),
          f"QNetwork obs_shape={obs_shape}; must be (H, W, C) for images or (F,) for vectors, ints >= 1")
    encoder = encoders.resolve_encoder(config.encoder, len(obs_shape) + 1)
    check(len(obs_shape) == 3 or encoder == "mlp",
          f"QNetwork.encoder={config.encoder!r} needs images [batch, H, W, C]; vector observations {obs_shape} "
          "take encoder='mlp' (or 'auto')")
    self.config, self.obs_shape, self.encoder_name = config, obs_shape, encoder
    if encoder == "mlp":
      enc: nnx.Module = MLPEncoder(math.prod(obs_shape), tuple(config.mlp_features), rngs=rngs)
    elif encoder == "impala":
      enc = ImpalaEncoder(obs_shape[-1], rngs=rngs)
    else:
      enc = (MinAtarEncoder if encoder == "minatar" else NatureEncoder)(obs_shape[-1], rngs=rngs)
    setattr(self, _ENCODER_NAMES[encoder], enc)
    features = _shape(enc, obs_shape)
    head, c = config.head, config
    self.tokenizer_name = None
    if head == "none":
      hidden = math.prod(features)
    elif head == "dense":
      hidden = c.width * c.width_multiplier
      if c.noisy_hidden:  # linen's automatic name: the head's Dense is then Dense_0
        self.NoisyDense_0 = NoisyDense(math.prod(features), hidden, deterministic=c.deterministic,
                                       factorised=c.noise_per_row, rngs=rngs)
      else:
        self.Dense_0 = nnx.Linear(math.prod(features), hidden, kernel_init=_GLOROT, rngs=rngs)
    else:
      m, d = self._build_tokenizer(features, rngs)
      if head == "softmoe":
        self.SoftMoE_0 = moe_nnx.SoftMoE(d, c.num_experts, c.expert_hidden, num_tokens=m,
                                         capacity_factor=c.capacity_factor, normalize=c.normalize,
                                         single_exponential=c.single_exponential, impl=c.moe_impl,
                                         noisy_experts=c.noisy_experts, rngs=rngs)
      elif head == "top1":
        self.Top1MoE_0 = moe_nnx.Top1MoE(d, c.num_experts, c.expert_hidden, capacity_factor=c.capacity_factor,
                                         rngs=rngs)
      elif head == "token_dense":
        self.TokenDense_0 = TokenDense(d, c.width * c.width_multiplier, rngs=rngs)
        d = c.width * c.width_multiplier
      else:
        self.TokenMLP_0 = TokenMLP(d, c.expert_hidden, rngs=rngs)
      hidden = m * d
    self.expert_noise_rngs = _noise_stream(rngs) if self.draws_expert_noise else nnx.data(None)
    if c.num_atoms == 1 and not c.dueling and not c.noisy:
      setattr(self, self._q_dense_name, nnx.Linear(hidden, c.num_actions, kernel_init=_GLOROT, rngs=rngs))
    else:
      self.rainbow_head = RainbowHead(hidden, c.num_actions, c.num_atoms, noisy=c.noisy, dueling=c.dueling,
                                      deterministic=c.deterministic, factorised=c.noise_per_row, rngs=rngs)

  @property
  def draws_expert_noise(self) -> bool:
    """Whether the Soft-MoE experts draw noise on every call (``noisy_experts`` without ``expert_means``)."""
    return self.config.noisy_experts and self.config.head == "softmoe" and not self.config.expert_means

  @property
  def _q_dense_name(self) -> str:
    """linen's automatic name of the plain Q layer: ``Dense_1`` after the dense head's ``Dense_0``."""
    return "Dense_1" if self.config.head == "dense" and not self.config.noisy_hidden else "Dense_0"

  def _build_tokenizer(self, features: tuple[int, ...], rngs: nnx.Rngs) -> tuple[int, int]:
    """Resolves the tokenizer as the linen ``QNetwork._tokens`` does, builds its layer; returns the tokens' (m, d)."""
    tokenizer = self.config.tokenizer
    if tokenizer == "auto":
      tokenizer = "per_feat" if len(features) == 1 else "per_conv"
    self.tokenizer_name = tokenizer
    if tokenizer == "flatten":
      return 1, math.prod(features)
    if len(features) == 1:
      check(tokenizer == "per_feat",
            f"QNetwork.tokenizer={self.config.tokenizer!r} needs image features; the {self.encoder_name!r} encoder's "
            "vector features take tokenizer='per_feat' (or 'auto'): one token per feature, or 'flatten'")
      self.embedding = PerFeatureEmbedding(features[0], self.config.embedding_size, rngs=rngs)
      return features[0], self.config.embedding_size
    h, w, c = features
    if tokenizer == "per_conv":
      return h * w, c
    if tokenizer == "per_feat":
      return c, h * w
    self.PerPatch_0 = PerPatch(c, self.config.embedding_size, tuple(self.config.patch_size), rngs=rngs)
    return _shape(self.PerPatch_0, features)

  @property
  def encoder(self) -> nnx.Module:
    """The encoder module (the attribute named after linen's encoder, e.g. ``MinAtarEncoder_0``)."""
    return getattr(self, _ENCODER_NAMES[self.encoder_name])

  def _tokens(self, features: Array) -> Array:
    if self.tokenizer_name == "flatten":
      return tokens.flatten(features)
    if features.ndim == 2:
      return self.embedding(features)
    if self.tokenizer_name == "per_conv":
      return tokens.per_conv(features)
    if self.tokenizer_name == "per_feat":
      return tokens.per_feat(features)
    return self.PerPatch_0(features)

  def __call__(self, obs: Array, *, deterministic: bool | None = None,
               rngs: nnx.Rngs | None = None) -> tuple[Array, dict[str, Any]]:
    """Q-values [b, num_actions] (C51: logits [b, num_actions, num_atoms]) and stats, as :class:`jaxlab.rl.QNetwork`.

    Args:
      obs: observations ``[b, *obs_shape]``.
      deterministic: overrides ``config.deterministic`` for the noisy layers (their means).
      rngs: ``nnx.Rngs`` whose ``noise`` stream draws this call's noise; None: the layers' own streams.

    Returns:
      ``(q, stats)``: routing statistics of a MoE head (a Top-1 head's auxiliary losses too) and,
      with ``diagnostics``, the ``activations/*`` entries.
    """
    check(obs.ndim == len(self.obs_shape) + 1 and tuple(obs.shape[1:]) == self.obs_shape,
          f"observations have shape {obs.shape}; this QNetwork was built for [batch, *{self.obs_shape}]")
    c = self.config
    features = self.encoder(obs)
    b = features.shape[0]
    activations = {"encoder": features}
    if c.head == "none":
      hidden = features.reshape(b, -1)
      stats: dict[str, Any] = {}
    elif c.head == "dense":
      layer = self.NoisyDense_0 if c.noisy_hidden else self.Dense_0
      kwargs = {"deterministic": deterministic, "rngs": rngs} if c.noisy_hidden else {}
      hidden = jax.nn.relu(layer(features.reshape(b, -1), **kwargs))
      stats = {}
      activations["penultimate"] = hidden
    else:
      x = self._tokens(features)
      if c.head == "softmoe":
        noise = None
        if self.draws_expert_noise:  # one draw for every expert and slot; deterministic does not reach it (linen's)
          source = rngs if rngs is not None else self.expert_noise_rngs
          check(source is not None, "QNetwork(noisy_experts=True) has no noise stream: build it with rngs that have "
                "'noise' (or 'default'), pass rngs= to the call, or set expert_means=True")
          noise = rainbow_layers.factorised_noise(_noise_key(source), x.shape[-1], c.expert_hidden)
        y, stats = self.SoftMoE_0(x, expert_noise=noise)
        stats.pop("combine_spread", None)  # the linen QNetwork's too, without router_diagnostics
      elif c.head == "top1":
        y, stats = self.Top1MoE_0(x)
      else:
        y, activations["penultimate"] = (self.TokenDense_0 if c.head == "token_dense" else self.TokenMLP_0)(x)
        stats = {}
      hidden = y.reshape(b, -1)
    if c.diagnostics:
      activations["features"] = hidden
      stats = {**stats, **{networks.ACTIVATIONS + k: v for k, v in activations.items()}}
    if not hasattr(self, "rainbow_head"):
      return getattr(self, self._q_dense_name)(hidden), stats
    logits = self.rainbow_head(hidden, deterministic=deterministic, rngs=rngs)
    return (logits[..., 0] if c.num_atoms == 1 else logits), stats
