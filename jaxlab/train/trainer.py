"""Deprecated: ``train``, ``run_experiments`` and ``make_train_setup`` are in ``jaxlab.experiment``."""

import warnings

warnings.warn("jaxlab.train.trainer is deprecated; use jaxlab.experiment (train, run_experiments, make_train_setup)",
              DeprecationWarning, stacklevel=2)

from jaxlab.experiment import make_train_setup, run_experiments, train  # noqa: E402, F401 - the deprecated path
