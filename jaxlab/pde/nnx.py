"""Flax NNX modules of DPOT, its block, AFNO2D and FNO2d, over the same pure functions as the linen ones.

Each computes what the linen module of the same name computes (:class:`jaxlab.pde.DPOT`,
:class:`jaxlab.pde.DPOTBlock`, :class:`jaxlab.pde.AFNO2D`, :class:`jaxlab.pde.FNO2d`) through the
same functions (:func:`jaxlab.pde.afno2d`, ``jaxlab.pde.dpot.dpot_encode`` / ``dpot_block`` /
``dpot_decode``, ``jaxlab.pde.fno.fno2d``), on parameters in the linen modules' layout
(:mod:`jaxlab.nnx_params`): ``blocks_0/filter/w1``, or with ``scan_blocks=True`` the stacked
``blocks/...``, so :func:`jaxlab.pde.dpot_sharding_rules` shard them and a linen ``params`` tree or
a converted official checkpoint (:func:`jaxlab.pde.convert_state_dict`) loads with
``load_linen_params``. ``DPOT`` and ``FNO2d`` take the linen module's fields as keyword arguments
(same names, defaults and checks). The linen modules sow activations into "intermediates"; the
NNX ones keep none.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
from flax import nnx

from jaxlab.errors import check, check_int
from jaxlab.moe import nnx as moe_nnx
from jaxlab.nnx_params import LinenLayout, linen_config, param_dict, param_values
from jaxlab.pde import dpot as dpot_lib
from jaxlab.pde import fno as fno_lib
from jaxlab.pde.afno import afno2d, afno_init_scale, afno_param_shapes, check_afno_sizes, split_uniform
from jaxlab.pde.layers import get_activation

__all__ = ["AFNO2D", "DPOT", "DPOTBlock", "FNO2d"]

Array = jax.Array


class AFNO2D(LinenLayout):
  """AFNO2D token mixer (Guibas et al., ICLR 2022, as in DPOT): the NNX twin of :class:`jaxlab.pde.AFNO2D`.

  Parameters ``w1, b1, w2, b2`` in the official (2=[real, imag], n_blocks, in, out) layout, with
  the official initialisation scale * U[0, 1) from ``rngs.params()``.

  Args:
    width: channels D of the input (B, X, Y, D).
    n_blocks: channel blocks of the block-diagonal weights.
    modes: Fourier modes kept per axis.
    hidden_size_factor: hidden width of each block MLP, as a multiple of the block width.
    act: activation name (``jaxlab.pde.layers.ACTIVATIONS``).
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.pde.nnx import AFNO2D
    >>> layer = AFNO2D(16, n_blocks=2, modes=3, rngs=nnx.Rngs(0))
    >>> layer.w1.shape, layer(jnp.ones((1, 8, 8, 16))).shape
    ((2, 2, 8, 8), (1, 8, 8, 16))
  """

  def __init__(self, width: int, n_blocks: int = 8, modes: int = 32, hidden_size_factor: int = 1,
               act: str = "gelu", *, rngs: nnx.Rngs):
    check_afno_sizes("AFNO2D", width, n_blocks, hidden_size_factor, modes)
    get_activation(act)
    shapes = afno_param_shapes(width, n_blocks, hidden_size_factor)
    draws = split_uniform(rngs.params(), shapes, afno_init_scale(width, n_blocks, hidden_size_factor))
    self.w1, self.b1 = nnx.Param(draws["w1"]), nnx.Param(draws["b1"])
    self.w2, self.b2 = nnx.Param(draws["w2"]), nnx.Param(draws["b2"])
    self.width, self.modes, self.act = width, modes, act

  def __call__(self, x: Array) -> Array:
    """``x + irfft2(MLP(rfft2(x)[:modes, :modes]))`` on channels-last x (B, X, Y, width); see :func:`jaxlab.pde.afno2d`.

    Args:
      x: (B, X, Y, width).

    Returns:
      Same shape and dtype as ``x``.
    """
    check(x.shape[-1] == self.width, f"AFNO2D input has {x.shape[-1]} channels, expected width={self.width}")
    return afno2d(x, self.w1[...], self.b1[...], self.w2[...], self.b2[...], modes=self.modes, act=self.act)


class DPOTBlock(LinenLayout):
  """One DPOT block, h + MLP(GN2(AFNO(GN1(h)))): the NNX twin of :class:`jaxlab.pde.DPOTBlock`.

  Parameters ``norm1``, ``norm2`` (``scale``, ``bias``), ``filter`` (:class:`AFNO2D`) and ``mlp``:
  ``fc1``, ``fc2`` for the dense MLP, or a :class:`jaxlab.moe.nnx.SoftMoE` (``router``, ``experts``)
  over the latent pixels for ``mlp="softmoe"``.

  Args:
    width: channels D.
    n_blocks: AFNO channel blocks.
    modes: AFNO Fourier modes kept per axis.
    mlp_ratio: MLP hidden width = int(width * mlp_ratio).
    act: activation name.
    mlp: ``"dense"`` or ``"softmoe"``.
    num_experts: experts of the Soft-MoE MLP.
    slots_per_expert: its slots per expert; 0: ceil(num_tokens * capacity_factor / num_experts).
    capacity_factor: see ``slots_per_expert``.
    moe_impl: the Soft MoE's ``impl``.
    num_tokens: latent pixels h*w per sample, which a Soft-MoE MLP's slots are sized for (needed
      with ``mlp="softmoe"`` and ``slots_per_expert=0``).
    rngs: the ``params`` stream initialises the parameters.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.pde.nnx import DPOTBlock
    >>> block = DPOTBlock(16, n_blocks=2, modes=3, rngs=nnx.Rngs(0))
    >>> block(jnp.ones((2, 4, 4, 16))).shape
    (2, 4, 4, 16)
  """

  def __init__(self, width: int, n_blocks: int, modes: int, *, mlp_ratio: float = 1.0, act: str = "gelu",
               mlp: str = "dense", num_experts: int = 4, slots_per_expert: int = 0, capacity_factor: float = 1.0,
               moe_impl: str = "auto", num_tokens: int | None = None, rngs: nnx.Rngs):
    for name, value in (("width", width), ("n_blocks", n_blocks), ("modes", modes)):
      check_int(value, f"DPOTBlock.{name}")
    check(mlp in dpot_lib.MLPS, f"DPOTBlock.mlp={mlp!r}; allowed: {', '.join(map(repr, dpot_lib.MLPS))}")
    get_activation(act)
    hidden = dpot_lib.check_mlp_ratio("DPOTBlock.", width, mlp_ratio)
    self.norm1 = param_dict(dpot_lib.init_norm(None, width))
    self.norm2 = param_dict(dpot_lib.init_norm(None, width))
    self.filter = AFNO2D(width, n_blocks, modes, act=act, rngs=rngs)
    if mlp == "dense":
      self.mlp = param_dict(dpot_lib.init_block_mlp(rngs.params(), width, hidden))
    else:
      self.mlp = moe_nnx.SoftMoE(width, num_experts, hidden, num_tokens=num_tokens, capacity_factor=capacity_factor,
                                 num_slots=slots_per_expert or None, impl=moe_impl, rngs=rngs)
    self.act, self.mlp_kind = act, mlp

  def __call__(self, h: Array) -> Array:
    """The block on the latent h (B, h, w, width); see ``jaxlab.pde.dpot.dpot_block``.

    Args:
      h: (B, h, w, width).

    Returns:
      Same shape.
    """
    if self.mlp_kind == "dense":
      act = get_activation(self.act)
      mlp = lambda z: dpot_lib.dense_mlp(param_values(self.mlp), z, act)
    else:
      mlp = lambda z: dpot_lib.token_moe(self.mlp, z)
    return dpot_lib.dpot_block(h, param_values(self.norm1), param_values(self.norm2), self.filter, mlp)


#: The :class:`jaxlab.pde.DPOT` fields that :class:`DPOT` implements (all of them; a field added to the
#: linen module and not here is refused when set, see :func:`jaxlab.nnx_params.linen_config`).
DPOT_SETTINGS = ("img_size", "patch_size", "in_channels", "out_channels", "in_timesteps", "out_timesteps",
                 "n_blocks", "embed_dim", "out_layer_dim", "depth", "modes", "mlp_ratio", "num_classes",
                 "normalize", "act", "time_agg", "fuse_embedding", "scan_blocks", "remat", "mlp", "num_experts",
                 "slots_per_expert", "capacity_factor", "moe_impl")


class DPOT(LinenLayout):
  """DPOTNet (Hao et al., ICML 2024), the NNX twin of :class:`jaxlab.pde.DPOT`: (B, X, Y, T_in, C) -> (B, X, Y, T_out, C).

  With ``num_classes > 0`` it returns ``(prediction, class_logits)``. Parameters as the linen
  module's: ``patch_embed``, ``pos_embed``, ``time_agg``, (``scale_feats_mu``, ``scale_feats_sigma``),
  ``blocks_{i}`` (:class:`DPOTBlock`) or, with ``scan_blocks=True``, ``blocks`` with a leading depth
  axis (run by ``jax.lax.scan``, each step recomputed in the backward pass with ``remat=True``),
  (``cls_head``), ``out_layer``.

  Args:
    rngs: the ``params`` stream initialises the parameters.
    **settings: the fields of :class:`jaxlab.pde.DPOT` (``img_size``, ``patch_size``, ``embed_dim``,
      ``depth``, ...: same names, defaults and checks; ``jaxlab.pde.make_dpot``'s presets are
      ``jaxlab.pde.dpot_config(size)``). They are kept as ``config``, that linen module.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.pde.nnx import DPOT
    >>> model = DPOT(img_size=8, patch_size=2, in_channels=1, out_channels=1, in_timesteps=2,
    ...              embed_dim=16, depth=1, n_blocks=2, modes=2, out_layer_dim=8, rngs=nnx.Rngs(0))
    >>> model(jnp.ones((3, 8, 8, 2, 1))).shape
    (3, 8, 8, 1, 1)
    >>> model.config.latent_size, sorted(model.linen_params())[:2]
    (4, ['blocks_0', 'out_layer'])
  """

  def __init__(self, *, rngs: nnx.Rngs, **settings: Any):
    config = linen_config(dpot_lib.DPOT, settings, DPOT_SETTINGS)
    config.check_config()
    self.config = config
    key = rngs.params
    c, d, p = config.in_channels, config.embed_dim, config.patch_size
    self.patch_embed = param_dict(dpot_lib.init_patch_embed(key(), p, c, config.patch_hidden, d))
    self.pos_embed = nnx.Param(dpot_lib.init_pos_embed(key(), config.latent_size, d))
    self.time_agg = param_dict(dpot_lib.init_time_agg(key(), config.in_timesteps, d, config.time_agg))
    if config.normalize:
      self.scale_feats_mu = param_dict(dpot_lib.init_scale_feats(key(), c, d))
      self.scale_feats_sigma = param_dict(dpot_lib.init_scale_feats(key(), c, d))
    if config.scan_blocks:
      self.blocks = self._stacked_blocks(key())
    else:
      for i in range(config.depth):
        setattr(self, f"blocks_{i}", self._block(nnx.Rngs(params=key())))
    if config.num_classes:
      self.cls_head = param_dict(dpot_lib.init_cls_head(key(), d, config.num_classes))
    self.out_layer = param_dict(dpot_lib.init_out_layer(key(), d, p, config.out_layer_dim,
                                                        config.out_channels * config.out_timesteps))

  def _block(self, rngs: nnx.Rngs) -> DPOTBlock:
    c = self.config
    return DPOTBlock(c.embed_dim, c.n_blocks, c.modes, mlp_ratio=c.mlp_ratio, act=c.act, mlp=c.mlp,
                     num_experts=c.num_experts, slots_per_expert=c.slots_per_expert,
                     capacity_factor=c.capacity_factor, moe_impl=c.moe_impl, num_tokens=c.latent_size ** 2,
                     rngs=rngs)

  def _stacked_blocks(self, key: Array) -> DPOTBlock:
    """``depth`` blocks as one :class:`DPOTBlock` whose parameters have a leading depth axis (as ``nn.scan``'s)."""
    keys = jax.random.split(key, self.config.depth)
    stacked = jax.vmap(lambda k: nnx.to_pure_dict(nnx.state(self._block(nnx.Rngs(params=k)), nnx.Param)))(keys)
    blocks = nnx.eval_shape(lambda: self._block(nnx.Rngs(0)))
    nnx.update(blocks, stacked)
    return blocks

  def _run_blocks(self, h: Array) -> Array:
    c = self.config
    if c.scan_blocks:
      graphdef, state = nnx.split(self.blocks)
      step = lambda carry, s: (nnx.merge(graphdef, s)(carry), None)
      if c.remat:
        step = jax.checkpoint(step, prevent_cse=False)
      return jax.lax.scan(step, h, state)[0]
    for i in range(c.depth):
      graphdef, state = nnx.split(getattr(self, f"blocks_{i}"))
      apply: Callable[[Any, Array], Array] = lambda s, v, g=graphdef: nnx.merge(g, s)(v)
      h = (jax.checkpoint(apply) if c.remat else apply)(state, h)
    return h

  def __call__(self, x: Array) -> Array | tuple[Array, Array]:
    """The forward pass of :class:`jaxlab.pde.DPOT` (its docstring lists the steps).

    Args:
      x: (B, img_size, img_size, in_timesteps, in_channels), in the compute dtype.

    Returns:
      (B, X, Y, out_timesteps, out_channels), and the class logits (B, num_classes) when ``num_classes > 0``.
    """
    c = self.config
    c.check_input(x)
    params = self.linen_params()
    h, stats = dpot_lib.dpot_encode(params, x, patch_size=c.patch_size, act=c.act, normalize=c.normalize,
                                    fuse_embedding=c.fuse_embedding)
    h = self._run_blocks(h)
    heads = {name: params[name] for name in ("cls_head", "out_layer") if name in params}
    return dpot_lib.dpot_decode(heads, h, stats, patch_size=c.patch_size, out_timesteps=c.out_timesteps,
                                out_channels=c.out_channels, dtype=x.dtype, act=c.act)


#: The :class:`jaxlab.pde.FNO2d` fields that :class:`FNO2d` implements (all of them).
FNO2D_SETTINGS = ("modes", "width", "in_channels", "out_channels", "in_timesteps", "out_timesteps", "n_layers",
                  "projection_dim", "act")


class FNO2d(LinenLayout):
  """FNO-2D (Li et al., ICLR 2021), the NNX twin of :class:`jaxlab.pde.FNO2d`: (B, X, Y, T_in, C) -> (B, X, Y, T_out, C).

  Parameters as the linen module's: ``lift``, ``spectral_{i}`` (``w_pos``, ``w_neg``),
  ``pointwise_{i}``, ``project``.

  Args:
    rngs: the ``params`` stream initialises the parameters.
    **settings: the fields of :class:`jaxlab.pde.FNO2d` (``modes``, ``width``, ``in_channels``, ...;
      same names, defaults and checks), kept as ``config``, that linen module.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.pde.nnx import FNO2d
    >>> model = FNO2d(modes=2, width=8, in_timesteps=3, projection_dim=16, rngs=nnx.Rngs(0))
    >>> model(jnp.ones((2, 8, 8, 3, 1))).shape
    (2, 8, 8, 1, 1)
  """

  def __init__(self, *, rngs: nnx.Rngs, **settings: Any):
    config = linen_config(fno_lib.FNO2d, settings, FNO2D_SETTINGS)
    config.check_config()
    self.config = config
    key = rngs.params
    width, m = config.width, config.modes
    self.lift = param_dict(fno_lib.init_lift(key(), config.in_timesteps * config.in_channels + 2, width))
    self.project = param_dict(fno_lib.init_project(key(), width, config.projection_dim,
                                                   config.out_channels * config.out_timesteps))
    for i in range(config.n_layers):
      setattr(self, f"spectral_{i}", param_dict(fno_lib.init_spectral(key(), m, width)))
      setattr(self, f"pointwise_{i}", param_dict(fno_lib.init_pointwise(key(), width)))

  def __call__(self, x: Array) -> Array:
    """The forward pass of :class:`jaxlab.pde.FNO2d` (``jaxlab.pde.fno.fno2d``).

    Args:
      x: (B, X, Y, in_timesteps, in_channels) with X >= 2 * modes and Y // 2 + 1 >= modes.

    Returns:
      (B, X, Y, out_timesteps, out_channels).
    """
    c = self.config
    fno_lib.check_fno_input(c, x)
    return fno_lib.fno2d(self.linen_params(), x, n_layers=c.n_layers, out_timesteps=c.out_timesteps,
                         out_channels=c.out_channels, act=c.act)
