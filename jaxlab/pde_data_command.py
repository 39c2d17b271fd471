r"""Generate (or find in the cache) PDE data sets, with progress bars.

Exactly the data sets a training config reads (same cache keys, so the training run only
memory-maps them)::

  python -m jaxlab.pde.data --config=configs/dpot_pde.py:mixture [--config.data.resolution=32]
  python -m jaxlab.pde.data --config=dpot_pde [--sets=ns_fno_nu1e-03] [--cache_dir=/data/jaxlab]

or the default five-set pre-training mixture (``jaxlab.pde.data.default_mixture``; the defaults
match ``configs/dpot_pde.py:mixture``)::

  python -m jaxlab.pde.data [--trajectories=200] [--resolution=64] [--num_frames=0] [--sets=...]

The command is this module of the entry layer (it reads configs, as ``jaxlab.main`` does);
``jaxlab/pde/data/__main__.py`` runs it, so that ``python -m jaxlab.pde.data`` is where a user
looks for it. Run it once before a multi-host job (one process), so the training processes only memory-map.
Each set prints one JSON line (name, family, shape, cache path). Bad input (an unknown set name,
a config that trains no ``pde_operator`` task, a flag that does not apply) exits 2 with one line
and generates nothing.
"""

from __future__ import annotations

import json
import sys
from typing import Sequence

from absl import app, flags
from ml_collections import config_flags

from jaxlab.config_files import load_config, resolve_config_path
from jaxlab.errors import InputError
from jaxlab.pde.data import DatasetSpec, dataset_dir, describe, load_or_generate
from jaxlab.pde.data.selection import mixture_specs
from jaxlab.tasks.pde_config import config_specs

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "a training config (configs/<name>.py[:arg] or <name>[:arg]): make exactly the data sets it "
    "reads; --config.<key>=<value> overrides apply as in jaxlab.main", lock_config=True)
_TRAJ = flags.DEFINE_integer("trajectories", 200, "default mixture: trajectories per data set")
_RES = flags.DEFINE_integer("resolution", 64, "default mixture: grid points per axis")
_FRAMES = flags.DEFINE_integer("num_frames", 0, "default mixture: frames after the initial state (0: each "
                               "family's own, e.g. FNO's 50 / 30 / 20 for NS nu = 1e-3 / 1e-4 / 1e-5)")
_SEED = flags.DEFINE_integer("seed", 0, "default mixture: base seed (data set i uses seed + i)")
_CACHE = flags.DEFINE_string("cache_dir", None, "cache root (default: the config's data.cache_dir, else "
                             "$JAXLAB_DATA_DIR or ~/.cache/jaxlab)")
_SETS = flags.DEFINE_list("sets", None, "names of the sets to make (default: all of them)")
_CHUNK = flags.DEFINE_integer("chunk", 32, "trajectories per vmapped chunk (larger on a GPU)")

MIXTURE_FLAGS = ("trajectories", "resolution", "num_frames", "seed")  # what --config decides instead
_CONFIG_SPEC = ""  # --config as given (for messages)


def selected_specs() -> list[tuple[DatasetSpec, str | None]]:
  """The data sets the flags ask for, each with its cache dir; nothing is generated yet."""
  if _CONFIG.value is not None:
    given = [f"--{name}" for name in MIXTURE_FLAGS if flags.FLAGS[name].present]
    if given:
      raise InputError(f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply with --config (the "
                       "config decides the data; "
                       "override it with --config.data.<key>=..., e.g. --config.data.resolution=32)")
    chosen = config_specs(_CONFIG.value, _CACHE.value, _CONFIG_SPEC)
  else:
    chosen = [(s, _CACHE.value) for s in mixture_specs(_TRAJ.value, _RES.value, _FRAMES.value, _SEED.value)]
  names = list(dict.fromkeys(s.name for s, _ in chosen))
  if _SETS.value is not None:
    unknown = [n for n in _SETS.value if n not in names]
    if unknown or not _SETS.value:
      raise InputError(f"--sets={','.join(_SETS.value)}: unknown {unknown or 'empty list'}; known: {', '.join(names)}")
    chosen = [(s, d) for s, d in chosen if s.name in _SETS.value]
  return chosen


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    _fail(f"unexpected arguments {argv[1:]}; every setting is a --flag (see --help)")
  try:
    chosen = selected_specs()  # every bad input before anything is generated
    for spec, cache_dir in chosen:
      load_or_generate(spec, cache_dir, chunk_size=_CHUNK.value)
      print(json.dumps({**describe(spec), "path": str(dataset_dir(spec, cache_dir))}), flush=True)
  except InputError as e:  # bad input: one line, as jaxlab.main prints it
    _fail(str(e))


def parse_flags(argv: Sequence[str]) -> list[str]:
  """absl parsing; ``--config`` may be a name (``dpot_pde:mixture``); bad flags end in one line."""
  global _CONFIG_SPEC
  argv = list(argv)
  try:
    for i, a in enumerate(argv):
      if a.startswith("--config="):
        _CONFIG_SPEC = a.split("=", 1)[1]
        path, arg = resolve_config_path(_CONFIG_SPEC)
        load_config(_CONFIG_SPEC)  # a missing file or a rejected argument: one line, before absl's message
        argv[i] = f"--config={path}" + (f":{arg}" if arg else "")
    return flags.FLAGS(argv)
  except InputError as e:
    _fail(str(e))
  except (AttributeError, KeyError):  # an unknown --config.<key>
    keys = [a[len("--config."):].split("=")[0] for a in argv[1:] if a.startswith("--config.")]
    _fail(f"unknown config key(s) among {keys} of --config={_CONFIG_SPEC}")
  except flags.Error as e:  # a value of the wrong type, ...
    _fail(str(e).splitlines()[0])
  raise AssertionError("unreachable")


def _fail(message: str) -> None:
  sys.stderr.write(f"jaxlab.pde.data: error: {message}\n")
  sys.exit(2)


def run() -> None:
  """``python -m jaxlab.pde.data``: parses the flags and runs :func:`main` (absl's ``app.run``)."""
  app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
  run()
