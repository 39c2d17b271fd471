"""Official PyTorch DPOT state dict <-> jaxlab ``DPOT`` params.

Name and layout map (torch name -> jaxlab path; torch layout -> jaxlab layout):
  patch_embed.proj.0.weight (H, C+3, p, p)  -> patch_embed/proj1/kernel (p, p, C+3, H)   [HWIO]
  patch_embed.proj.2.weight (D, H, 1, 1)    -> patch_embed/proj2/kernel (H, D)
  pos_embed (1, D, h, w)                    -> pos_embed (h, w, D)
  time_agg_layer.w (T, D, D), .gamma (1, D) -> time_agg/w (T, D, D), time_agg/gamma (D,)
  scale_feats_{mu,sigma}.weight (D, 2C)     -> scale_feats_{mu,sigma}/kernel (2C, D)     [normalize only]
  blocks.{i}.norm{1,2}.{weight,bias}        -> blocks_{i}/norm{1,2}/{scale,bias}
  blocks.{i}.filter.{w1,b1,w2,b2}           -> blocks_{i}/filter/{w1,b1,w2,b2}          [same layout]
  blocks.{i}.mlp.{0,2}.weight (o, i, 1, 1)  -> blocks_{i}/mlp/{fc1,fc2}/kernel (i, o)
  cls_head.{0,2,4}.weight (o, i)            -> cls_head/{fc1,fc2,fc3}/kernel (i, o)      [num_classes > 0]
  out_layer.0.weight (D, L, p, p)           -> out_layer/deconv/kernel (D, p, p, L)     [ConvTranspose2d]
  out_layer.{2,4}.weight (o, i, 1, 1)       -> out_layer/{fc1,fc2}/kernel (i, o)
Biases keep their shape. With ``scan_blocks=True`` the per-block entries are stacked into
``blocks/...`` with a leading depth axis. An official checkpoint always has ``cls_head.*``; a
model with ``num_classes=0`` skips those keys and reports them in the returned ``skipped`` list.
"""

from __future__ import annotations

import argparse
import contextlib
import pickle
import re
from typing import Any, Callable, Mapping

import numpy as np

from jaxlab.errors import InputError, check
from jaxlab.pde.dpot import DPOT, abstract_params

Layout = Callable[[np.ndarray], np.ndarray]

_CONV_HWIO = (lambda w: w.transpose(2, 3, 1, 0), lambda k: k.transpose(3, 2, 0, 1))
_CONV_1X1 = (lambda w: w[:, :, 0, 0].T, lambda k: k.T[:, :, None, None])
_LINEAR = (lambda w: w.T, lambda k: k.T)
_DECONV = (lambda w: w.transpose(0, 2, 3, 1), lambda k: k.transpose(0, 3, 1, 2))
_POS = (lambda w: w[0].transpose(1, 2, 0), lambda k: k.transpose(2, 0, 1)[None])
_GAMMA = (lambda w: w[0], lambda k: k[None])
_SAME = (lambda w: w, lambda k: k)
_CLS_PREFIX = "cls_head."


def _entries(model: DPOT) -> list[tuple[str, tuple[str, ...], tuple[Layout, Layout]]]:
  """(torch name, per-block jaxlab path, (to_jax, to_torch)) for every parameter of ``model``."""
  out = [("patch_embed.proj.0.weight", ("patch_embed", "proj1", "kernel"), _CONV_HWIO),
         ("patch_embed.proj.0.bias", ("patch_embed", "proj1", "bias"), _SAME),
         ("patch_embed.proj.2.weight", ("patch_embed", "proj2", "kernel"), _CONV_1X1),
         ("patch_embed.proj.2.bias", ("patch_embed", "proj2", "bias"), _SAME),
         ("pos_embed", ("pos_embed",), _POS),
         ("time_agg_layer.w", ("time_agg", "w"), _SAME)]
  if model.time_agg == "exp_mlp":
    out.append(("time_agg_layer.gamma", ("time_agg", "gamma"), _GAMMA))
  if model.normalize:
    for which in ("mu", "sigma"):
      out += [(f"scale_feats_{which}.weight", (f"scale_feats_{which}", "kernel"), _LINEAR),
              (f"scale_feats_{which}.bias", (f"scale_feats_{which}", "bias"), _SAME)]
  for i in range(model.depth):
    blk = f"blocks_{i}"
    for n in (1, 2):
      out += [(f"blocks.{i}.norm{n}.weight", (blk, f"norm{n}", "scale"), _SAME),
              (f"blocks.{i}.norm{n}.bias", (blk, f"norm{n}", "bias"), _SAME)]
    out += [(f"blocks.{i}.filter.{w}", (blk, "filter", w), _SAME) for w in ("w1", "b1", "w2", "b2")]
    for torch_idx, name in ((0, "fc1"), (2, "fc2")):
      out += [(f"blocks.{i}.mlp.{torch_idx}.weight", (blk, "mlp", name, "kernel"), _CONV_1X1),
              (f"blocks.{i}.mlp.{torch_idx}.bias", (blk, "mlp", name, "bias"), _SAME)]
  if model.num_classes:
    for torch_idx, name in ((0, "fc1"), (2, "fc2"), (4, "fc3")):
      out += [(f"cls_head.{torch_idx}.weight", ("cls_head", name, "kernel"), _LINEAR),
              (f"cls_head.{torch_idx}.bias", ("cls_head", name, "bias"), _SAME)]
  out += [("out_layer.0.weight", ("out_layer", "deconv", "kernel"), _DECONV),
          ("out_layer.0.bias", ("out_layer", "deconv", "bias"), _SAME)]
  for torch_idx, name in ((2, "fc1"), (4, "fc2")):
    out += [(f"out_layer.{torch_idx}.weight", ("out_layer", name, "kernel"), _CONV_1X1),
            (f"out_layer.{torch_idx}.bias", ("out_layer", name, "bias"), _SAME)]
  return out


