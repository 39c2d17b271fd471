r"""OT-CLIP: a two-tower model on digit images and generated captions, trained with an OT loss.

Paper: Shi, Fan & Yan, "OT-CLIP: Understanding and Generalizing CLIP via Optimal Transport",
ICML 2024, https://proceedings.mlr.press/v235/shi24b.html. The loss is entropic OT between the
batch's images and captions (5 unrolled Sinkhorn iterations), optimised by MoMo-Adam, through the
one sharded train step; evaluation is zero-shot from held-out prompt templates (argmax and OT
inference). The loss/inference study is ``configs/ot_clip_digits.py``. Part of the quickstart.

Run::

  python -m jaxlab.main --config=configs/digits_clip.py --workdir=runs/digits_clip
  python -m jaxlab.main --config=configs/digits_clip.py:tiny --workdir=/tmp/clip_tiny   # seconds

Other losses: ``--config.loss.name=infonce`` (or siglip, unbalanced_ot, fgw, dbot, ufgw).
"""

import ml_collections

from jaxlab.experiment import make_tiny, trainer_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (full) or ``"tiny"`` (a few steps, for tests)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"configs/digits_clip.py takes no argument or 'tiny', got {arg!r}")
  c = trainer_config(num_steps=400, sharding_rules=((r"Dense_[01]/kernel$", (None, "model")),))
  c.name = "digits_clip"
  c.task = "digits_two_tower"
  c.data = ml_collections.ConfigDict({"test_fraction": 0.2, "split_seed": 0})
  c.model = ml_collections.ConfigDict({"hidden": 128, "embed_dim": 32})
  # chunk_size: visit the B x B coupling this many rows at a time (jaxlab.ot_clip.get_loss); None: whole.
  c.loss = ml_collections.ConfigDict({"name": "entropic_ot", "num_iterations": 5,
                                      "chunk_size": ml_collections.config_dict.placeholder(int)})
  c.eval_epsilon = 0.05  # OT inference temperature
  c.optimizer = ml_collections.ConfigDict({"name": "momo_adam", "learning_rate": 3e-3,
                                           "schedule": "constant"})
  if arg == "tiny":
    c.model.hidden = 32
    make_tiny(c)
  return c
