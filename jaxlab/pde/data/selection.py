"""Which PDE data sets a training config, or the default mixture, asks for.

The logic of ``python -m jaxlab.pde.data`` without its command-line flags, so that it can be
imported beside ``jaxlab.main`` (both define ``--config``).
"""

from __future__ import annotations

from typing import Any

from jaxlab.errors import InputError
from jaxlab.pde.data.spec import DatasetSpec, dataset_spec, default_mixture


def mixture_specs(trajectories: int, resolution: int, num_frames: int, seed: int) -> list[DatasetSpec]:
  """The default mixture with these settings (``num_frames`` 0: each family's own frame count).

  Returns:
    The five :class:`DatasetSpec` of :func:`jaxlab.pde.data.default_mixture`.
  """
  specs = default_mixture(trajectories, seed=seed, resolution=resolution)
  if not num_frames:
    return specs
  if not isinstance(num_frames, int) or num_frames < 1:
    raise InputError(f"--num_frames={num_frames!r} must be an int >= 1 (or 0: each family's own)")
  return [dataset_spec(s.family, s.num_trajectories, seed=s.seed, resolution=s.resolution, name=s.name,
                       **{**s.param_dict, "num_frames": num_frames}) for s in specs]


def config_specs(config: Any, cache_dir: str | None, given_as: str = "") -> list[tuple[DatasetSpec, str | None]]:
  """``(spec, cache dir)`` of every data set ``config`` reads, after the task's own checks.

  ``config`` is one ``pde_operator`` experiment or a suite (``experiments``) with some; the specs
  come from :func:`jaxlab.pde.operator_config.check_config` (the ``pde_operator`` task's checks), so
  they are the ones training loads;
  runs on the field's files (``data.source = "files"``) generate nothing and are left out. A set read by two experiments is listed once. ``given_as``: the ``--config`` value, for messages.
  """
  from jaxlab.pde.operator_config import check_config  # noqa: PLC0415 - imports the models; --config only
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
