"""A host-side check of MoMo's logged state: a step size of 0 under a lower bound above the loss.

MoMo's step is ``min(lr, (f - lb)_+ / ||d||^2)`` (Schaipp et al., ICML 2024, Alg. 1 and 2): with the lower
bound ``lb`` above the loss the step is 0 and the parameters stop moving. The train step runs on
under ``jit``, where nothing can be raised, so the loop runs this check on each logged row
(``jaxlab.train.options.LogCheck``) and warns once.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def frozen_step_warning(metrics: Mapping[str, Any], step: int) -> str | None:
  """The warning for a logged row whose ``opt/...step_size`` is 0 with ``opt/...lb`` above the loss, else None.

  Args:
    metrics: a logged row (host values; ``[runs]`` arrays under vmapped runs), with ``loss`` and the
      optimizer state's ``opt/step_size`` and ``opt/lb`` (``jaxlab.contract.LOGGED_STATE_FIELDS``).
    step: the row's step, for the message.

  Returns:
    One line naming the step, the values and what to change; None when the parameters move.

  Examples:
    >>> from jaxlab.optim.frozen import frozen_step_warning
    >>> frozen_step_warning({"loss": 1.0, "opt/step_size": 0.5, "opt/lb": 0.0}, 10) is None
    True
    >>> frozen_step_warning({"loss": 1.0, "opt/step_size": 0.0, "opt/lb": 2.0}, 10)[:40]
    'step 10: opt/step_size=0 with opt/lb=2.0'
  """
  for key in metrics:
    if key.startswith("opt/") and key.endswith("step_size"):
      lb = np.asarray(metrics.get(key[: -len("step_size")] + "lb", np.nan))
      if np.any((np.asarray(metrics[key]) == 0) & (lb > np.asarray(metrics["loss"]))):
        return (f"step {step}: {key}=0 with {key[: -len('step_size')]}lb={lb} above the loss "
                f"{metrics['loss']}: the parameters are not moving; lower optimizer.lower_bound "
                "(or set optimizer.adapt_lower_bound=True)")
  return None
