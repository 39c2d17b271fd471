"""OT-CLIP two-tower training on the user's own image-caption files or paired embeddings.

The data (``jaxlab.ot_clip.data.pairs``): a folder of images with a CSV/JSONL captions file,
precomputed paired embeddings, or webdataset tar shards (``jaxlab.ot_clip.data.shards``);
batches through grain, each process reading its own shard, the batch of step ``s`` a pure
function of (seed, ``s``) (``jaxlab.ot_clip.data.batches``). The model:
``TwoTower`` with a small conv net over the resized images (an MLP over embeddings) and a
bag-of-tokens text tower over the tokenizer's ids (an MLP over text embeddings). The loss: any
of the OT-CLIP family (``config.loss.name``). Evaluation on the held-out split
(``jaxlab.ot_clip.evaluation``): retrieval recall@1 always; with labels, zero-shot (CLIP argmax
and OT inference), selective classification and a long-tailed subset with its known prior
(Shi, Fan & Yan, ICML 2024, Sec. 5).
"""

from __future__ import annotations

import jax
import ml_collections
import numpy as np

from jaxlab.errors import InputError, check_range, is_real
from jaxlab.ot_clip.data.batches import ShardedBatches
from jaxlab.ot_clip.data.pairs import load_pairs
from jaxlab.ot_clip.data.shards import load_shard_pairs, uses_shards
from jaxlab.ot_clip.digits_pairs import long_tailed_indices
from jaxlab.ot_clip.evaluation import retrieval_metrics, zero_shot_metrics
from jaxlab.ot_clip.two_tower import TwoTower
from jaxlab.ot_clip.two_tower_inference import two_tower_fns
from jaxlab.tasks.clip_config import make_loss_fn
from jaxlab.train.context import TaskContext
from jaxlab.train.task import TASKS, Inference, Task


def _check_eval(ev: ml_collections.ConfigDict) -> None:
  """The evaluation settings, before any compute (evaluation runs only after the first steps)."""
  check_range(ev.epsilon, "eval.epsilon", 0, 1, low_open=True, got=True)
  check_range(ev.coverage, "eval.coverage", 0, 1, low_open=True, got=True)
  imbalance = ev.imbalance
  if not is_real(imbalance) or not (imbalance == 0 or 1 <= imbalance < float("inf")):
    raise InputError(f"eval.imbalance={imbalance!r}; allowed: 0 (no long-tailed evaluation) or a number >= 1 "
                     "(largest / smallest class of the long-tailed test subset)")


def _long_tailed(labels: np.ndarray, classes: tuple[str, ...], imbalance: float, seed: int
                 ) -> tuple[np.ndarray, np.ndarray] | None:
  """The long-tailed test subset and its prior (None when ``eval.imbalance`` is 0: no such evaluation)."""
  if imbalance == 0:
    return None
  counts = np.bincount(labels, minlength=len(classes))
  if counts.min() == 0:
    raise InputError(f"class {classes[int(np.flatnonzero(counts == 0)[0])]!r} has no held-out row, so the long-tailed "
                     "evaluation cannot include it; allowed: every class in the test split, or eval.imbalance=0 "
                     "(no long-tailed evaluation)")
  return long_tailed_indices(labels, imbalance, np.random.default_rng(seed), num_classes=len(classes))


@TASKS.register("clip_files")
def clip_files(config: ml_collections.ConfigDict, ctx: TaskContext) -> Task:
  """The two-tower task on ``config.data``'s files (``configs/clip_files.py``; see the module docstring),
  with its :class:`~jaxlab.train.task.Inference` (one model, one held-out split).

  Inference functions, each ``fn(params, ...)``: ``embed_images(params, images)`` and
  ``embed_texts(params, texts)`` (token ids from ``data["tokenizer"]`` via
  ``jaxlab.ot_clip.data.tokenizer.encode``, or text embeddings; L2-normalised), and with labels
  ``class_embeddings(params)`` ([classes, embed_dim]) and ``zero_shot(params, images,
  method="argmax" | "ot")`` (class ids into ``data["classes"]``). ``data``: ``classes``,
  ``tokenizer`` (None for embeddings), ``test`` (the held-out split: image, tokens or text,
  label).
  """
  _check_eval(config.eval)
  pairs = (load_shard_pairs(config.data) if uses_shards(config.data)
           else load_pairs(config.data, tuple(config.eval.templates)))
  conv = tuple(config.model.conv_channels) if pairs.kind == "images" else ()  # embeddings: an MLP tower
  model = TwoTower(hidden=config.model.hidden, embed_dim=config.model.embed_dim, conv_channels=conv,
                   **pairs.model_kwargs)
  loss_fn = make_loss_fn(config, ctx, model, text_key=pairs.text_key)
  host_batch = ShardedBatches(pairs.train, config.batch_size, ctx.process_count)
  test, epsilon, coverage = pairs.test, config.eval.epsilon, config.eval.coverage
  labelled = bool(pairs.classes)
  long_tailed = (_long_tailed(test["label"], pairs.classes, config.eval.imbalance, config.data.split_seed)
                 if labelled else None)

  def init_params(rng):
    return model.init(rng, test["image"][:1], test[pairs.text_key][:1])["params"]

  fns = two_tower_fns(model, pairs.class_texts if labelled else None, epsilon)
  embed_images, embed_texts = fns["embed_images"], fns["embed_texts"]

  def evaluate(state, rng):
    del rng
    image = embed_images(state.params, test["image"])
    metrics = retrieval_metrics(image, embed_texts(state.params, test[pairs.text_key]))
    if labelled:
      metrics.update(zero_shot_metrics(image, fns["class_embeddings"](state.params), test["label"], epsilon,
                                       coverage=coverage, long_tailed=long_tailed))
    return metrics

  jitted = {name: jax.jit(fn, static_argnames=("method",) if name == "zero_shot" else ()) for name, fn in fns.items()}
  inference = Inference(model=model, fns=jitted, data={"classes": pairs.classes, "tokenizer": pairs.tokenizer,
                                                       "test": test})
  return Task(init_params=init_params, loss_fn=loss_fn, host_batch=host_batch, evaluate=evaluate,
              throughput={"pairs": config.batch_size}, description=f"{pairs.description}, {config.loss.name} loss",
              resume_safe=("eval.*", "loss.chunk_size"), workdir_files=pairs.files, inference=inference)
