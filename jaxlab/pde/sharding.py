"""Tensor-parallel sharding rules for DPOT (for ``jaxlab.sharding.tree_shardings``).

The large kernels go over the "model" mesh axis; since optimizer moments live under the same
path names ("opt_state/0/mu/blocks/mlp/fc1/kernel"), each rule shards a parameter and its Adam
moments alike. For DPOT-H these rules cover 99% of the 1.03B parameters, so params + Adam
state per device are ~1/model_size of the total (plus the small replicated rest).

Which axis, and why:
  * block MLP: fc1 (D, 4D) by its output, fc2 (4D, D) by its input (Megatron-style: the hidden
    activation stays sharded between the two matmuls, one reduction after fc2);
  * AFNO w1/w2/b1/b2 (2, n_blocks, in, out): by n_blocks (the blocks are independent);
  * time aggregation w (T, D, D): by the output channel;
  * head deconv kernel (D, p, p, L): by the row offset i inside a patch, so the full-resolution
    head activations are split spatially and the pointwise 1x1 layers need no communication;
  * class head and positional embedding: by the embedding channel.
Scanned models (``scan_blocks=True``) have a leading depth axis on block parameters; both
layouts have rules. n_blocks, D and p must be divisible by the model-axis size.
"""

from __future__ import annotations

from typing import Any

from jax.sharding import Mesh

from jaxlab.errors import check

from jaxlab.sharding import tree_shardings


def dpot_sharding_rules(axis: str = "model") -> tuple[tuple[str, tuple[str | None, ...]], ...]:
  """``(regex, spec)`` rules; the first match wins, unmatched leaves are replicated."""
  m = axis
  return (
      # unrolled blocks: params/blocks_7/...
      (r"blocks_\d+/mlp/fc1/kernel$", (None, m)),
      (r"blocks_\d+/mlp/fc1/bias$", (m,)),
      (r"blocks_\d+/mlp/fc2/kernel$", (m, None)),
      (r"blocks_\d+/filter/[wb][12]$", (None, m)),
      # scanned blocks: params/blocks/... with a leading depth axis
      (r"blocks/mlp/fc1/kernel$", (None, None, m)),
      (r"blocks/mlp/fc1/bias$", (None, m)),
      (r"blocks/mlp/fc2/kernel$", (None, m, None)),
      (r"blocks/filter/[wb][12]$", (None, None, m)),
      (r"time_agg/w$", (None, None, m)),
      (r"out_layer/deconv/kernel$", (None, m)),
      (r"cls_head/fc[12]/kernel$", (None, m)),
      (r"pos_embed$", (None, None, m)),
  )


#: :func:`dpot_sharding_rules` over the mesh axis ``"model"``.
DPOT_SHARDING_RULES = dpot_sharding_rules()


def dpot_state_shardings(tree: Any, mesh: Mesh, axis: str = "model") -> Any:
  """A ``NamedSharding`` per leaf of a DPOT params / TrainState tree (arrays or ``jax.ShapeDtypeStruct`` leaves)."""
  return tree_shardings(tree, mesh, dpot_sharding_rules(axis))


def dpot_layout_rules(*, mlp: str = "dense", scan_blocks: bool = False, num_classes: int = 0,
                      model_axis: str = "model", expert_axis: str = "expert",
                      ) -> tuple[tuple[str, tuple[str | None, ...]], ...]:
  """The rules for one DPOT layout only, so that every rule matches a leaf (the trainer refuses a
  rule that matches nothing): unrolled or scanned blocks, dense or Soft-MoE MLP, class head or not.

  Soft-MoE MLP (``mlp="softmoe"``, params ``mlp/router/phi`` [D, n, p], ``mlp/experts/w1`` [n, D, h],
  ``b1`` [n, h], ``w2`` [n, h, D], ``b2`` [n, D]): the stacked expert axis goes over ``expert_axis``
  (each device holds and runs its experts' slots only) and, inside each expert, the hidden axis
  over ``model_axis`` as the dense MLP's Megatron split; the router's expert axis also goes over
  ``expert_axis``. All other rules are :func:`dpot_sharding_rules`'. With a data axis, a
  (data x model x expert) mesh then splits the batch, the AFNO / embedding / head kernels and the
  experts three ways.
  """
  check(mlp in ("dense", "softmoe"), f"mlp={mlp!r}; allowed: 'dense', 'softmoe'")
  m, e = model_axis, expert_axis
  depth = (None,) if scan_blocks else ()
  prefix = r"blocks/" if scan_blocks else r"blocks_\d+/"
  if mlp == "dense":
    mlp_rules = ((prefix + r"mlp/fc1/kernel$", depth + (None, m)),
                 (prefix + r"mlp/fc1/bias$", depth + (m,)),
                 (prefix + r"mlp/fc2/kernel$", depth + (m, None)))
  else:
    mlp_rules = ((prefix + r"mlp/experts/w1$", depth + (e, None, m)),
                 (prefix + r"mlp/experts/b1$", depth + (e, m)),
                 (prefix + r"mlp/experts/w2$", depth + (e, m, None)),
                 (prefix + r"mlp/experts/b2$", depth + (e,)),
                 (prefix + r"mlp/router/phi$", depth + (None, e)))
  rest = []
  for regex, spec in dpot_sharding_rules(m):
    if "mlp/" in regex or regex.startswith("cls_head") and not num_classes:
      continue
    if regex.startswith("blocks") and not regex.startswith(prefix):
      continue  # the other block layout
    rest.append((regex, spec))
  return mlp_rules + tuple(rest)
