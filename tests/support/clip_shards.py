"""Webdataset tar shards written by the ``webdataset`` package's own ``TarWriter``, as img2dataset writes them.

Each sample: ``{key}.jpg`` / ``.png`` / ``.webp`` (the encoded image bytes), ``{key}.txt`` (the
caption) and ``{key}.json`` (img2dataset's metadata). Keys are img2dataset's zero-padded shard
and sample numbers (``000010003``).
"""

from __future__ import annotations

import io
import json
import os

import numpy as np
from PIL import Image

from tests.support.clip_data import draw, picture_class

FORMATS = {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}


def sample_image(i: int) -> np.ndarray:
  """Sample ``i``'s 12x12 picture: a square or a bar in one of 4 colours on a dark background."""
  return draw(i, np.random.default_rng(i))


def sample_caption(i: int) -> str:
  return "a {} {} on black".format(*picture_class(i))


def encoded(img: np.ndarray, ext: str) -> bytes:
  buffer = io.BytesIO()
  Image.fromarray(img).save(buffer, format=FORMATS[ext], **({"lossless": True} if ext == "webp" else {}))
  return buffer.getvalue()


def write_shards(folder, num_shards: int = 4, per_shard: int = 10, ext: str = "png", first: int = 0,
                 edit=None) -> list[str]:
  """``num_shards`` shards ``{first:05d}.tar ...`` of ``per_shard`` samples each under ``folder``.

  Args:
    ext: the image extension (``"jpg"``, ``"png"``, ``"webp"``), or ``"mixed"`` (cycling through them).
    edit: ``edit(i, sample) -> sample | None``, applied to each sample dict before it is written
      (None: not written), to make broken or partial samples.

  Returns:
    The shard paths.
  """
  import webdataset as wds
  os.makedirs(folder, exist_ok=True)
  paths = []
  for s in range(first, first + num_shards):
    path = os.path.join(folder, f"{s:05d}.tar")
    with wds.TarWriter(path) as sink:
      for j in range(per_shard):
        i = s * per_shard + j
        e = tuple(FORMATS)[i % 3] if ext == "mixed" else ext
        sample = {"__key__": f"{s:05d}{j:04d}", e: encoded(sample_image(i), e), "txt": sample_caption(i),
                  "json": json.dumps({"url": f"http://example.com/{i}.{e}", "caption": sample_caption(i),
                                      "key": f"{s:05d}{j:04d}", "status": "success"})}
        sample = edit(i, sample) if edit else sample
        if sample is not None:
          sink.write(sample)
    paths.append(path)
  return paths
