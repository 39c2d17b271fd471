"""What the OT-CLIP two-tower tasks read from their config: the ``loss`` block and where its coupling lives.

Shared by ``digits_two_tower`` and ``clip_files`` (``jaxlab.tasks.two_tower``, ``jaxlab.tasks.clip_files``).
``config.loss`` holds ``name``, the loss's hyper-parameters and ``chunk_size`` (visit the B x B
coupling that many rows at a time; None: whole). The coupling is split by rows over the mesh's
"data" axis unless vmapped runs are what "data" splits; ``loss.chunk_size`` must then divide the
rows one device holds. Each bad key is one line naming it, before anything is compiled.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import ml_collections

from jaxlab.errors import InputError, check_int
from jaxlab.ot_clip.train_loss import LossFn, make_two_tower_loss
from jaxlab.train.context import TaskContext

#: The mesh axis the batch (and so the coupling's rows) is split over.
BATCH_AXIS = "data"


def split_mesh(ctx: TaskContext) -> Any:
  """The mesh whose "data" axis splits the coupling's rows, or None (vmapped runs, or one device on "data")."""
  if ctx.runs is not None or ctx.mesh.shape.get(BATCH_AXIS, 1) == 1:
    return None
  return ctx.mesh


def rows_per_device(config: ml_collections.ConfigDict, ctx: TaskContext) -> tuple[int, str]:
  """(rows of the coupling one device holds per loss call, how they come from the config, for messages)."""
  accum = int(config.get("grad_accum_steps", 1))
  rows, how = config.batch_size // accum, f"batch_size={config.batch_size}"
  if accum > 1:
    how += f" / grad_accum_steps={accum}"
  mesh = split_mesh(ctx)
  if mesh is not None:
    n = int(mesh.shape[BATCH_AXIS])
    rows, how = rows // n, f"{how} / {n} '{BATCH_AXIS}' devices"
  return rows, how


def check_chunk_size(config: ml_collections.ConfigDict, ctx: TaskContext) -> int | None:
  """``loss.chunk_size``: None, or an int >= 1 that divides (or is at least) the rows one device holds.

  Args:
    config: the task's config (``loss.chunk_size``, ``batch_size``, ``grad_accum_steps``).
    ctx: the resolved mesh and runs (the rows are split over "data" unless runs are).

  Returns:
    The chunk size, or None for no chunking.

  Raises:
    InputError: one line naming ``loss.chunk_size``, the rows and a divisor that would do.
  """
  value = config.loss.get("chunk_size", None)
  if value is None:
    return None
  chunk = check_int(value, "loss.chunk_size", 1, "rows of the coupling per block; None: no chunking")
  rows, how = rows_per_device(config, ctx)
  if chunk < rows and rows % chunk:
    divisor = max(k for k in range(1, chunk + 1) if rows % k == 0)
    raise InputError(f"loss.chunk_size={chunk}; must divide the {rows} rows of the coupling each device holds "
                     f"({how}), or be >= them; e.g. {divisor}")
  return chunk


def make_loss_fn(config: ml_collections.ConfigDict, ctx: TaskContext, model: nn.Module, *,
                 text_key: str = "tokens") -> LossFn:
  """The task's ``loss_fn(params, batch, rng, extra)`` from ``config.loss``, the coupling placed by ``ctx``.

  Args:
    config: the task's config: ``loss.name``, its hyper-parameters, ``loss.chunk_size``.
    ctx: the resolved mesh and runs.
    model: the two-tower model.
    text_key: the batch key of the texts (``"tokens"`` or ``"text"``).

  Returns:
    ``jaxlab.ot_clip.make_two_tower_loss``'s ``loss_fn``.

  Raises:
    InputError: a bad ``loss.chunk_size``, an unknown loss name or hyper-parameter.
  """
  hyper = dict(config.loss)
  name = hyper.pop("name")
  hyper.pop("chunk_size", None)
  return make_two_tower_loss(model, name, text_key=text_key, chunk_size=check_chunk_size(config, ctx),
                             mesh=split_mesh(ctx), batch_axis=BATCH_AXIS, **hyper)
