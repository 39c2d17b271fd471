"""Every setting of a PDE operator-learning config (``configs/dpot_pde.py``), checked before any data are made.

The ``pde_operator`` task and ``python -m jaxlab.pde.data --config=...`` share :func:`check_config`
(the command through :func:`config_specs`), so the data command generates exactly the sets that
training loads, after the same checks.
"""

from __future__ import annotations

from typing import Any

import ml_collections
import numpy as np

from jaxlab.errors import InputError, check, is_real
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


def config_specs(config: Any, cache_dir: str | None, given_as: str = "") -> list[tuple[DatasetSpec, str | None]]:
  """``(spec, cache dir)`` of every data set ``config`` reads, after the task's own checks.

  ``config`` is one ``pde_operator`` experiment or a suite (``experiments``) with some; the specs
  come from :func:`jaxlab.tasks.pde_config.check_config` (the ``pde_operator`` task's checks), so
  they are the ones training loads;
  runs on the field's files (``data.source = "files"``) generate nothing and are left out. A set read by two experiments is listed once. ``given_as``: the ``--config`` value, for messages.
  """
  if "experiments" in config:
    runs = [(f"experiments.{name}: ", sub) for name, sub in config.experiments.items()
            if sub.get("task", None) == "pde_operator"]
    tasks = sorted({str(sub.get("task", None)) for sub in config.experiments.values()})
  else:
    runs = [("", config)] if config.get("task", None) == "pde_operator" else []
    tasks = [str(config.get("task", None))]
  if not runs:
    raise InputError(f"--config={given_as}: trains task(s) {tasks}, none is "
                     "'pde_operator'; it reads no generated PDE data (use a config such as configs/dpot_pde.py)")
  generated = [(where, sub) for where, sub in runs if sub.data.get("source", "generated") != "files"]
  if not generated:
    raise InputError(f"--config={given_as}: reads the field's files (data.source='files'), no generated PDE data; "
                     "nothing to generate")
  runs = generated
  out, seen = [], set()
  for where, sub in runs:
    try:
      specs = check_config(sub)[0]
    except InputError as e:
      raise InputError(f"{where}{e}") from None
    folder = cache_dir if cache_dir is not None else (sub.data.get("cache_dir", "") or None)
    for spec in specs:
      if (spec.cache_key(), folder) not in seen:
        seen.add((spec.cache_key(), folder))
        out.append((spec, folder))
  return out
