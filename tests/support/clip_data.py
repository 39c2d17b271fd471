"""Small image-caption folders, embedding files and grain records, written in the layouts users bring."""

from __future__ import annotations

import json
import os

import ml_collections
import numpy as np
from PIL import Image

COLORS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220), "yellow": (230, 220, 20)}


def picture_class(i: int) -> tuple[str, str]:
  """Picture ``i``'s colour (one of 4) and shape ("square" or "bar")."""
  return list(COLORS)[i % 4], ("square", "bar")[(i // 4) % 2]


def draw(i: int, rng: np.random.Generator) -> np.ndarray:
  """Picture ``i``: a 12x12 coloured square or bar on a dark background of ``rng``'s noise."""
  name, shape = picture_class(i)
  img = rng.integers(0, 30, (12, 12, 3), dtype=np.uint8)
  if shape == "square":
    img[3:9, 3:9] = COLORS[name]
  else:
    img[:, 5:7] = COLORS[name]
  return img


def write_image_folder(folder, num_images: int = 40, fmt: str = "csv", split: bool = False) -> str:
  """``num_images`` 12x12 PNGs of a coloured square or bar (4 colour classes) and a captions file.

  Returns the captions file's path. ``split``: add a split column (every fifth row is test).
  """
  os.makedirs(folder, exist_ok=True)
  rng = np.random.default_rng(0)
  rows = []
  for i in range(num_images):
    name, shape = picture_class(i)
    img = draw(i, rng)
    Image.fromarray(img).save(os.path.join(folder, f"img_{i:02d}.png"))
    row = {"image": f"img_{i:02d}.png", "caption": f"a {name} {shape} on black", "label": name}
    if split:
      row["split"] = "test" if i % 5 == 0 else "train"
    rows.append(row)
  path = os.path.join(folder, f"captions.{fmt}")
  with open(path, "w") as f:
    if fmt == "csv":
      f.write(",".join(rows[0]) + "\n" + "".join(",".join(r.values()) + "\n" for r in rows))
    else:
      f.write("".join(json.dumps(r) + "\n" for r in rows))
  return path


def write_open_clip_csv(root, num_images: int = 40, name: str = "train.csv") -> str:
  """open_clip's default CSV layout, as a pandas script writes it for ``CsvDataset``: tab-separated,
  header ``filepath``, ``title`` and an extra ``url`` column, ``index=False``; the ``num_images`` PNGs of
  :func:`write_image_folder` under ``root/images``, their paths relative to ``root`` (where the run is
  launched). Returns the CSV's path.
  """
  import pandas as pd
  images = os.path.join(root, "images")
  write_image_folder(images, num_images=num_images)
  with open(os.path.join(images, "captions.csv")) as f:
    rows = [line.rstrip("\n").split(",") for line in f][1:]
  path = os.path.join(root, name)
  pd.DataFrame({"filepath": [f"images/{image}" for image, _, _ in rows],
                "title": [caption for _, caption, _ in rows],
                "url": [f"https://example.com/{image}" for image, _, _ in rows]}).to_csv(path, sep="\t", index=False)
  return path


def embedding_arrays(n: int = 40, dim_image: int = 6, dim_text: int = 5) -> dict[str, np.ndarray]:
  """Paired embeddings whose text is a fixed linear map of the image plus noise; 4 classes."""
  rng = np.random.default_rng(0)
  labels = np.arange(n) % 4
  image = rng.normal(size=(n, dim_image)).astype(np.float32) + 2.0 * np.eye(4, dim_image)[labels]
  text = image @ rng.normal(size=(dim_image, dim_text)).astype(np.float32) + 0.1 * rng.normal(size=(n, dim_text))
  return {"image": image.astype(np.float32), "text": text.astype(np.float32), "label": labels.astype(np.int64)}


def data_config(**overrides) -> ml_collections.ConfigDict:
  """The ``data`` block of ``configs/clip_files.py:tiny`` with ``overrides``."""
  from configs.clip_files import get_config
  data = get_config("tiny").data
  data.update(overrides)
  return data


def records(n: int):
  """A grain dataset of ``n`` records ``{"id": i, "x": [i, i, i]}``."""
  import grain
  return grain.MapDataset.range(n).map(lambda i: {"id": np.int64(i), "x": np.full(3, i, np.float32)})
