"""What a ``clip_files`` run trains on, as a small JSON value compared on resume (``Pairs.files``).

The config names the captions file and the image folder, not what they hold: a caption edited or
an image replaced between runs would be used on resume without a word. The fingerprint records
the captions file's sha256 (it is read whole anyway), the number of pairs, and the images' count
and total size (a stat each, as the existence check costs anyway; hashing every image would read
the whole data set). Embeddings: each file's size and the sha256 of its ends
(``jaxlab.data_fingerprint``) and the table's shapes.
"""

from __future__ import annotations

import os
from typing import Any

from jaxlab.ot_clip.data.captions import CaptionTable
from jaxlab.ot_clip.data.embeddings import EmbeddingTable
from jaxlab.data_fingerprint import file_digest, file_sha256


def captions_fingerprint(table: CaptionTable) -> dict[str, Any]:
  """The fingerprint of an image-caption table: captions file, pairs, images (see the module docstring)."""
  images = sorted(set(os.path.realpath(p) for p in table.images))
  return {"captions": {"size": os.path.getsize(table.file),
                       "sha256": file_sha256(table.file)},
          "pairs": len(table.images),
          "images": {"count": len(images), "size": sum(os.path.getsize(p) for p in images)}}


def embeddings_fingerprint(table: EmbeddingTable) -> dict[str, Any]:
  """The fingerprint of paired embeddings: each file (a folder's ``.npy`` files) and the arrays' shapes."""
  path = table.file
  files = ([os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".npy")] if os.path.isdir(path)
           else [path])
  return {"embeddings": {os.path.basename(f): file_digest(f) for f in files},
          "pairs": len(table), "image": [int(s) for s in table.image.shape], "text": [int(s) for s in table.text.shape]}