def _get(tree: Mapping[str, Any], path: tuple[str, ...]) -> Any:
  for key in path:
    tree = tree[key]
  return tree


def _set(tree: dict, path: tuple[str, ...], value: Any) -> None:
  for key in path[:-1]:
    tree = tree.setdefault(key, {})
  tree[path[-1]] = value


def _block_path(model: DPOT, path: tuple[str, ...]) -> tuple[tuple[str, ...], int | None]:
  """Per-block path -> (actual path, depth index) for a scanned model; (path, None) otherwise."""
  m = re.fullmatch(r"blocks_(\d+)", path[0])
  if m and model.scan_blocks:
    return ("blocks",) + path[1:], int(m.group(1))
  return path, None


def expected_torch_shapes(model: DPOT) -> dict[str, tuple[int, ...]]:
  """The official state-dict shape of every parameter ``model`` has (from abstract params, no allocation)."""
  shapes = abstract_params(model)
  out = {}
  for torch_name, path, (_, to_torch) in _entries(model):
    actual, idx = _block_path(model, path)
    leaf = _get(shapes, actual)
    shape = leaf.shape[1:] if idx is not None else leaf.shape
    out[torch_name] = to_torch(np.empty(shape, np.uint8)).shape
  return out


def _strip_prefixes(state_dict: Mapping[str, Any]) -> dict[str, Any]:
  """Accepts a raw state dict, ``{"model": state_dict, ...}`` (the official checkpoints) and DDP's "module." prefix."""
  if "model" in state_dict and isinstance(state_dict["model"], Mapping):
    state_dict = state_dict["model"]
  odd = [k for k in state_dict if not isinstance(k, str)]
  check(not odd, f"state dict keys must be parameter names (str); got {odd[:3]!r}")
  return {(k[len("module."):] if k.startswith("module.") else k): v for k, v in state_dict.items()}


def convert_state_dict(state_dict: Mapping[str, Any], model: DPOT) -> tuple[dict, list[str]]:
  """Official DPOTNet state dict (numpy arrays or torch tensors) -> (jaxlab params, skipped keys).

  ``skipped`` lists the ``cls_head.*`` keys dropped because ``model.num_classes == 0``.
  Raises InputError naming every missing, unexpected or mis-shaped key (expected vs got).
  """
  model.check_config()
  check(isinstance(state_dict, Mapping), f"state_dict is a {type(state_dict).__name__}; must be a mapping of "
        "parameter names to arrays (an official DPOT state dict, or {'model': state_dict})")
  sd = {k: _to_numpy(k, v) for k, v in _strip_prefixes(state_dict).items()}
  expected = expected_torch_shapes(model)
  skipped = sorted(k for k in sd if k.startswith(_CLS_PREFIX) and not model.num_classes)
  missing = sorted(set(expected) - set(sd))
  unexpected = sorted(set(sd) - set(expected) - set(skipped))
  misshaped = [f"{k}: expected {expected[k]}, got {sd[k].shape}"
               for k in expected if k in sd and tuple(sd[k].shape) != tuple(expected[k])]
  problems = ([f"missing {missing}"] if missing else []) + ([f"unexpected {unexpected}"] if unexpected else []) \
      + ([f"mis-shaped [{'; '.join(misshaped)}]"] if misshaped else [])
  if problems:
    raise InputError(f"state dict does not fit {_describe(model)}: " + " | ".join(problems))
  for torch_name in expected:
    _check_values(torch_name, sd[torch_name])

  params: dict = {}
  stacked: dict[tuple[str, ...], list] = {}
  for torch_name, path, (to_jax, _) in _entries(model):
    value = np.ascontiguousarray(to_jax(sd[torch_name]).astype(np.float32))
    actual, idx = _block_path(model, path)
    if idx is None:
      _set(params, actual, value)
    else:
      stacked.setdefault(actual, [None] * model.depth)[idx] = value
  for actual, values in stacked.items():
    _set(params, actual, np.stack(values))
  return params, skipped


