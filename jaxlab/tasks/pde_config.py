"""Every setting of a PDE operator-learning config (``configs/dpot_pde.py``), checked before any data are made.

The ``pde_operator`` task and ``python -m jaxlab.pde.data --config=...`` share :func:`check_config`,
so the data command generates exactly the sets that training loads, after the same checks.
"""

from __future__ import annotations

from typing import Any

import ml_collections
import numpy as np

from jaxlab.errors import check, is_real
from jaxlab.pde.data import DatasetSpec
from jaxlab.tasks.pde_data_checks import check_data_config
from jaxlab.tasks.pde_finetune import check_pretrained_config
from jaxlab.tasks.pde_model import build_model


def check_config(config: ml_collections.ConfigDict, pretrained: dict | None = None
                 ) -> tuple[list[DatasetSpec], int, Any]:
  """``(data set specs, channels, model)`` after checking every setting.

  Nothing is generated or read beyond file headers: the ``data`` block and the window
  (:func:`jaxlab.tasks.pde_data_checks.check_data_config`), the model
  (:func:`jaxlab.tasks.pde_model.build_model`), ``noise_scale`` and, for a fine-tuning run,
  its compatibility with the pre-trained run (:func:`jaxlab.tasks.pde_finetune.check_pretrained_config`).

  Args:
    config: a PDE operator-learning config.
    pretrained: the config saved with ``init_from.workdir``'s newest checkpoint, for a
      fine-tuning run (None: no such check).

  Returns:
    The generated sets' specs ([] for ``data.source="files"``), the model's channel count and the
    model (a flax module, not initialised).

  Raises:
    InputError: the first bad setting, one line naming its key.
  """
  specs, channels = check_data_config(config)
  model = build_model(config, channels)
  noise = config.noise_scale
  check(is_real(noise) and noise >= 0 and np.isfinite(noise),
        f"noise_scale={noise!r} must be finite and >= 0 (denoising noise relative to the input's norm; 0: none)")
  check_pretrained_config(config, channels, pretrained)
  return specs, channels, model
