"""A task is built once, from its config and the TaskContext the config layer resolved; a one-argument factory is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.experiment import make_train_setup, task_context, trainer_config
from jaxlab.tasks import make_task
from jaxlab.train import TASKS, Inference, Task, TaskContext

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


def test_a_one_argument_factory_is_refused_in_one_line_naming_the_new_form():
  SEEN.clear()
  message = (r"task 'test_legacy_line': its factory 'legacy_line' does not take \(config, ctx\); a task factory "
             r"is def factory\(config, ctx\) -> Task")
  with pytest.raises(InputError, match=message):
    make_train_setup(_config("test_legacy_line"))
  config = _config("test_legacy_line")
  with pytest.raises(InputError, match=message):
    make_task(config, task_context(config))
  assert not SEEN  # refused before the factory ran


def test_the_config_layer_resolves_the_context_over_all_devices():
  SEEN.clear()
  config = _config("test_context_line")
  ctx = task_context(config)
  make_task(config, ctx)
  assert SEEN[0][1] is ctx and ctx.mesh.devices.size == jax.device_count() and ctx.runs is None
