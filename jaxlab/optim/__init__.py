"""Optimizers: optax transforms (MoMo, MoMo-Adam) and a name registry for configs."""

from jaxlab.optim.registry import OPTIMIZERS, make_optimizer
from jaxlab.optim.schedules import SCHEDULES
from jaxlab.optim.config import GRADIENT_TRANSFORMS, optimizer_from_config, set_hyperparams
from jaxlab.optim.momo import MomoAdamState, MomoState, momo, momo_adam, momo_frozen
