r"""Generate (or find in the cache) the default pre-training mixture, with progress bars.

  python -m jaxlab.pde.data --trajectories=1000 [--cache_dir=/data/jaxlab] [--sets=ns_fno_nu1e-03]

Run it once before a multi-host job (one process), so the training processes only memory-map.
"""

from __future__ import annotations

import json
import sys

from absl import app, flags

from jaxlab.errors import InputError
from jaxlab.pde.data import dataset_dir, default_mixture, describe, load_or_generate

_TRAJ = flags.DEFINE_integer("trajectories", 1000, "trajectories per data set")
_SEED = flags.DEFINE_integer("seed", 0, "base seed (data set i uses seed + i)")
_CACHE = flags.DEFINE_string("cache_dir", None, "cache root (default: $JAXLAB_DATA_DIR or ~/.cache/jaxlab)")
_SETS = flags.DEFINE_list("sets", None, "names of the sets to make (default: all five)")
_CHUNK = flags.DEFINE_integer("chunk", 32, "trajectories per vmapped chunk (larger on a GPU)")


def main(_):
  try:
    specs = default_mixture(_TRAJ.value, seed=_SEED.value)
    unknown = sorted(set(_SETS.value or ()) - {s.name for s in specs})
    if unknown:
      raise InputError(f"--sets={','.join(_SETS.value)}: unknown {unknown}; known: {[s.name for s in specs]}")
    for spec in specs:
      if _SETS.value is not None and spec.name not in _SETS.value:
        continue
      load_or_generate(spec, _CACHE.value, chunk_size=_CHUNK.value)
      print(json.dumps({**describe(spec), "path": str(dataset_dir(spec, _CACHE.value))}))
  except InputError as e:  # bad input: one line, as jaxlab.main prints it
    sys.stderr.write(f"jaxlab.pde.data: error: {e}\n")
    sys.exit(2)


if __name__ == "__main__":
  app.run(main)
