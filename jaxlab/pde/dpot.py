"""DPOT: the Auto-regressive Denoising Operator Transformer (Hao et al., ICML 2024), in flax linen.

Forward pass (Hao et al., Sec. 3.2 "model architecture"; the official ``DPOTNet``, thu-ml/DPOT
models/dpot.py at dcd2f9a), input and output (B, X, Y, T, C):
  1. optional instance normalisation (``normalize=True``): per sample and channel, mean and
     *unbiased* std (+1e-6) over (X, Y, T); an affine map of (mu, sigma) later rescales the
     latent (AdaIN-like) and the prediction is de-normalised at the end;
  2. append (x, y, t) coordinates in [0, 1]; embed every frame with Conv(p x p, stride p) ->
     act -> 1x1 conv to ``embed_dim``, plus a learned positional embedding;
  3. temporal aggregation 'exp_mlp': h = sum_t W_t (h_t * cos(t gamma)), gamma learnable
     (init 2^linspace(-10, 10, D)), or 'mlp' without the cosine;
  4. ``depth`` blocks h <- h + MLP(GN(AFNO(GN(h)))), GroupNorm with 8 groups (``jaxlab.pde.afno``);
     ``mlp="softmoe"`` (not in the paper) makes the MLP a Soft MoE over the latent pixels (``DPOTBlock``);
  5. head ConvTranspose(p, stride p) -> act -> 1x1 -> act -> 1x1 to C_out*T_out, read as
     (T_out, C_out) (channel index t*C_out + c);
  6. optional dataset-classification head on the spatial mean (``num_classes > 0``; the
     official training gives it loss weight 0, so it is off by default).

Sizes (``jaxlab.pde.make_dpot``): the paper's parameter counts (Table 1: Ti 7.5M, S 31M, M 122M,
L 509M, H 1.03B) include the official 12-way class head, which is off by default here. Parameters
of ``make_dpot(size)`` / ``make_dpot(size, num_classes=12)`` (= ``OFFICIAL_PARAM_COUNTS``):

  ====  =============  =====================
  size  num_classes=0  num_classes=12 (paper)
  ====  =============  =====================
  Ti        7,003,175              7,534,643
  S        28,689,959             30,801,459
  M       120,014,375            122,125,875
  L       504,278,631            509,018,739
  H     1,022,664,807          1,031,082,099
  ====  =============  =====================

Layout: channels-last throughout; parameter names and layouts are documented in
``jaxlab.pde.convert`` (which maps an official state dict onto them). Implementation choices
that keep the function but change the arithmetic order:
  * ``fuse_embedding=True`` (default) folds the linear 1x1 patch projection, the positional
    embedding and the linear temporal aggregation into one (T, hidden, D) map computed per step
    from the parameters, so the (B, h, w, T, D) embedding is never materialised; the coordinate
    channels' share of the first convolution is computed once per step, not per sample. In float32 it
    agrees with the literal path to ~1e-6 relative; ``fuse_embedding=False`` runs the literal
    path (and records the ``patch_embed`` activation).
  * patch convolutions (kernel = stride = p) are matmuls over patches; the AFNO complex MLP is
    one real matmul on stacked [real, imag].
For the large sizes, ``scan_blocks=True`` stacks the blocks' parameters on a leading depth axis
(``params["blocks"]``, one compiled block body) and ``remat=True`` recomputes each block in the
backward pass instead of storing its activations.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.errors import check, check_bool, check_int, check_positive
from jaxlab.moe import SoftMoE, num_slots
from jaxlab.moe._soft_moe import check_impl
from jaxlab.pde.afno import AFNO2D
from jaxlab.pde.layers import (dense, get_activation, grid_coordinates, group_norm, init_dense, init_dense_layers,
                               torch_linspace, unpatchify)

Array = jax.Array
Params = dict
GROUPS = 8          # GroupNorm(8, D) in every block
MLPS = ("dense", "softmoe")
NORM_EPS = 1e-6     # sigma = std + 1e-6


# ---------------------------------------------------------------- pure functions

def instance_stats(x: Array) -> tuple[Array, Array]:
  """Per sample and channel mean and unbiased std + 1e-6 over (X, Y, T); each (B, 1, 1, 1, C), in float32
  (at least) whatever ``x``'s dtype."""
  x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
  mu = jnp.mean(x, axis=(1, 2, 3), keepdims=True)
  n = x.shape[1] * x.shape[2] * x.shape[3]
  var = jnp.sum(jnp.square(x - mu), axis=(1, 2, 3), keepdims=True) / (n - 1)
  return mu, jnp.sqrt(var) + NORM_EPS


