r"""OT-CLIP on your own image-text pairs: a folder of images with a captions file, or paired embeddings.

Paper: Shi, Fan & Yan, "OT-CLIP: Understanding and Generalizing CLIP via Optimal Transport",
ICML 2024. The task (``jaxlab/tasks/clip_files.py``) trains a two-tower model with an OT-CLIP
loss on the training split and evaluates on the held-out split: retrieval recall@1, and with a
``label`` column zero-shot (argmax and OT inference), selective and long-tailed classification.

Data layouts (paths relative to ``data.dir``):

* images: ``data.captions``, a CSV with a header (or a JSONL file) with columns ``image`` (path
  relative to the captions file) and ``caption``, optionally ``label`` (class name) and
  ``split`` (train / test; then set ``data.split='column'``); other columns are ignored. Or
  open_clip's CSV as its ``CsvDataset`` reads it (``data.csv_format='open_clip'``: tab-separated
  ``filepath`` and ``title``, image paths relative to the current directory), and any other
  separator and column names (``data.csv_separator``, ``data.csv_img_key``, ...);
* embeddings: ``data.embeddings``, a folder with ``image.npy`` + ``text.npy`` (optionally
  ``label.npy``, ``split.npy``), an ``.npz`` with those arrays, or a Parquet file with those
  columns (lists of floats). Setting it selects the embeddings.
* webdataset shards: ``data.train_shards``, a brace pattern of .tar shards as img2dataset writes
  them (``{key}.jpg|png|webp`` + ``{key}.txt`` per sample), e.g. ``shards/{00000..00099}.tar``
  (several joined by ``::``); ``data.eval_shards`` optionally names held-out shards. Setting it
  selects the shards.

Run::

  python -m jaxlab.main --config=configs/clip_files.py --config.data.dir=<data dir> --workdir=runs/clip_files
  python -m jaxlab.main --config=configs/clip_files.py:tiny --config.data.dir=<data dir> --workdir=<workdir>

The workdir gets ``tokenizer.json`` (the tokenizer the captions were encoded with) beside the
checkpoints and metrics.
"""

import ml_collections

from jaxlab.experiment import make_tiny, trainer_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (full) or ``"tiny"`` (small images and model, a few steps, for tests)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"configs/clip_files.py takes no argument or 'tiny', got {arg!r}")
  c = trainer_config(num_steps=2000, batch_size=128)
  c.name = "clip_files"
  c.task = "clip_files"
  c.data = ml_collections.ConfigDict({
      "dir": "",                   # required: the data folder (no default: it is yours)
      "captions": "captions.csv",  # images: CSV or JSONL, relative to data.dir
      # A CSV's layout (jaxlab/ot_clip/data/csv_layout.py): "" jaxlab's (comma-separated image, caption
      # [, label, split]; image paths relative to the CSV) or "open_clip" (tab-separated filepath, title;
      # image paths as written: relative to the current directory). Each key below: "" = the format's.
      "csv_format": "",
      "csv_separator": "",         # one character: ",", ";", "|", or a tab ("tab", or '\t' as a shell passes it)
      "csv_img_key": "",           # the image path column (open_clip's --csv-img-key)
      "csv_caption_key": "",       # the caption column (open_clip's --csv-caption-key)
      "csv_label_key": "",         # the class-name column; "": "label" if the file has one
      "csv_split_key": "",         # the train/test column; "": "split" if the file has one
      "embeddings": "",            # non-empty: paired embeddings instead of images (see above)
      "train_shards": "",          # non-empty: webdataset .tar shards instead, e.g. "shards/{00000..00099}.tar"
      "eval_shards": "",           # held-out shards ("": data.test_fraction of train_shards' samples)
      "image_size": 32,            # images are resized to image_size x image_size RGB
      "tokenizer": "",             # a tokenizer.json (relative to data.dir); "": train one on the captions
      "vocab_size": 8192,          # at most this many words for a trained tokenizer
      "max_tokens": 32,            # caption length in tokens (longer ones are truncated)
      "split": "fraction",         # "fraction" (seeded) or "column" (the file's split column)
      "test_fraction": 0.1,
      "split_seed": 0,
  })
  # Image tower: strided 3x3 convolutions of these widths (embeddings always get an MLP).
  c.model = ml_collections.ConfigDict({"hidden": 256, "embed_dim": 64, "conv_channels": (32, 64, 128)})
  # chunk_size: visit the B x B coupling this many rows at a time (jaxlab.ot_clip.get_loss); None: whole.
  c.loss = ml_collections.ConfigDict({"name": "entropic_ot", "num_iterations": 5,
                                      "chunk_size": ml_collections.config_dict.placeholder(int)})
  c.eval = ml_collections.ConfigDict({
      "templates": ("{}",),  # zero-shot prompts, e.g. "a photo of a {}"; "{}" is the class name
      "epsilon": 0.05,    # OT inference temperature
      "coverage": 0.5,    # selective classification answers this fraction
      "imbalance": 10.0,  # long-tailed test subset: largest / smallest class (0: none)
  })
  c.optimizer = ml_collections.ConfigDict({"name": "momo_adam", "learning_rate": 3e-3, "schedule": "constant"})
  if arg == "tiny":
    c.batch_size = 16
    c.data.image_size = 16
    c.data.max_tokens = 8
    c.data.test_fraction = 0.2
    c.model = ml_collections.ConfigDict({"hidden": 32, "embed_dim": 16, "conv_channels": (8, 16)})
    make_tiny(c, num_steps=8)
  return c
