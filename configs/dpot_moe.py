r"""DPOT with a Soft-MoE channel mixer, trained with MoMo-Adam, experts sharded over an "expert" mesh axis.

Composes three methods through the shared step: DPOT (Hao et al., ICML 2024) whose block MLP is
a Soft MoE over the latent pixels (Puigcerver et al., ICLR 2024; ``DPOTBlock(mlp="softmoe")``),
optimised by MoMo-Adam (Schaipp et al., ICML 2024). The mesh is (data x model x expert): batch
over "data", the DPOT kernels over "model" (``jaxlab.pde.sharding``), the stacked experts over
"expert" (and their hidden axis over "model"). Run::

  python -m jaxlab.main --config=configs/dpot_moe.py --workdir=runs/dpot_moe           # study cell
  python -m jaxlab.main --config=configs/dpot_moe.py:dense --workdir=runs/dpot_dense   # same, dense MLP
  python -m jaxlab.main --config=configs/dpot_moe.py:tiny --workdir=/tmp/dpot_moe_tiny # seconds
  # 8 devices as data 2 x model 2 x expert 2:
  ... --config.mesh="(('data', 2), ('model', 2), ('expert', 2))"

Arguments: "" (Soft MoE, NS nu=1e-3, 64^2, 10 input frames, cpu_small DPOT), "dense" (the same
with the dense MLP: the two differ only in ``model.mlp`` and the sharding rules that follow it),
"tiny" / "dense_tiny" (32^2, seconds). Model keys beyond ``configs/dpot_pde.py``'s:
``model.mlp`` ("dense" | "softmoe"), ``model.num_experts``, ``model.slots_per_expert`` (0: from
``model.capacity_factor``, p = ceil(h*w * capacity_factor / num_experts)), ``model.moe_impl`` ("auto":
the Soft MoE's CPU kernel on CPU, its einsum form on GPU/TPU, chosen when the step is lowered;
"cpu_kernel" | "einsum" force one; ``jaxlab.moe.soft_moe``).
"""

import ml_collections

from jaxlab.config_files import load_config
from jaxlab.pde.sharding import dpot_layout_rules

ARGS = (None, "", "dense", "tiny", "dense_tiny")
# The study's data set: configs/dpot_study.py's NS3 (cached under $JAXLAB_DATA_DIR).
NS3 = {"family": "ns_fno", "viscosity": 1e-3, "trajectories": 220, "seed": 0}
# cpu_small at 64^2 has 8x8 = 64 latent pixels per sample; 4 experts x 16 slots = 64 slots, so the
# experts' FLOPs equal the dense MLP's (docs/methods/compose.md, "FLOP match", has the measured step FLOPs).
NUM_EXPERTS = 4


def set_mlp(c: ml_collections.ConfigDict, mlp: str) -> ml_collections.ConfigDict:
  """Sets ``model.mlp`` and the sharding rules of that layout (every rule must match a leaf)."""
  c.model.mlp = mlp
  c.sharding_rules = dpot_layout_rules(mlp=mlp, scan_blocks=bool(c.model.get("scan_blocks", False)))
  return c


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  if arg not in ARGS:
    raise ValueError(f"configs/dpot_moe.py takes one of {ARGS[1:]}, got {arg!r}")
  tiny = arg in ("tiny", "dense_tiny")
  c = load_config("dpot_pde:tiny" if tiny else "dpot_pde")  # by name: works from any directory
  c.name = "dpot_moe"
  c.mesh = (("data", -1), ("model", 1), ("expert", 1))
  c.model.num_experts = NUM_EXPERTS
  c.model.slots_per_expert = 0
  c.model.capacity_factor = 1.0
  c.model.moe_impl = "auto"
  # MoMo-Adam (Schaipp et al.): Adam's preconditioner with a Polyak-type step capped at the
  # learning rate; the relative-L2 loss is >= 0, so lower_bound 0.
  c.optimizer = ml_collections.ConfigDict({"name": "momo_adam", "learning_rate": 1e-3, "b1": 0.9, "b2": 0.999,
                                           "schedule": "cosine"})
  if not tiny:
    c.batch_size = 16
    c.data.sets = (NS3,)
    c.data.num_test = 20
    c.data.eval_trajectories = 0
  else:
    c.model.num_experts = 2  # 8x8 latent pixels at 32^2 / patch 4: 2 experts x 32 slots
  set_mlp(c, "dense" if arg in ("dense", "dense_tiny") else "softmoe")
  if arg in ("dense", "dense_tiny"):
    c.name = "dpot_dense"
  return c
