r"""Digits classification with an MLP through the one sharded train step.

scikit-learn's 8x8 digits (no download), on a ``("data", "model")`` mesh over all local
devices, first two kernels sharded over "model". Part of the quickstart suite.

Run::

  python -m jaxlab.main --config=configs/digits_mlp.py --workdir=runs/digits_mlp

Small variant (seconds; used by the tests)::

  python -m jaxlab.main --config=configs/digits_mlp.py:tiny --workdir=/tmp/digits_tiny

Any key can be overridden, e.g. ``--config.optimizer.name=adam --config.optimizer.learning_rate=1e-3``.
"""

import ml_collections

from jaxlab.experiment import make_tiny, trainer_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (full quickstart) or ``"tiny"`` (a few steps, for tests)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"configs/digits_mlp.py takes no argument or 'tiny', got {arg!r}")
  # The first two kernels (and their optimizer moments) are sharded over "model".
  c = trainer_config(num_steps=600, sharding_rules=((r"Dense_[01]/kernel$", (None, "model")),))
  c.name = "digits_mlp"
  c.task = "digits_classification"
  c.data = ml_collections.ConfigDict({"test_fraction": 0.2, "split_seed": 0})
  c.model = ml_collections.ConfigDict({"name": "mlp", "hidden": (128, 128), "num_outputs": 10})
  c.loss = ml_collections.ConfigDict({"name": "softmax_cross_entropy"})
  # MoMo (jaxlab.optim.momo): the step passes value=loss; learning_rate is the cap on its step.
  c.optimizer = ml_collections.ConfigDict({"name": "momo", "learning_rate": 1.0, "schedule": "constant"})
  if arg == "tiny":
    c.model.hidden = (32,)
    make_tiny(c)
  return c
