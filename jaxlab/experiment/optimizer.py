"""The optimizer of a config: its optax transform and the host-side checks of what it logs."""

from __future__ import annotations

from typing import Any

import optax

from jaxlab.optim.config import optimizer_from_config
from jaxlab.optim.frozen import frozen_step_warning
from jaxlab.train.options import LogCheck
from jaxlab.train.runs import Runs

#: Host-side checks of each logged row for every optimizer: MoMo's frozen step (a row without
#: ``opt/step_size`` passes).
LOG_CHECKS: tuple[LogCheck, ...] = (frozen_step_warning,)


def optimizer_of(config: Any, runs: Runs | None) -> optax.GradientTransformation:
  """The optax transform of ``config.optimizer`` for ``config.num_steps`` steps, with ``runs``'s swept
  hyper-parameters injected (``jaxlab.optim.optimizer_from_config``)."""
  return optimizer_from_config(config.optimizer, config.num_steps, swept=tuple(runs.hparams) if runs else ())
