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


def _ignore(name: str, value: Any) -> None:
  """A ``record`` that keeps nothing (the linen modules pass one that sows into "intermediates")."""


def init_norm(key: Array, width: int) -> dict[str, Array]:
  """GroupNorm's affine parameters ``{"scale": ones, "bias": zeros}`` (width,), as PyTorch's."""
  del key
  return {"scale": jnp.ones((width,)), "bias": jnp.zeros((width,))}


def init_block_mlp(key: Array, width: int, hidden: int) -> Params:
  """The block's channel MLP ``{"fc1": width -> hidden, "fc2": hidden -> width}``, PyTorch's default init."""
  return init_dense_layers(key, {"fc1": ((width, hidden), width), "fc2": ((hidden, width), hidden)})


def dense_mlp(p: Params, z: Array, act: Callable[[Array], Array]) -> Array:
  """``fc2(act(fc1(z)))``: the official block MLP (1x1 convolutions)."""
  return dense(p["fc2"], act(dense(p["fc1"], z)))


def token_moe(moe: Callable[[Array], tuple[Array, dict[str, Array]]], z: Array,
              record: Callable[[str, Any], None] = _ignore) -> Array:
  """A Soft MoE layer ``moe`` over the h*w latent pixels of each sample as tokens: (B, h, w, D) -> same.

  ``record("moe_expert_load", ...)`` receives the layer's expert load.
  """
  b, nx, ny, d = z.shape
  y, stats = moe(z.reshape(b, nx * ny, d))
  record("moe_expert_load", stats["expert_load"])
  return y.reshape(b, nx, ny, d)


def dpot_block(h: Array, norm1: Params, norm2: Params, mixer: Callable[[Array], Array],
               mlp: Callable[[Array], Array], record: Callable[[str, Any], None] = _ignore) -> Array:
  """One DPOT block, h + MLP(GN2(AFNO(GN1(h)))) on (B, h, w, D) (Hao et al., Sec. 3.2; the official ``Block``).

  Args:
    h: (B, h, w, D) latent.
    norm1: GroupNorm affine ``{"scale", "bias"}`` before the token mixer; ``norm2`` before the MLP.
    norm2: see ``norm1``.
    mixer: the AFNO token mixer (its own skip included: ``jaxlab.pde.afno.afno2d``).
    mlp: the channel MLP (:func:`dense_mlp`, or :func:`token_moe` of a Soft MoE).
    record: called as ``record(name, value)`` with ``"filter_output"`` and ``"output"``.

  Returns:
    (B, h, w, D).
  """
  mixed = mixer(group_norm(h, norm1["scale"], norm1["bias"], GROUPS))
  record("filter_output", mixed)
  out = h + mlp(group_norm(mixed, norm2["scale"], norm2["bias"], GROUPS))
  record("output", out)
  return out


def init_patch_embed(key: Array, patch: int, in_channels: int, patch_hidden: int, embed_dim: int) -> Params:
  """``{"proj1": Conv(p x p, stride p) (p, p, C+3, hidden), "proj2": 1x1 hidden -> D}``, PyTorch's default init."""
  c = in_channels + 3
  return init_dense_layers(key, {"proj1": ((patch, patch, c, patch_hidden), c * patch * patch),
                                 "proj2": ((patch_hidden, embed_dim), patch_hidden)})


def init_pos_embed(key: Array, latent_size: int, embed_dim: int) -> Array:
  """The learned positional embedding (h, w, D): truncated normal, std 0.02, cut at +-2 (timm's ``trunc_normal_``)."""
  return 0.02 * jax.random.truncated_normal(key, -2.0 / 0.02, 2.0 / 0.02, (latent_size, latent_size, embed_dim))