def params_to_state_dict(params: Mapping[str, Any], model: DPOT) -> dict[str, np.ndarray]:
  """jaxlab params (or a gradient tree of the same structure) -> official names and layouts (numpy)."""
  out = {}
  for torch_name, path, (_, to_torch) in _entries(model):
    actual, idx = _block_path(model, path)
    value = np.asarray(_get(params, actual))
    out[torch_name] = np.ascontiguousarray(to_torch(value[idx] if idx is not None else value))
  return out


def load_torch_checkpoint(path: str) -> dict[str, np.ndarray]:
  """Reads an official ``.pth`` (needs torch, which jaxlab does not depend on) into numpy arrays.

  The file is loaded with ``torch.load(..., weights_only=True)``: tensors and plain containers only,
  so a checkpoint cannot run code when read. The official DPOT checkpoints are plain state dicts, or
  ``{"model": state_dict, ...}``; DPOT's training scripts also save their ``argparse.Namespace`` under
  ``"args"``, which is allowed (where torch has ``torch.serialization.safe_globals``).

  Args:
    path: the ``.pth`` file.

  Returns:
    Parameter name -> numpy array (a ``"model"`` wrapper and DDP's ``module.`` prefix removed).

  Raises:
    InputError: torch is missing, or the file is not a checkpoint ``weights_only`` loading reads.
  """
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise InputError(f"reading {path!r} needs torch, which is not installed; pass a dict of numpy arrays instead") from e
  safe_globals = getattr(getattr(torch, "serialization", None), "safe_globals", None)
  allowed = safe_globals([argparse.Namespace]) if safe_globals else contextlib.nullcontext()
  try:
    with allowed:
      ckpt = torch.load(path, map_location="cpu", weights_only=True)  # never unpickles code
  except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError) as e:
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise InputError(f"checkpoint {path!r} cannot be read with torch.load(weights_only=True): {reason}; an "
                     "official DPOT checkpoint is a state dict of tensors (or {'model': state_dict, ...})") from None
  check(isinstance(ckpt, Mapping), f"checkpoint {path!r} holds a {type(ckpt).__name__}; must be a state dict "
        "(parameter name -> tensor) or {'model': state_dict, ...}")
  return {k: v.detach().cpu().numpy() for k, v in _strip_prefixes(ckpt).items() if hasattr(v, "detach")}


def _to_numpy(key: str, v: Any) -> np.ndarray:
  if hasattr(v, "detach"):  # a torch tensor
    v = v.detach().cpu()
    if str(v.dtype) == "torch.bfloat16":  # numpy has no bfloat16; float32 holds it exactly
      v = v.float()
    v = v.numpy()
  try:
    return np.asarray(v)
  except (TypeError, ValueError) as e:  # e.g. a ragged list
    raise InputError(f"state dict entry {key!r} is not an array ({type(v).__name__}: {e})") from None


def _check_values(key: str, value: np.ndarray) -> None:
  """A weight must be real floating point and finite in float32 (what the model holds)."""
  check(np.issubdtype(value.dtype, np.floating), f"state dict entry {key!r} has dtype {value.dtype}; must be a "
        "real floating-point array (float16/32/64) as in an official checkpoint")
  with np.errstate(over="ignore"):
    finite = np.isfinite(value.astype(np.float32))
  if not finite.all():
    bad = int(np.size(finite) - np.count_nonzero(finite))
    first = tuple(int(i) for i in np.argwhere(~finite)[0])
    raise InputError(f"state dict entry {key!r} has {bad} non-finite value(s) in float32 (first at index {first}: "
                     f"{value[first]!r}); a checkpoint of a diverged run, or values beyond float32's range")


def _describe(model: DPOT) -> str:
  return (f"DPOT(embed_dim={model.embed_dim}, depth={model.depth}, n_blocks={model.n_blocks}, "
          f"img_size={model.img_size}, patch_size={model.patch_size}, in_channels={model.in_channels}, "
          f"in_timesteps={model.in_timesteps}, num_classes={model.num_classes}, normalize={model.normalize})")

