"""OT-CLIP two-tower training on digit images and generated captions, through the shared step.

The loss couples the whole global batch (entropic OT plan over B x B); the step jits over the
sharded global batch, and the loss keeps the plan split by rows over "data" (``make_two_tower_loss``
with the task's mesh). Evaluation is zero-shot classification from held-out
prompt templates: CLIP's argmax and OT-CLIP's transductive OT inference (Shi et al., Sec. 5).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxlab.data.batching import batch_indices
from jaxlab.data.digits import load_digits_split
from jaxlab.ot_clip import digits_pairs
from jaxlab.ot_clip.evaluation import classify
from jaxlab.ot_clip.two_tower import TwoTower
from jaxlab.ot_clip.two_tower_inference import two_tower_fns
from jaxlab.tasks.clip_config import make_loss_fn
from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Inference, Task


@TASKS.register("digits_two_tower")
def digits_two_tower(config: ml_collections.ConfigDict, ctx: TaskContext) -> Task:
  """The task of ``configs/digits_clip.py``, with its :class:`~jaxlab.train.task.Inference` (one
  model, one test split).

  Inference functions, each ``fn(params, ...)``: ``embed_images(params, images [N, 64])`` and
  ``embed_texts(params, tokens [N, L])`` (L2-normalised ``[N, embed_dim]``),
  ``class_embeddings(params)`` (the held-out prompt ensemble, ``[10, embed_dim]``) and
  ``zero_shot(params, images, method="argmax" | "ot", epsilon=config.eval_epsilon)`` (class ids;
  "ot" is OT-CLIP's transductive inference over the batch). ``data``: ``vocab`` (for
  ``jaxlab.ot_clip.digits_pairs.tokenize``), ``class_prompts``, ``x_test``, ``y_test``.
  """
  data = load_digits_split(test_fraction=config.data.test_fraction, seed=config.data.split_seed)
  vocab = digits_pairs.build_vocab()

  @functools.lru_cache(maxsize=None)
  def captions(seed: int) -> np.ndarray:
    # Each run's captions are drawn from its own seed, so run i of vmapped runs trains on what a
    # single run seeded i trains on (one draw per seed, cached).
    return digits_pairs.caption_tokens(data["y_train"], vocab, np.random.default_rng(seed))
  prompts = digits_pairs.class_prompt_tokens(vocab)  # [classes, templates, L], held-out templates
  model = TwoTower(vocab_size=len(vocab) + 1, **dict(config.model))
  loss_fn = make_loss_fn(config, ctx, model)

  def init_params(rng):
    return model.init(rng, jnp.zeros((1, 64)), jnp.zeros((1, prompts.shape[-1]), jnp.int32))["params"]

  def host_batch(step, rows, seed):
    idx = batch_indices(len(data["y_train"]), config.batch_size, step, seed)[rows]
    return {"image": data["x_train"][idx], "tokens": captions(int(seed))[idx]}

  fns = two_tower_fns(model, prompts, config.eval_epsilon)  # prompts: [classes, templates, L], held-out templates
  embed_images, class_embeddings = fns["embed_images"], fns["class_embeddings"]

  def evaluate(state, rng):
    del rng
    image, classes = embed_images(state.params, data["x_test"]), class_embeddings(state.params)
    labels = jnp.asarray(data["y_test"])
    argmax_acc = jnp.mean(classify(image, classes, "argmax", config.eval_epsilon) == labels)
    ot_acc = jnp.mean(classify(image, classes, "ot", config.eval_epsilon) == labels)
    return {"zero_shot_accuracy": argmax_acc, "ot_zero_shot_accuracy": ot_acc}

  jitted = {name: jax.jit(fn, static_argnames=("method",) if name == "zero_shot" else ()) for name, fn in fns.items()}
  inference = Inference(model=model, fns=jitted, data={"vocab": vocab, "class_prompts": prompts,
                                                       "x_test": data["x_test"], "y_test": data["y_test"]})
  return Task(init_params=init_params, loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              description=f"digits two-tower, {config.loss.name} loss", resume_safe=("loss.chunk_size",),
              inference=inference)
