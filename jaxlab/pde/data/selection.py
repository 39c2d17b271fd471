"""The default PDE mixture with the data command's settings (``python -m jaxlab.pde.data`` without ``--config``).

Importable without the command's flags (``jaxlab.main`` defines ``--config`` too); the sets a training
config reads are :func:`jaxlab.tasks.pde_config.config_specs`.
"""

from __future__ import annotations

from jaxlab.errors import check_int
from jaxlab.pde.data.spec import DatasetSpec, dataset_spec, default_mixture


def mixture_specs(trajectories: int, resolution: int, num_frames: int, seed: int) -> list[DatasetSpec]:
  """The default mixture with these settings (``num_frames`` 0: each family's own frame count).

  Returns:
    The five :class:`DatasetSpec` of :func:`jaxlab.pde.data.default_mixture`.
  """
  specs = default_mixture(trajectories, seed=seed, resolution=resolution)
  if not num_frames:
    return specs
  check_int(num_frames, "--num_frames", 1, "or 0: each family's own")
  return [dataset_spec(s.family, s.num_trajectories, seed=s.seed, resolution=s.resolution, name=s.name,
                       **{**s.param_dict, "num_frames": num_frames}) for s in specs]
