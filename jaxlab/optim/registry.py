"""Optimizers by name, built from a config's ``optimizer`` block.

``make_optimizer(name, learning_rate=..., **kwargs)`` returns an optax transform. Schedules
come from ``jaxlab.optim.schedules`` (``config.schedule``) and are passed as ``learning_rate``.
"""

from __future__ import annotations

from typing import Any

import optax

from jaxlab.optim.momo import momo, momo_adam
from jaxlab.registry import Registry

#: Optimizers by name (``config.optimizer.name``): optax's, the official-code MoMo / MoMo-Adam
#: (``momo``, ``momo_adam``) and optax.contrib's versions of them (``optax_momo``, ``optax_momo_adam``).
OPTIMIZERS: Registry = Registry("optimizer")

OPTIMIZERS.register("sgd")(optax.sgd)
OPTIMIZERS.register("adam")(optax.adam)
OPTIMIZERS.register("adamw")(optax.adamw)
OPTIMIZERS.register("polyak_sgd")(optax.polyak_sgd)
OPTIMIZERS.register("optax_momo")(optax.contrib.momo)
OPTIMIZERS.register("optax_momo_adam")(optax.contrib.momo_adam)
OPTIMIZERS.register("prodigy")(optax.contrib.prodigy)
OPTIMIZERS.register("dadapt_adamw")(optax.contrib.dadapt_adamw)
OPTIMIZERS.register("momo")(momo)
OPTIMIZERS.register("momo_adam")(momo_adam)


@OPTIMIZERS.register("sgdm")
def sgdm(learning_rate: Any, beta: float = 0.9, nesterov: bool = False) -> optax.GradientTransformation:
  """Heavy-ball SGD on MoMo's learning-rate axis: ``sgd(lr * (1 - beta), momentum=beta)``.

  MoMo averages gradients as d_k = beta d_{k-1} + (1 - beta) g_k, so this is the SGD-M whose
  step equals MoMo's when the Polyak cap is inactive (Schaipp et al., ICML 2024, Sec. 2).
  """
  lr = (lambda c: learning_rate(c) * (1 - beta)) if callable(learning_rate) else learning_rate * (1 - beta)
  return optax.sgd(lr, momentum=beta, nesterov=nesterov)


def make_optimizer(name: str, **kwargs: Any) -> optax.GradientTransformation:
  """The optimizer ``name`` (a name in :data:`OPTIMIZERS`) called with ``kwargs``.

  Raises:
    UnknownNameError: ``name`` is not registered; the message lists the valid names.
  """
  return OPTIMIZERS.get(name)(**kwargs)