def init_time_agg(key: Array, in_timesteps: int, embed_dim: int, time_agg: str) -> Params:
  """The temporal aggregator ``w`` (T, D, D) ~ N(0, 1) / (T sqrt(D)), and for 'exp_mlp' ``gamma`` = 2^linspace(-10, 10, D)."""
  t, d = in_timesteps, embed_dim
  out = {"w": jax.random.normal(key, (t, d, d)) / (t * d ** 0.5)}
  if time_agg == "exp_mlp":
    out["gamma"] = jnp.asarray(2.0 ** torch_linspace(-10.0, 10.0, d).astype(np.float64), jnp.float32)
  return out


def init_scale_feats(key: Array, in_channels: int, embed_dim: int) -> Params:
  """One of the normalisation's affine maps (mu, sigma) -> D: ``{"kernel": (2C, D), "bias"}``."""
  return init_dense(key, (2 * in_channels, embed_dim), 2 * in_channels)


def init_cls_head(key: Array, embed_dim: int, num_classes: int) -> Params:
  """The classification MLP ``{"fc1", "fc2": D -> D, "fc3": D -> num_classes}``."""
  d = embed_dim
  return init_dense_layers(key, {"fc1": ((d, d), d), "fc2": ((d, d), d), "fc3": ((d, num_classes), d)})


def init_out_layer(key: Array, embed_dim: int, patch: int, out_layer_dim: int, out_size: int) -> Params:
  """The output head ``{"deconv": (D, p, p, L), "fc1": L -> L, "fc2": L -> C_out*T_out}``."""
  lo = out_layer_dim
  # torch's ConvTranspose2d fan_in is weight.size(1) * p * p = out_layer_dim * p * p
  return init_dense_layers(key, {"deconv": ((embed_dim, patch, patch, lo), lo * patch * patch),
                                 "fc1": ((lo, lo), lo), "fc2": ((lo, out_size), lo)})


def dpot_encode(params: Params, x: Array, *, patch_size: int, act: str = "gelu", normalize: bool = False,
                fuse_embedding: bool = True, record: Callable[[str, Any], None] = _ignore
                ) -> tuple[Array, tuple[Array, Array] | None]:
  """DPOT's steps 1-3 (module docstring): normalisation, patch embedding, temporal aggregation.

  Args:
    params: ``patch_embed``, ``pos_embed``, ``time_agg`` and, with ``normalize``, ``scale_feats_mu`` /
      ``scale_feats_sigma`` (the :class:`DPOT` layout).
    x: (B, X, Y, T, C), the compute dtype.
    patch_size: p.
    act: activation name.
    normalize: instance normalisation and the AdaIN-like rescaling of the latent.
    fuse_embedding: :func:`embed_fused` (else :func:`embed_literal`).
    record: receives ``"patch_embed"`` (literal path) and ``"time_agg"``.

  Returns:
    ``(h, stats)``: the latent (B, X/p, Y/p, D) for the blocks, and ``(mu, sigma)`` to de-normalise
    the prediction with (None without ``normalize``).
  """
  act_fn = get_activation(act)
  b, nx, ny, t, c = x.shape
  d, p = params["pos_embed"].shape[-1], patch_size
  lat = nx // p
  dtype = x.dtype  # the compute dtype (bfloat16 under a bfloat16 train step); statistics in float32
  stats = None
  if normalize:
    mu, sigma = instance_stats(x)
    x = ((x - mu) / sigma).astype(dtype)
    feats = jnp.concatenate([mu, sigma], axis=-1).reshape(b, 2 * c).astype(dtype)
    scale_mu = dense(params["scale_feats_mu"], feats)
    scale_sigma = dense(params["scale_feats_sigma"], feats)
    stats = (mu, sigma)

  grid = jnp.asarray(grid_coordinates(nx, ny, t), x.dtype)
  if fuse_embedding:
    h = embed_fused(params["patch_embed"], params["pos_embed"], params["time_agg"], x, grid, p, act_fn)
  else:
    frames = jnp.concatenate([x, jnp.broadcast_to(grid, (b, nx, ny, t, 3))], axis=-1)
    h, proj = embed_literal(params["patch_embed"], params["pos_embed"], params["time_agg"], frames, p, act_fn)
    record("patch_embed", proj.transpose(0, 3, 1, 2, 4).reshape(b * t, lat, lat, d))
  record("time_agg", h)
  if normalize:
    h = scale_sigma[:, None, None, :] * h + scale_mu[:, None, None, :]
  return h, stats


