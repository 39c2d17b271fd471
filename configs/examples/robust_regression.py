r"""Your own task and optimizer in one config file: Huber regression on heavy-tailed data (a new
loss and new data), trained with sign descent (a new optax transform).

  python -m jaxlab.main --config=configs/examples/robust_regression.py --workdir=runs/robust
  python -m jaxlab.main --config=configs/examples/robust_regression.py:tiny --workdir=runs/robust_tiny
"""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from jaxlab.optim.registry import OPTIMIZERS
from jaxlab.train import TASKS, Task, TaskContext
from jaxlab.experiment import make_tiny, trainer_config

TRUE_W = np.array([2.0, -1.0, 0.5], np.float32)


def scale_by_sign() -> optax.GradientTransformation:
  """Each update entry replaced by its sign (stateless)."""
  return optax.GradientTransformation(
      init=lambda params: optax.EmptyState(),
      update=lambda updates, state, params=None: (jax.tree.map(jnp.sign, updates), state))


@OPTIMIZERS.register("sign_momentum")
def sign_momentum(learning_rate, momentum: float = 0.9) -> optax.GradientTransformation:
  """Sign descent on a momentum average of the gradients (signum); ``learning_rate`` may be a schedule."""
  return optax.chain(optax.trace(decay=momentum), scale_by_sign(), optax.scale_by_learning_rate(learning_rate))


@TASKS.register("huber_regression")
def huber_regression(config: ml_collections.ConfigDict, ctx: TaskContext) -> Task:
  """Linear regression with Student-t label noise (heavy tails), fitted with a Huber loss.

  ``ctx`` holds what the trainer resolved (mesh, runs, devices, processes); this task needs none
  of it: its host batches are built from the rows the trainer asks for.
  """
  del ctx

  def host_batch(step, rows, seed):  # pure in (step, rows, seed): a resumed run sees the same data
    r = np.random.default_rng([seed, step])
    x = r.normal(size=(config.batch_size, TRUE_W.size)).astype(np.float32)
    noise = r.standard_t(config.noise_df, size=config.batch_size).astype(np.float32)
    return {"x": x[rows], "y": (x @ TRUE_W + noise)[rows]}

  def loss_fn(params, batch, rng, extra):
    # the model in the params' dtype (bfloat16 with --config.compute_dtype=bfloat16), the loss in float32
    residual = (batch["x"] @ params["w"] + params["b"]).astype(jnp.float32) - batch["y"].astype(jnp.float32)
    return jnp.mean(optax.huber_loss(residual, delta=config.huber_delta)), {"mae": jnp.mean(jnp.abs(residual))}

  def evaluate(state, rng):
    return {"weight_error": jnp.linalg.norm(state.params["w"] - TRUE_W)}

  return Task(init_params=lambda rng: {"w": jnp.zeros(TRUE_W.size), "b": jnp.zeros(())},
              loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              description="Huber regression, Student-t noise")


def get_config(arg=None):
  """``arg``: None (500 steps) or "tiny" (20 steps)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"robust_regression.py takes no argument or 'tiny', got {arg!r}")
  c = trainer_config(batch_size=64, num_steps=500, log_every=50, eval_every=250, checkpoint_every=250)
  c.name = "robust_regression"
  c.task = "huber_regression"
  c.noise_df, c.huber_delta = 2.0, 1.0
  c.optimizer = ml_collections.ConfigDict(
      {"name": "sign_momentum", "learning_rate": 0.02, "momentum": 0.9, "schedule": "cosine"})
  if arg == "tiny":
    make_tiny(c)
  return c
