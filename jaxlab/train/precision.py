"""The compute-dtype policy of the train step (config key ``compute_dtype``), for tasks to follow.

Under ``compute_dtype="bfloat16"`` the step (``jaxlab.train.step.train_step_fn``) hands the loss
its params, floating batch leaves and ``extra`` (e.g. DQN's target params) cast to bfloat16; the
float32 params stay the master copies that the gradients (float32, through the cast) and the
optimizer update. Models compute in the dtype of the params they are applied with; where
bfloat16's 8 mantissa bits are not enough, code upcasts to float32 on purpose (normalisation
statistics, FFTs, phases of a time embedding, loss reductions; docs/design.md, "bfloat16 compute
and the GPU script", lists them per task). A task that computes outside the loss with the params
(DQN's acting in ``collect``) casts them with :func:`cast_floats` to :func:`compute_dtype` of its
config itself; evaluation runs on the float32 params.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxlab.errors import check_choice

COMPUTE_DTYPES = ("float32", "bfloat16", "float16")


def cast_floats(tree: Any, dtype: Any) -> Any:
  """Every floating leaf of ``tree`` cast to ``dtype``; integer and boolean leaves unchanged.

  Args:
    tree: a pytree of arrays.
    dtype: the target float dtype.

  Returns:
    The cast pytree.
  """
  return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(jnp.result_type(x), jnp.floating) else x, tree)


def compute_dtype(config: Any) -> Any:
  """The dtype a config's train step computes in: ``jnp.float32`` unless ``config.compute_dtype`` says otherwise.

  Args:
    config: a trainer config (``jaxlab.experiment.trainer_config``); one without the key
      computes in float32.

  Returns:
    A numpy dtype (``float32``, ``bfloat16`` or ``float16``).

  Raises:
    InputError: ``compute_dtype`` is not one of ``COMPUTE_DTYPES``.
  """
  name = config.get("compute_dtype", "float32")
  check_choice(name, "compute_dtype", COMPUTE_DTYPES, got=True)
  return jnp.dtype(name)


def float_dtype(tree: Any) -> Any:
  """The dtype of the first floating leaf of ``tree`` (float32 if it has none): the dtype a model
  applied with these params computes in.

  Args:
    tree: a pytree of arrays, e.g. a model's params.

  Returns:
    A numpy dtype.
  """
  for leaf in jax.tree.leaves(tree):
    if jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
      return jnp.result_type(leaf)
  return jnp.dtype(jnp.float32)
