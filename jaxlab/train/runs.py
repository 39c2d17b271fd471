"""Several runs in one program: a run axis over seeds and swept hyper-parameters.

``config.runs.seeds`` independent seeds (``config.seed``, ``config.seed + 1``, ...) times the
values of ``config.runs.sweep`` (``(("learning_rate", (1e-3, 1e-2)), ...)``, a grid over
optimizer hyper-parameters, injected with ``optax.inject_hyperparams``) give the runs; run
``i`` with seed ``s`` equals a single run with ``config.seed = s`` and those hyper-parameters.
The train state gets a leading ``[runs]`` axis, the step is vmapped over it, and the axis is
sharded over the "data" mesh axis so that 8 devices run 8 runs side by side.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxlab.errors import InputError, check_int
from jaxlab.optim.config import set_hyperparams
from jaxlab.train.state import TrainState


@dataclasses.dataclass(frozen=True)
class Runs:
  """The runs of one program: a seed and hyper-parameter values per run."""
  seeds: tuple[int, ...]
  hparams: dict[str, tuple[float, ...]]  # name -> one value per run

  @property
  def size(self) -> int:
    return len(self.seeds)

  def label(self, i: int) -> str:
    parts = [f"seed={self.seeds[i]}"] + [f"{k}={v[i]:g}" for k, v in self.hparams.items()]
    return ",".join(parts)


def runs_from_config(config: Any) -> Runs | None:
  """``None`` for a single run (no run axis), else the grid ``sweep x seeds`` (seeds inner)."""
  spec = config.get("runs", None)
  num_seeds = spec.get("seeds", 1) if spec is not None else 1
  sweep = tuple(spec.get("sweep", ())) if spec is not None else ()
  check_int(num_seeds, "runs.seeds", 1, "the number of vmapped seeds", got=True)
  if int(config.seed) + num_seeds - 1 > 2**32 - 1:
    raise InputError(f"seed={config.seed} with runs.seeds={num_seeds} runs seeds up to {int(config.seed) + num_seeds - 1}; "
                     "seeds must be <= 2**32 - 1 (a uint32 key)")
  names, values = [], []
  for i, entry in enumerate(sweep):
    if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], str)
            and isinstance(entry[1], (tuple, list)) and len(entry[1]) > 0):
      raise InputError(f"runs.sweep[{i}] must be (hyper-parameter name, (values, ...)), got {entry!r}")
    names.append(entry[0])
    values.append(tuple(float(v) for v in entry[1]))
  if num_seeds == 1 and not names:
    return None
  grid = list(itertools.product(*values)) or [()]
  seeds, hparams = [], {n: [] for n in names}
  for point in grid:
    for s in range(num_seeds):
      seeds.append(int(config.seed) + s)
      for n, v in zip(names, point):
        hparams[n].append(v)
  return Runs(tuple(seeds), {n: tuple(v) for n, v in hparams.items()})


def make_runs_init(init_fn: Callable[[jax.Array], TrainState], runs: Runs) -> Callable[[], TrainState]:
  """``() -> TrainState`` with a leading run axis (jit it with the run-axis shardings)."""
  seeds = jnp.asarray(runs.seeds, jnp.uint32)
  values = {k: jnp.asarray(v, jnp.float32) for k, v in runs.hparams.items()}

  def one(seed, hp):
    state = init_fn(jax.random.key(seed))
    return state.replace(opt_state=set_hyperparams(state.opt_state, hp)) if hp else state

  return lambda: jax.vmap(one)(seeds, values)