def time_embedding(gamma: Array | None, num_steps: int) -> Array | None:
  """cos(t gamma) with t = torch.linspace(0, 1, T), shape (T, D), in ``gamma``'s dtype; None for the plain
  'mlp' aggregator.

  The phase t * gamma is computed in float32 (at least): gamma reaches 2^10, where bfloat16's
  spacing is 8, so a bfloat16 phase would be off by radians.
  """
  if gamma is None:
    return None
  t = jnp.asarray(torch_linspace(0.0, 1.0, num_steps))
  return jnp.cos(t[:, None] * gamma[None, :].astype(jnp.promote_types(gamma.dtype, jnp.float32))).astype(gamma.dtype)


def time_aggregate(h: Array, w: Array, emb: Array | None) -> Array:
  """DPOT temporal aggregation (Sec. 3.2): out[..., j] = sum_{t,i} w[t,i,j] h[..., t, i] emb[t, i].

  Notation: b batch, x/y latent grid, t time, d/e channels in/out. ``h``: (B, h, w, T, D).
  """
  if emb is not None:
    h = h * emb
  return jnp.einsum("bxytd,tde->bxye", h, w)


def embed_literal(patch_embed: Params, pos_embed: Array, time_agg: Params, frames: Array, patch: int,
                  act: Callable[[Array], Array]) -> tuple[Array, Array]:
  """Patch embedding + positional embedding + temporal aggregation, as the official code orders it.

  ``frames``: (B, X, Y, T, C+3) with coordinates. Returns (aggregated (B, h, w, D), the
  projection output before ``pos_embed``, (B, h, w, T, D)).
  """
  hidden = act(_patchify_frames(patch_embed["proj1"], frames, patch))          # (B, h, w, T, hidden)
  proj = dense(patch_embed["proj2"], hidden)                                   # (B, h, w, T, D)
  emb = time_embedding(time_agg.get("gamma"), frames.shape[3])
  return time_aggregate(proj + pos_embed[:, :, None, :], time_agg["w"], emb), proj


def embed_fused(patch_embed: Params, pos_embed: Array, time_agg: Params, x: Array, grid: Array, patch: int,
                act: Callable[[Array], Array]) -> Array:
  """The same map as :func:`embed_literal` with its linear steps folded together.

  ``x``: (B, X, Y, T, C) without coordinates; ``grid``: (X, Y, T, 3). The first convolution is
  split into its data part and its coordinate part, which is the same for every sample. With
  a = act(conv1(x) + conv1_grid) (B, h, w, T, k), W2/b2 the 1x1 projection, P the positional
  embedding, e the time embedding and w the aggregator:
    out[b,x,y,j] = sum_{t,k} a[b,x,y,t,k] M[t,k,j] + c[x,y,j],
    M[t,k,j] = sum_i W2[k,i] e[t,i] w[t,i,j],   c = (b2 + P) V,   V[i,j] = sum_t e[t,i] w[t,i,j].
  This replaces a T*D*D matmul per latent pixel by a T*k*D one (k = C_out*p + 3 << D).
  """
  k1 = patch_embed["proj1"]
  c = x.shape[-1]
  data_part = _patchify_frames({"kernel": k1["kernel"][:, :, :c], "bias": k1["bias"]}, x, patch)
  grid_part = _patchify_frames({"kernel": k1["kernel"][:, :, c:], "bias": 0.0}, grid[None], patch)
  hidden = act(data_part + grid_part)                                          # (B, h, w, T, k)
  w = time_agg["w"]
  emb = time_embedding(time_agg.get("gamma"), x.shape[3])
  if emb is None:
    emb = jnp.ones(w.shape[:2], w.dtype)
  scaled_proj = patch_embed["proj2"]["kernel"][None] * emb[:, None, :]         # (T, k, D): W2[k,i] e[t,i]
  fused = jnp.einsum("tki,tij->tkj", scaled_proj, w)                           # (T, k, D)
  # V = sum_t e[t] * w[t], as a contraction with ones: XLA:CPU runs jnp.sum over this leading axis
  # ~5x slower, and per-t slices get materialised
  summed = jnp.einsum("t,tij->ij", jnp.ones(w.shape[:1], w.dtype), emb[:, :, None] * w)
  const = jnp.dot(patch_embed["proj2"]["bias"] + pos_embed, summed)           # (h, w, D)
  return jnp.einsum("bxytk,tkj->bxyj", hidden, fused) + const


