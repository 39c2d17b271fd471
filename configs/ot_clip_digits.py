r"""OT-CLIP on scikit-learn's digits: a two-tower study of the OT loss family and OT inference.

Paper: Shi, Fan & Yan, "OT-CLIP: Understanding and Generalizing CLIP via Optimal Transport",
ICML 2024, https://proceedings.mlr.press/v235/shi24b.html (code we compare against:
github.com/fan23j/ICML2024-OT-CLIP; see docs/methods/ot_clip.md, "Differences from the official code").

Run (about 10-20 minutes on 2 CPU cores; resumable, finished cells are skipped)::

  nice -n 5 python benchmarks/ot_clip_study.py --config=configs/ot_clip_digits.py

Small variant (one seed, few steps; seconds)::

  python benchmarks/ot_clip_study.py --config=configs/ot_clip_digits.py:small --out=/tmp/otc_small
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None``/``""`` for the full study, ``"small"`` for a quick smoke run."""
  if arg not in (None, "", "small"):
    raise ValueError(f"configs/ot_clip_digits.py takes no argument or 'small', got {arg!r}")
  small = arg == "small"
  c = ml_collections.ConfigDict()
  c.name = "ot_clip_digits"
  c.seeds = 1 if small else 3
  c.num_steps = 20 if small else 300
  c.batch_size = 128
  c.learning_rate = 3e-3
  c.model = ml_collections.ConfigDict({"hidden": 128, "embed_dim": 32})
  # Rows of the study: registry name -> loss kwargs and model init of the logit scale / bias.
  c.losses = ml_collections.ConfigDict({
      "infonce": {"kwargs": {}},
      "siglip": {"kwargs": {}, "init_log_logit_scale": 2.302585, "init_logit_bias": -10.0},  # log 10, -10
      "entropic_ot": {"kwargs": {"num_iterations": 5}},
      "unbalanced_ot": {"kwargs": {"num_iterations": 5, "tau_a": 0.9, "tau_b": 0.9}},
      "fgw": {"kwargs": {"num_iterations": 5, "num_outer": 3, "alpha": 0.5}},
      # Beyond the five rows, the rest of the family:
      "dbot": {"kwargs": {"num_iterations": 5, "lower": 0.5, "upper": 2.0}},
      "ufgw": {"kwargs": {"num_iterations": 5, "num_outer": 3, "alpha": 0.5, "tau_a": 0.9, "tau_b": 0.9}},
  })
  # Training settings; the long-tailed and selective evaluations reuse the clean models.
  c.settings = ml_collections.ConfigDict({
      "clean": {"swap_p": 0.0, "num_pairs": 0},
      "noisy_p20": {"swap_p": 0.2, "num_pairs": 0},
      "noisy_p40": {"swap_p": 0.4, "num_pairs": 0},
      "low_data_150": {"swap_p": 0.0, "num_pairs": 150},
  })
  if small:
    c.losses = ml_collections.ConfigDict({k: c.losses[k].to_dict() for k in ("infonce", "entropic_ot")})
    c.settings = ml_collections.ConfigDict({"clean": c.settings.clean.to_dict()})
  c.eval = ml_collections.ConfigDict({
      "imbalance": 10.0,       # long-tailed test set: largest / smallest class
      "coverage": 0.5,         # selective classification
      "fgw_alpha": 0.5,
      "test_fraction": 0.3,
  })
  return c
