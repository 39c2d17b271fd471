r"""Quickstart: the main job. Trains through jaxlab's one sharded train step on CPU in minutes.

Digits classification (scikit-learn's 8x8 digits; no download) with an MLP, on a
``("data", "model")`` mesh over all local devices.

Run (what ``make demo`` does)::

  python -m jaxlab.main --config=configs/quickstart.py --workdir=runs/quickstart

Small variant (seconds; used by the CLI test)::

  python -m jaxlab.main --config=configs/quickstart.py:tiny --workdir=/tmp/qs_tiny

Any key can be overridden, e.g. ``--config.optimizer.name=adam --config.optimizer.learning_rate=1e-3``.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (full quickstart) or ``"tiny"`` (a few steps, for tests)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"configs/quickstart.py takes no argument or 'tiny', got {arg!r}")
  c = ml_collections.ConfigDict()
  c.name = "quickstart"
  c.task = "digits_classification"
  c.seed = 0
  c.data = ml_collections.ConfigDict({"test_fraction": 0.2, "split_seed": 0})
  c.model = ml_collections.ConfigDict({"name": "mlp", "hidden": (128, 128), "num_outputs": 10})
  c.loss = ml_collections.ConfigDict({"name": "softmax_cross_entropy"})
  c.optimizer = ml_collections.ConfigDict(
      {"name": "sgdm", "learning_rate": 0.5, "schedule": "cosine"})
  c.batch_size = 128
  c.num_steps = 600
  c.mesh = (("data", -1), ("model", 1))
  # (regex over state paths, PartitionSpec axes); unmatched leaves are replicated.
  c.sharding_rules = ((r"Dense_[01]/kernel$", (None, "model")),)
  c.skip_nonfinite = True
  c.log_every = 50
  c.eval_every = 200
  c.checkpoint_every = 200
  if arg == "tiny":
    c.model.hidden = (32,)
    c.num_steps = 20
    c.log_every = 5
    c.eval_every = 10
    c.checkpoint_every = 10
  return c