def _patchify_frames(p: Params, frames: Array, patch: int) -> Array:
  """Conv(kernel = stride = patch) on every frame: (B, X, Y, T, C) -> (B, X/p, Y/p, T, hidden).

  Notation: b batch, x/y patch grid, i/j offset in a patch, t time, c in and h out channels.
  """
  b, nx, ny, t, c = frames.shape
  patches = frames.reshape(b, nx // patch, patch, ny // patch, patch, t, c)
  return jnp.einsum("bxiyjtc,ijch->bxyth", patches, p["kernel"]) + p["bias"]


def out_head(p: Params, h: Array, patch: int, act: Callable[[Array], Array]) -> Array:
  """ConvTranspose(p, stride p) -> act -> 1x1 -> act -> 1x1; (B, h, w, D) -> (B, X, Y, C_out*T_out).

  ``p["deconv"]["kernel"]`` is (D, p, p, L): pixel (x*p+i, y*p+j) gets h[x, y] @ kernel[:, i, j].
  The 1x1 layers run before un-patchifying (they are pointwise), so only the final, narrow
  tensor is transposed.
  """
  y = jnp.einsum("bxyd,dijl->bxyijl", h, p["deconv"]["kernel"]) + p["deconv"]["bias"]
  y = dense(p["fc2"], act(dense(p["fc1"], act(y))))
  return unpatchify(y, patch)


def cls_head(p: Params, h: Array, act: Callable[[Array], Array]) -> Array:
  """The official dataset-classification MLP (Linear, act, Linear, act, Linear) on the spatial mean."""
  z = jnp.mean(h, axis=(1, 2))
  return dense(p["fc3"], act(dense(p["fc2"], act(dense(p["fc1"], z)))))


def check_mlp_ratio(prefix: str, width: int, mlp_ratio: float) -> int:
  """The block MLP's hidden width ``int(width * mlp_ratio)``; InputError if it is 0 (a zero-width MLP)."""
  check_positive(mlp_ratio, f"{prefix}mlp_ratio", "DPOT: MLP hidden width = int(embed_dim * mlp_ratio)")
  hidden = int(width * mlp_ratio)
  check(hidden >= 1, f"{prefix}mlp_ratio={mlp_ratio!r} gives a DPOT MLP hidden width int({width} * {mlp_ratio!r}) = 0; "
        f"need >= 1 (mlp_ratio >= 1/{width})")
  return hidden


# ---------------------------------------------------------------- flax modules

class DPOTBlock(nn.Module):
  """h + MLP(GN2(AFNO(GN1(h)))) on (B, h, w, D) (the official ``Block`` with double_skip=False).

  ``mlp="softmoe"`` replaces the channel MLP by a Soft MoE layer (Puigcerver et al., ICLR 2024,
  Eqs. 1-3; ``jaxlab.moe.SoftMoE``, params under "mlp": ``router/phi`` [D, n, p] and
  ``experts/{w1,b1,w2,b2}`` with the expert axis leading) over the h*w latent pixels of each
  sample as tokens. Each expert has the dense MLP's hidden width, so with n*p == h*w slots every
  slot passes through one expert MLP of the dense MLP's size: the expert FLOPs equal the dense
  MLP's and the router (logits, dispatch, combine: ~3 * 2 (h*w) n p D per sample) comes on top.
  The experts use ReLU (the Soft MoE layer's, as dopamine's experts), not ``act``. ``moe_impl``
  is the Soft MoE's ``impl`` (``"auto"``: the CPU kernel on CPU, the einsum form on GPU/TPU).
  ``scan_carry=True`` gives the ``(carry, x) -> (carry, None)`` signature ``nn.scan`` needs.
  """
  width: int
  n_blocks: int
  modes: int
  mlp_ratio: float = 1.0
  act: str = "gelu"
  scan_carry: bool = False
  mlp: str = "dense"
  num_experts: int = 4
  slots_per_expert: int = 0       # 0: from capacity_factor (p = ceil(h*w * capacity_factor / n))
  capacity_factor: float = 1.0
  moe_impl: str = "auto"

  @nn.compact
  def __call__(self, h: Array, _: Any = None) -> Any:
    for name in ("width", "n_blocks", "modes"):
      check_int(getattr(self, name), f"DPOTBlock.{name}")
    check(self.mlp in MLPS, f"DPOTBlock.mlp={self.mlp!r}; allowed: {', '.join(map(repr, MLPS))}")
    act = get_activation(self.act)
    hidden = check_mlp_ratio("DPOTBlock.", self.width, self.mlp_ratio)
    ones_zeros = lambda _key: {"scale": jnp.ones((self.width,)), "bias": jnp.zeros((self.width,))}
    norm1 = self.param("norm1", ones_zeros)
    norm2 = self.param("norm2", ones_zeros)
    if self.mlp == "dense":
      mlp = self.param("mlp", lambda key: init_dense_layers(key, {
          "fc1": ((self.width, hidden), self.width), "fc2": ((hidden, self.width), hidden)}))
    mixed = AFNO2D(self.width, self.n_blocks, self.modes, act=self.act, name="filter")(
        group_norm(h, norm1["scale"], norm1["bias"], GROUPS))
    self.sow("intermediates", "filter_output", mixed)
    z = group_norm(mixed, norm2["scale"], norm2["bias"], GROUPS)
    if self.mlp == "dense":
      out = h + dense(mlp["fc2"], act(dense(mlp["fc1"], z)))
    else:
      b, nx, ny, d = z.shape
      moe = SoftMoE(num_experts=self.num_experts, expert_hidden=hidden, capacity_factor=self.capacity_factor,
                    num_slots=self.slots_per_expert or None, impl=self.moe_impl, name="mlp")
      y, stats = moe(z.reshape(b, nx * ny, d))
      self.sow("intermediates", "moe_expert_load", stats["expert_load"])
      out = h + y.reshape(b, nx, ny, d)
    self.sow("intermediates", "output", out)
    return (out, None) if self.scan_carry else out


class DPOT(nn.Module):
  """DPOTNet as a flax module: ``(B, X, Y, T_in, C_in) -> (B, X, Y, T_out, C_out)``.

  With ``num_classes > 0`` it returns ``(prediction, class_logits (B, num_classes))``.
  Field names follow the official constructor (``n_cls`` is ``num_classes``; only the 'afno'
  mixer exists). Activations are sown into the "intermediates" collection (``patch_embed``
  (literal path only, (B*T, h, w, D) ordered (b, t)), ``time_agg``, ``blocks_{i}/filter_output``,
  ``blocks_{i}/output``, ``out_layer``).
  """
  img_size: int = 128
  patch_size: int = 8
  in_channels: int = 4
  out_channels: int = 4
  in_timesteps: int = 10
  out_timesteps: int = 1
  n_blocks: int = 4
  embed_dim: int = 512
  out_layer_dim: int = 32
  depth: int = 4
  modes: int = 32
  mlp_ratio: float = 1.0
  num_classes: int = 0
  normalize: bool = False
  act: str = "gelu"
  time_agg: str = "exp_mlp"
  fuse_embedding: bool = True
  scan_blocks: bool = False
  remat: bool = False
  mlp: str = "dense"              # "softmoe": the block MLP is a Soft MoE over the latent pixels
  num_experts: int = 4
  slots_per_expert: int = 0       # 0: ceil(latent_size**2 * capacity_factor / num_experts)
  capacity_factor: float = 1.0
  moe_impl: str = "auto"          # Soft MoE implementation: "auto" | "cpu_kernel" | "einsum" (jaxlab.moe.soft_moe)

  @property
  def patch_hidden(self) -> int:
    """Hidden width of the patch embedding, ``out_channels * patch_size + 3`` as in the official code."""
    return self.out_channels * self.patch_size + 3

  @property
  def latent_size(self) -> int:
    return self.img_size // self.patch_size

  def check_config(self) -> None:
    """InputError (one line) for a configuration the official code cannot build or run.

    Messages start ``<attribute>=<value>`` and say "(DPOT: ...)": the pde_operator task prefixes
    "model: ", which reads as the config key ``model.<attribute>``. Every size is a static Python
    value, so ``__call__`` runs this at trace time, before anything compiles.
    """
    sizes = {"img_size": "grid points per axis", "patch_size": "pixels per patch side",
             "in_channels": "input channels", "out_channels": "output channels",
             "in_timesteps": "input frames", "out_timesteps": "predicted frames",
             "embed_dim": "latent width", "depth": "number of blocks", "n_blocks": "AFNO channel blocks",
             "modes": "Fourier modes kept per axis", "out_layer_dim": "width of the output head"}
    for name, meaning in sizes.items():
      check_int(getattr(self, name), name, meaning=f"DPOT: {meaning}")
    check_int(self.num_classes, "num_classes", minimum=0, meaning="DPOT: 0 = no classification head")
    check(self.img_size % self.patch_size == 0,
          f"img_size {self.img_size} is not divisible by patch_size {self.patch_size}")
    check(self.embed_dim % GROUPS == 0,
          f"embed_dim {self.embed_dim} is not divisible by {GROUPS} (GroupNorm has {GROUPS} groups)")
    check(self.embed_dim % self.n_blocks == 0,
          f"embed_dim {self.embed_dim} is not divisible by n_blocks {self.n_blocks} (AFNO block-diagonal weights)")
    check_mlp_ratio("", self.embed_dim, self.mlp_ratio)
    check(self.time_agg in ("exp_mlp", "mlp"), f"time_agg={self.time_agg!r}; allowed: 'exp_mlp', 'mlp'")
    for name in ("normalize", "fuse_embedding", "scan_blocks", "remat"):
      check_bool(getattr(self, name), name)
    check(not self.normalize or self.in_channels == self.out_channels,
          f"normalize=True de-normalises the output with the input statistics, so out_channels "
          f"({self.out_channels}) must equal in_channels ({self.in_channels})")
    check(not self.normalize or self.img_size ** 2 * self.in_timesteps >= 2,
          f"normalize=True takes an unbiased std over X*Y*T = {self.img_size ** 2 * self.in_timesteps} values; "
          "need >= 2 (a larger img_size or in_timesteps)")
    get_activation(self.act)
    check(self.mlp in MLPS, f"mlp={self.mlp!r}; allowed: {', '.join(map(repr, MLPS))}")
    # checked for the dense MLP too: a bad value there is a typo waiting for mlp="softmoe"
    check_int(self.num_experts, "num_experts", meaning="DPOT: experts of the Soft-MoE MLP")
    check_int(self.slots_per_expert, "slots_per_expert", minimum=0, meaning="DPOT: 0 = from capacity_factor")
    check_positive(self.capacity_factor, "capacity_factor",
                   "DPOT: slots per expert = ceil(latent pixels * factor / num_experts) when slots_per_expert=0")
    check_impl(self.moe_impl, False, "moe_impl")
    if self.mlp == "softmoe" and not self.slots_per_expert:
      num_slots(self.latent_size ** 2, self.num_experts, self.capacity_factor)  # InputError if 0 slots

  @property
  def moe_slots(self) -> int:
    """Slots per expert p of the Soft MoE MLP (``slots_per_expert`` or from ``capacity_factor``)."""
    return self.slots_per_expert or num_slots(self.latent_size ** 2, self.num_experts, self.capacity_factor)

  def check_input(self, x: Array) -> None:
    check(x.ndim == 5, f"DPOT input must be (B, X, Y, T, C); got shape {tuple(x.shape)}")
    _, nx, ny, t, c = x.shape
    check(nx % self.patch_size == 0 and ny % self.patch_size == 0,
          f"input resolution {nx}x{ny} is not divisible by patch_size {self.patch_size}")
    check(nx == self.img_size and ny == self.img_size,
          f"input resolution {nx}x{ny} does not match img_size {self.img_size}")
    check(c == self.in_channels, f"input has {c} channels; the model has in_channels={self.in_channels}")
    check(t == self.in_timesteps, f"input has T={t} time steps; the model has in_timesteps={self.in_timesteps}")

  def _block_stack(self, h: Array) -> Array:
    kwargs = dict(width=self.embed_dim, n_blocks=self.n_blocks, modes=self.modes, mlp_ratio=self.mlp_ratio,
                  act=self.act, mlp=self.mlp, num_experts=self.num_experts, slots_per_expert=self.slots_per_expert,
                  capacity_factor=self.capacity_factor, moe_impl=self.moe_impl)
    if self.scan_blocks:
      block = nn.remat(DPOTBlock, prevent_cse=False) if self.remat else DPOTBlock
      stack = nn.scan(block, variable_axes={"params": 0, "intermediates": 0}, split_rngs={"params": True},
                      length=self.depth)
      h, _ = stack(**kwargs, scan_carry=True, name="blocks")(h, None)
      return h
    block = nn.remat(DPOTBlock) if self.remat else DPOTBlock
    for i in range(self.depth):
      h = block(**kwargs, name=f"blocks_{i}")(h)
    return h

  @nn.compact
  def __call__(self, x: Array) -> Array | tuple[Array, Array]:
    self.check_config()
    self.check_input(x)
    act = get_activation(self.act)
    b, nx, ny, t, c = x.shape
    d, lat, p = self.embed_dim, self.latent_size, self.patch_size

    patch_embed = self.param("patch_embed", lambda key: init_dense_layers(key, {
        "proj1": ((p, p, c + 3, self.patch_hidden), (c + 3) * p * p),
        "proj2": ((self.patch_hidden, d), self.patch_hidden)}))
    pos_embed = self.param("pos_embed", lambda key: 0.02 * jax.random.truncated_normal(
        key, -2.0 / 0.02, 2.0 / 0.02, (lat, lat, d)))

    def init_time_agg(key):
      out = {"w": jax.random.normal(key, (t, d, d)) / (t * d ** 0.5)}
      if self.time_agg == "exp_mlp":
        out["gamma"] = jnp.asarray(2.0 ** torch_linspace(-10.0, 10.0, d).astype(np.float64), jnp.float32)
      return out
    time_agg = self.param("time_agg", init_time_agg)

    dtype = x.dtype  # the compute dtype (bfloat16 under a bfloat16 train step); statistics in float32
    if self.normalize:
      mu, sigma = instance_stats(x)
      x = ((x - mu) / sigma).astype(dtype)
      stats = jnp.concatenate([mu, sigma], axis=-1).reshape(b, 2 * c).astype(dtype)
      scale_mu = dense(self.param("scale_feats_mu", lambda key: init_dense(key, (2 * c, d), 2 * c)), stats)
      scale_sigma = dense(self.param("scale_feats_sigma", lambda key: init_dense(key, (2 * c, d), 2 * c)), stats)

    grid = jnp.asarray(grid_coordinates(nx, ny, t), x.dtype)
    if self.fuse_embedding:
      h = embed_fused(patch_embed, pos_embed, time_agg, x, grid, p, act)
    else:
      frames = jnp.concatenate([x, jnp.broadcast_to(grid, (b, nx, ny, t, 3))], axis=-1)
      h, proj = embed_literal(patch_embed, pos_embed, time_agg, frames, p, act)
      self.sow("intermediates", "patch_embed", proj.transpose(0, 3, 1, 2, 4).reshape(b * t, lat, lat, d))
    self.sow("intermediates", "time_agg", h)
    if self.normalize:
      h = scale_sigma[:, None, None, :] * h + scale_mu[:, None, None, :]

    h = self._block_stack(h)

    if self.num_classes:
      head = self.param("cls_head", lambda key: init_dense_layers(key, {
          "fc1": ((d, d), d), "fc2": ((d, d), d), "fc3": ((d, self.num_classes), d)}))
      logits = cls_head(head, h, act)

    lo, c_out = self.out_layer_dim, self.out_channels * self.out_timesteps
    out_params = self.param("out_layer", lambda key: init_dense_layers(key, {
        # torch's ConvTranspose2d fan_in is weight.size(1) * p * p = out_layer_dim * p * p
        "deconv": ((d, p, p, lo), lo * p * p), "fc1": ((lo, lo), lo), "fc2": ((lo, c_out), lo)}))
    y = out_head(out_params, h, p, act)
    self.sow("intermediates", "out_layer", y)
    y = y.reshape(b, nx, ny, self.out_timesteps, self.out_channels)
    if self.normalize:
      y = (y * sigma + mu).astype(dtype)
    return (y, logits) if self.num_classes else y


def count_params(params: Any) -> int:
  """The number of scalars in the params pytree (arrays or ``jax.ShapeDtypeStruct`` leaves)."""
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(params))


def init_params(model: DPOT, rng: Array) -> Params:
  """``model.init`` on a zero input of the configured shape, jitted (op-by-op init compiles every
  op separately: ~4x slower for the tiny model); returns the "params" collection."""
  x = jax.ShapeDtypeStruct((1, model.img_size, model.img_size, model.in_timesteps, model.in_channels), jnp.float32)
  return jax.jit(lambda key: model.init(key, jnp.zeros(x.shape, x.dtype))["params"])(rng)


def abstract_params(model: DPOT) -> Params:
  """Parameter shapes and dtypes (``jax.ShapeDtypeStruct`` leaves) without allocating anything."""
  return jax.eval_shape(lambda: init_params(model, jax.random.key(0)))
