"""One image file -> a float32 [size, size, 3] array in [0, 1] (Pillow: decode, RGB, bilinear resize).

Every image becomes RGB (grayscale and palette images are converted, an alpha channel is
dropped) and is resized to a square without keeping the aspect ratio, as small CLIP-style
encoders take a fixed square input. A file Pillow cannot decode is an ``InputError`` naming the
file and its row; it is never skipped.

Pixel depth: 8-bit images are scaled by 255; 16-bit grayscale (PNG, TIFF, PGM) by 65535; a
float image (TIFF mode ``F``) is taken as it is and must already lie in [0, 1]: one outside is
refused (naming the file and its range) rather than clipped, as a float image in [0, 255] or in
[-1, 1] would clip to a wrong picture. 32-bit and signed integer images have no fixed range and
are refused. Pillow's RGB conversion would turn a 16-bit image into all ones and a float one
into all zeros, so these never go through it.
"""

from __future__ import annotations

import io

import numpy as np

from jaxlab.errors import InputError
from jaxlab.registry import optional_imports

with optional_imports(__name__):
  from PIL import Image

SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
_SIXTEEN_BIT_AS_I = ("PNG", "PPM")  # formats whose Pillow mode "I" holds 16-bit values (0..65535)


def decode_image(path: str, size: int, where: str, data: bytes | None = None) -> np.ndarray:
  """Decodes ``path`` to float32 ``[size, size, 3]`` in [0, 1].

  Args:
    path: the image file (with ``data``: its name, for messages).
    size: the side of the square output, in pixels.
    where: which row of which file named it (e.g. ``"captions.csv row 7 (line 9)"``), for messages.
    data: the file's bytes, when they are not at ``path`` (a tar shard's member).

  Returns:
    The image, float32 ``[size, size, 3]`` in [0, 1].

  Raises:
    InputError: the file cannot be decoded (one line with ``where``, the file and Pillow's reason),
      or its pixels have no [0, 1] reading (a float image outside [0, 1], 32-bit integers).
  """
  try:
    with Image.open(path if data is None else io.BytesIO(data)) as image:
      image.load()  # decodes the whole file: a truncated one fails here
      gray = _high_depth_gray(image, path, where)
      rgb = image.convert("RGB") if gray is None else None
  except InputError:
    raise
  except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
    raise InputError(f"{where}: image {path!r} cannot be decoded ({type(e).__name__}: {e}); allowed: an image "
                     "file Pillow can read (PNG, JPEG, BMP, GIF, TIFF, WebP, ...)") from None
  if gray is not None:
    return _resized_gray(gray, size)
  if rgb.size != (size, size):
    rgb = rgb.resize((size, size), Image.Resampling.BILINEAR)
  return np.asarray(rgb, dtype=np.float32) / 255.0


def _high_depth_gray(image: Image.Image, path: str, where: str) -> np.ndarray | None:
  """A 16-bit or float grayscale image as float32 ``[h, w]`` in [0, 1]; None for 8-bit modes."""
  mode = image.mode
  if mode in SIXTEEN_BIT_MODES or (mode == "I" and image.format in _SIXTEEN_BIT_AS_I):
    return np.asarray(image, dtype=np.float32) / 65535.0
  if mode == "F":
    values = np.asarray(image, dtype=np.float32)
    low, high = float(np.min(values)), float(np.max(values))
    if not (np.isfinite(values).all() and low >= 0.0 and high <= 1.0):
      raise InputError(f"{where}: image {path!r} is a float image with values in [{low:g}, {high:g}]; allowed: "
                       "float pixels in [0, 1] (rescale it, or save it as an 8- or 16-bit image)")
    return values
  if mode.startswith("I"):
    raise InputError(f"{where}: image {path!r} has Pillow mode {mode!r} (32-bit or signed integer pixels, which "
                     "have no fixed range); allowed: 8- or 16-bit unsigned images, or float images in [0, 1]")
  return None


def _resized_gray(gray: np.ndarray, size: int) -> np.ndarray:
  """Float ``[h, w]`` in [0, 1] -> ``[size, size, 3]`` (bilinear, in float: no 8-bit rounding)."""
  if gray.shape != (size, size):
    gray = np.asarray(Image.fromarray(gray).resize((size, size), Image.Resampling.BILINEAR), dtype=np.float32)
  # bilinear weights are a convex combination, so only float rounding can leave [0, 1]
  return np.repeat(np.clip(gray, 0.0, 1.0)[:, :, None], 3, axis=2)
