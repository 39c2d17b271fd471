"""Tensor-parallel sharding rules for DPOT (for ``jaxlab.train.sharding.tree_shardings``).

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

from jaxlab.train.sharding import tree_shardings


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


DPOT_SHARDING_RULES = dpot_sharding_rules()


def dpot_state_shardings(tree: Any, mesh: Mesh, axis: str = "model") -> Any:
  """``NamedSharding``s for a DPOT params / TrainState tree (arrays or ``ShapeDtypeStruct``s)."""
  return tree_shardings(tree, mesh, dpot_sharding_rules(axis))
