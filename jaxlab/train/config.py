"""Deprecated: ``trainer_config``, ``make_tiny`` and ``add_fine_tune_keys`` are in ``jaxlab.experiment``."""

import warnings

warnings.warn("jaxlab.train.config is deprecated; use jaxlab.experiment (trainer_config, make_tiny, "
              "add_fine_tune_keys)", DeprecationWarning, stacklevel=2)

from jaxlab.experiment import add_fine_tune_keys, make_tiny, trainer_config  # noqa: E402, F401 - the deprecated path
