"""One image file -> a float32 [size, size, 3] array in [0, 1] (Pillow: decode, RGB, bilinear resize).

Every image becomes RGB (grayscale and palette images are converted, an alpha channel is
dropped) and is resized to a square without keeping the aspect ratio, as small CLIP-style
encoders take a fixed square input. A file Pillow cannot decode is an ``InputError`` naming the
file and its row; it is never skipped.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from jaxlab.errors import InputError


def decode_image(path: str, size: int, where: str) -> np.ndarray:
  """Decodes ``path`` to float32 ``[size, size, 3]`` in [0, 1].

  Args:
    path: the image file.
    size: the side of the square output, in pixels.
    where: which row of which file named it (e.g. ``"captions.csv row 7 (line 9)"``), for messages.

  Raises:
    InputError: the file cannot be decoded (one line with ``where``, the file and Pillow's reason).
  """
  try:
    with Image.open(path) as image:
      rgb = image.convert("RGB")  # decodes the whole file: a truncated one fails here
  except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
    raise InputError(f"{where}: image {path!r} cannot be decoded ({type(e).__name__}: {e}); allowed: an image "
                     "file Pillow can read (PNG, JPEG, BMP, GIF, TIFF, WebP, ...)") from None
  if rgb.size != (size, size):
    rgb = rgb.resize((size, size), Image.Resampling.BILINEAR)
  return np.asarray(rgb, dtype=np.float32) / 255.0