def dpot_decode(params: Params, h: Array, stats: tuple[Array, Array] | None, *, patch_size: int,
                out_timesteps: int, out_channels: int, dtype: Any, act: str = "gelu",
                record: Callable[[str, Any], None] = _ignore) -> Array | tuple[Array, Array]:
  """DPOT's steps 5-6 on the blocks' output: the output head (and the classification head with ``cls_head``).

  Args:
    params: ``out_layer`` and, for a class head, ``cls_head``.
    h: (B, h, w, D), the blocks' output.
    stats: ``(mu, sigma)`` from :func:`dpot_encode` to de-normalise with, or None.
    patch_size: p.
    out_timesteps: T_out.
    out_channels: C_out.
    dtype: the compute dtype (the input's).
    act: activation name.
    record: receives ``"out_layer"``.

  Returns:
    (B, X, Y, T_out, C_out), with the class logits (B, num_classes) when ``params`` has ``cls_head``.
  """
  act_fn = get_activation(act)
  b, lat = h.shape[0], h.shape[1]
  nx = ny = lat * patch_size
  if "cls_head" in params:
    logits = cls_head(params["cls_head"], h, act_fn)
  y = out_head(params["out_layer"], h, patch_size, act_fn)
  record("out_layer", y)
  y = y.reshape(b, nx, ny, out_timesteps, out_channels)
  if stats is not None:
    mu, sigma = stats
    y = (y * sigma + mu).astype(dtype)
  return (y, logits) if "cls_head" in params else y


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
    norm1 = self.param("norm1", init_norm, self.width)
    norm2 = self.param("norm2", init_norm, self.width)
    record = lambda name, value: self.sow("intermediates", name, value)
    if self.mlp == "dense":
      mlp_params = self.param("mlp", init_block_mlp, self.width, hidden)
      mlp = lambda z: dense_mlp(mlp_params, z, act)
    else:
      mlp = lambda z: token_moe(SoftMoE(
          num_experts=self.num_experts, expert_hidden=hidden, capacity_factor=self.capacity_factor,
          num_slots=self.slots_per_expert or None, impl=self.moe_impl, name="mlp"), z, record)
    mixer = AFNO2D(self.width, self.n_blocks, self.modes, act=self.act, name="filter")
    out = dpot_block(h, norm1, norm2, mixer, mlp, record)
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
    c, d, p = x.shape[-1], self.embed_dim, self.patch_size
    params = {"patch_embed": self.param("patch_embed", init_patch_embed, p, c, self.patch_hidden, d),
              "pos_embed": self.param("pos_embed", init_pos_embed, self.latent_size, d),
              "time_agg": self.param("time_agg", init_time_agg, x.shape[3], d, self.time_agg)}
    if self.normalize:
      params["scale_feats_mu"] = self.param("scale_feats_mu", init_scale_feats, c, d)
      params["scale_feats_sigma"] = self.param("scale_feats_sigma", init_scale_feats, c, d)
    record = lambda name, value: self.sow("intermediates", name, value)
    h, stats = dpot_encode(params, x, patch_size=p, act=self.act, normalize=self.normalize,
                           fuse_embedding=self.fuse_embedding, record=record)
    h = self._block_stack(h)
    heads = {}
    if self.num_classes:
      heads["cls_head"] = self.param("cls_head", init_cls_head, d, self.num_classes)
    heads["out_layer"] = self.param("out_layer", init_out_layer, d, p, self.out_layer_dim,
                                    self.out_channels * self.out_timesteps)
    return dpot_decode(heads, h, stats, patch_size=p, out_timesteps=self.out_timesteps,
                       out_channels=self.out_channels, dtype=x.dtype, act=self.act, record=record)


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
