"""Locally generated 2-D PDE data for DPOT-style multi-data-set pre-training (no downloads).

Families (:data:`FAMILIES`): FNO's forced Navier-Stokes (three viscosities), Kolmogorov flow
and PDEBench's diffusion-reaction, solved with exponax. Generation is batched and cached on disk
(:func:`load_or_generate`); batches are pure functions of (seed, step) (:func:`mixture_batch`)::

  specs = default_mixture(num_trajectories=200)
  datasets = [load_dataset(s) for s in specs]           # generates once, then memory-maps
  batch = mixture_batch(datasets, [1, 1, 1, 1, 1], seed=0, step=k, global_batch_size=256,
                        rows=my_rows, t_in=10, t_out=1)   # set i drawn w.p. ~ n_train_i x weight_i

The field's own files (DPOT's, PDEBench's, The Well's HDF5 layouts) feed the same loader through
:mod:`jaxlab.pde.data.files`; sets on different grids are resampled to one
(:mod:`~jaxlab.pde.data.resample`, ``mixture_batch(..., resolution=128)``).
"""

from jaxlab.pde.data.families import FAMILIES, FNO_VISCOSITIES, Family, get_family
from jaxlab.pde.data.generator import generate
from jaxlab.pde.data.loader import (MIXTURE_RULES, MixturePlan, PDEDataset, load_dataset, make_dataset,
                                    mixture_batch, mixture_plan, mixture_probabilities, rollout_eval_data,
                                    served_grid, windows)
from jaxlab.pde.data.spec import (DPOT_T_TEST, DatasetSpec, dataset_spec, default_mixture, describe,
                                  dpot_t_test, fno_navier_stokes)
from jaxlab.pde.data.store import ENV_VAR, cache_root, dataset_dir, load_cached, load_or_generate

__all__ = [
    "DPOT_T_TEST", "DatasetSpec", "ENV_VAR", "FAMILIES", "FNO_VISCOSITIES", "Family", "MIXTURE_RULES",
    "MixturePlan", "PDEDataset", "cache_root", "dataset_dir", "dataset_spec", "default_mixture", "describe",
    "dpot_t_test", "fno_navier_stokes", "generate", "get_family", "load_cached", "load_dataset",
    "load_or_generate", "make_dataset", "mixture_batch", "mixture_plan", "mixture_probabilities",
    "rollout_eval_data", "served_grid", "windows",
]
