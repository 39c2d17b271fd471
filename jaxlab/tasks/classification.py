"""Supervised classification on scikit-learn's digits through the shared train step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections

from jaxlab.data.batching import batch_indices
from jaxlab.errors import InputError
from jaxlab.data.digits import load_digits_split
from jaxlab.losses import CLASSIFICATION_LOSSES
from jaxlab.models import make_model
from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Inference, Task


@TASKS.register("digits_classification")
def digits_classification(config: ml_collections.ConfigDict, ctx: TaskContext) -> Task:
  """The task of ``configs/digits_mlp.py``, with its :class:`~jaxlab.train.task.Inference`:
  ``predict(params, x)`` gives the logits ``[N, classes]``; ``data``: ``x_test``, ``y_test``."""
  del ctx  # one host array, the same on every process
  model_kwargs = dict(config.model)
  model = make_model(model_kwargs.pop("name"), **model_kwargs)
  images = config.model.name != "mlp"
  data = load_digits_split(test_fraction=config.data.test_fraction, seed=config.data.split_seed, images=images)
  num_classes = int(data["y_train"].max()) + 1
  if model_kwargs.get("num_outputs", num_classes) != num_classes:
    raise InputError(f"model.num_outputs={model_kwargs['num_outputs']} but the digits have {num_classes} classes")
  loss_kwargs = dict(config.get("loss", {}))
  loss = CLASSIFICATION_LOSSES.get(loss_kwargs.pop("name", "softmax_cross_entropy"))

  def loss_fn(params, batch, rng, extra):
    del rng, extra
    return loss(model.apply({"params": params}, batch["x"]), batch["y"], **loss_kwargs)

  def init_params(rng):
    return model.init(rng, jnp.zeros((1,) + data["x_train"].shape[1:], jnp.float32))["params"]

  def host_batch(step, rows, seed):
    idx = batch_indices(len(data["x_train"]), config.batch_size, step, seed)[rows]
    return {"x": data["x_train"][idx], "y": data["y_train"][idx]}

  def evaluate(state, rng):
    del rng
    test_loss, metrics = loss(model.apply({"params": state.params}, data["x_test"]), data["y_test"])
    return {"test_loss": test_loss, "test_accuracy": metrics["accuracy"]}

  predict = jax.jit(lambda params, x: model.apply({"params": params}, x))
  inference = Inference(model=model, fns={"predict": predict},
                        data={"x_test": data["x_test"], "y_test": data["y_test"]})
  return Task(init_params=init_params, loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              description=f"digits classification, {config.model.name}", inference=inference)
