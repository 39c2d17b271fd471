"""Optimizers: optax transforms (MoMo, MoMo-Adam) and a name registry for configs."""

from jaxlab.optim.registry import OPTIMIZERS, make_optimizer
from jaxlab.optim.schedules import SCHEDULES, optimizer_from_config
from jaxlab.optim.momo import MomoAdamState, MomoState, momo, momo_adam
