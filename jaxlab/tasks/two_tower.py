"""OT-CLIP two-tower training on digit images and generated captions, through the shared step.

The loss couples the whole global batch (entropic OT plan over B x B), which the step handles by
jitting over the sharded global batch. Evaluation is zero-shot classification from held-out
prompt templates: CLIP's argmax and OT-CLIP's transductive OT inference (Shi et al., Sec. 5).
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxlab.data.batching import batch_indices
from jaxlab.data.digits import load_digits_split
from jaxlab.ot_clip import digits_pairs, ot_zero_shot, zero_shot_predict
from jaxlab.ot_clip.similarity import l2_normalize
from jaxlab.ot_clip.train_loss import make_two_tower_loss
from jaxlab.ot_clip.two_tower import TwoTower
from jaxlab.train.task import TASKS, Task


@TASKS.register("digits_two_tower")
def digits_two_tower(config: ml_collections.ConfigDict) -> Task:
  data = load_digits_split(test_fraction=config.data.test_fraction, seed=config.data.split_seed)
  vocab = digits_pairs.build_vocab()
  captions = digits_pairs.caption_tokens(data["y_train"], vocab, np.random.default_rng(config.seed))
  prompts = digits_pairs.class_prompt_tokens(vocab)  # [classes, templates, L], held-out templates
  model = TwoTower(vocab_size=len(vocab) + 1, **dict(config.model))
  loss_kwargs = dict(config.loss)
  loss_fn = make_two_tower_loss(model, loss_kwargs.pop("name"), **loss_kwargs)

  def init_params(rng):
    return model.init(rng, jnp.zeros((1, 64)), jnp.zeros((1, prompts.shape[-1]), jnp.int32))["params"]

  def host_batch(step, rows, seed):
    idx = batch_indices(len(captions), config.batch_size, step, seed)[rows]
    return {"image": data["x_train"][idx], "tokens": captions[idx]}

  def evaluate(state, rng):
    del rng
    params = state.params
    image = model.apply({"params": params}, data["x_test"], method=TwoTower.encode_image)
    text = model.apply({"params": params}, prompts.reshape(-1, prompts.shape[-1]), method=TwoTower.encode_text)
    classes = l2_normalize(text.reshape(prompts.shape[0], prompts.shape[1], -1).mean(1))  # prompt ensemble
    labels = jnp.asarray(data["y_test"])
    argmax_acc = jnp.mean(zero_shot_predict(image, classes) == labels)
    ot_acc = jnp.mean(ot_zero_shot(image, classes, epsilon=config.eval_epsilon) == labels)
    return {"zero_shot_accuracy": argmax_acc, "ot_zero_shot_accuracy": ot_acc}

  return Task(init_params=init_params, loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              description=f"digits two-tower, {config.loss.name} loss")
