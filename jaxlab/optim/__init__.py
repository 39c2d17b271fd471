"""Optimizers: optax transforms (MoMo, MoMo-Adam) and a name registry for configs."""

from jaxlab.optim.registry import OPTIMIZERS, make_optimizer
