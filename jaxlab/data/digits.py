"""scikit-learn's 8x8 handwritten digits (1797 images, shipped inside the package; no download)."""

from __future__ import annotations

import numpy as np

from jaxlab.errors import check_range
from jaxlab.registry import optional_imports


def load_digits_split(test_fraction: float = 0.2, seed: int = 0, images: bool = False
                      ) -> dict[str, np.ndarray]:
  """Train/test split of the digits, pixels scaled to [0, 1].

  Returns ``x_train, y_train, x_test, y_test``; ``x`` is ``[N, 64]`` float32, or
  ``[N, 8, 8, 1]`` with ``images=True``; ``y`` is int32 in ``0..9``.
  """
  with optional_imports(f"{__name__}.load_digits_split"):
    from sklearn.datasets import load_digits
  check_range(test_fraction, "test_fraction", 0, 1, low_open=True, high_open=True, got=True)
  data = load_digits()
  x = (data.data / 16.0).astype(np.float32)
  y = data.target.astype(np.int32)
  perm = np.random.default_rng(seed).permutation(len(x))
  n_test = int(round(test_fraction * len(x)))
  test, train = perm[:n_test], perm[n_test:]
  if images:
    x = x.reshape(-1, 8, 8, 1)
  return {"x_train": x[train], "y_train": y[train], "x_test": x[test], "y_test": y[test]}
