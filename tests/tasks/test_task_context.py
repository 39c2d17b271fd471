"""A task is built once, from its config and the trainer's TaskContext; one-argument factories still work."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.train import TASKS, Inference, Task, TaskContext
from jaxlab.train.config import trainer_config
from jaxlab.train.task import make_task
from jaxlab.train.trainer import make_train_setup

SEEN: list = []  # (config, ctx) of each build


def _line_task(config) -> Task:
  def host_batch(step, rows, seed):
    x = np.random.default_rng([seed, step]).normal(size=(config.batch_size, 1)).astype(np.float32)[rows]
    return {"x": x, "y": 2 * x}

  def loss_fn(params, batch, rng, extra):
    return jnp.mean((batch["x"] @ params["w"] - batch["y"]) ** 2), {}
  predict = lambda params, x: x @ params["w"]
  return Task(init_params=lambda rng: {"w": jnp.zeros((1, 1))}, loss_fn=loss_fn, host_batch=host_batch,
              inference=Inference(model=None, fns={"predict": predict}))


@TASKS.register("test_context_line")
def context_line(config, ctx):
  SEEN.append((config, ctx))
  return _line_task(config)


@TASKS.register("test_legacy_line")
def legacy_line(config):
  SEEN.append((config, None))
  return _line_task(config)


def _config(task, **overrides):
  c = trainer_config(num_steps=2, batch_size=8, **overrides)
  c.task = task
  c.optimizer = {"name": "sgd", "learning_rate": 0.1}
  return c


def test_the_trainer_builds_the_task_once_with_its_own_mesh_and_runs():
  SEEN.clear()
  config = _config("test_context_line")
  config.runs = {"seeds": 2}
  setup = make_train_setup(config, devices=jax.devices()[:2])
  assert len(SEEN) == 1
  _, ctx = SEEN[0]
  assert isinstance(ctx, TaskContext) and ctx.mesh is setup.mesh and ctx.runs == setup.runs
  assert ctx.devices == tuple(jax.devices()[:2]) and ctx.runs.seeds == (0, 1)
  assert ctx.process_index == jax.process_index() and ctx.process_count == jax.process_count()
  assert setup.task.inference is not None and "predict" in setup.task.inference.fns


def test_a_one_argument_factory_is_called_with_the_config_only():
  SEEN.clear()
  setup = make_train_setup(_config("test_legacy_line"))
  assert len(SEEN) == 1 and SEEN[0][1] is None and setup.task.host_batch is not None
  assert make_task(_config("test_legacy_line")).inference is not None


def test_make_task_without_a_context_resolves_one_over_all_devices():
  SEEN.clear()
  make_task(_config("test_context_line"))
  _, ctx = SEEN[0]
  assert ctx.mesh.devices.size == jax.device_count() and ctx.runs is None
