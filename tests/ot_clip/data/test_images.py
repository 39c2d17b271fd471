"""Pixel depths: 16-bit and float images decode to their values in [0, 1], not Pillow's 8-bit clip."""

import numpy as np
from PIL import Image

from jaxlab.ot_clip.data.images import decode_image

# a 4x4 ramp over the whole range, written as the upstream tools write it
RAMP = np.linspace(0.0, 1.0, 16, dtype=np.float32).reshape(4, 4)


def test_a_16_bit_png_scales_by_65535(tmp_path):
  path = str(tmp_path / "depth.png")
  image = Image.fromarray(np.round(RAMP * 65535).astype(np.uint16))
  assert image.mode == "I;16"
  image.save(path)
  out = decode_image(path, 4, "captions.csv row 0 (line 2)")
  assert out.shape == (4, 4, 3) and out.dtype == np.float32
  np.testing.assert_allclose(out, np.repeat(RAMP[:, :, None], 3, axis=2), atol=1e-5)  # not all ones
  small = decode_image(path, 2, "row 0")  # resized in float: a mean of ramp values, in (0, 1)
  assert small.shape == (2, 2, 3) and 0.0 < small.min() < small.max() < 1.0


def test_a_float_tiff_keeps_its_values(tmp_path):
  path = str(tmp_path / "depth.tiff")
  image = Image.fromarray(RAMP)
  assert image.mode == "F"
  image.save(path)
  out = decode_image(path, 4, "row 0")
  np.testing.assert_allclose(out[:, :, 1], RAMP, atol=1e-6)  # not all zeros
  assert decode_image(path, 8, "row 0").shape == (8, 8, 3)


def test_8_bit_images_are_unchanged(tmp_path):
  path = str(tmp_path / "rgb.png")
  pixels = np.arange(48, dtype=np.uint8).reshape(4, 4, 3) * 5
  Image.fromarray(pixels).save(path)
  np.testing.assert_array_equal(decode_image(path, 4, "row 0"), pixels.astype(np.float32) / 255.0)
