"""Several runs in one program: a run axis over seeds and swept hyper-parameters.

``config.runs.seeds`` independent seeds (``config.seed``, ``config.seed + 1``, ...) times the
values of ``config.runs.sweep`` (``(("learning_rate", (1e-3, 1e-2)), ...)``, a grid over
optimizer hyper-parameters, injected with ``optax.inject_hyperparams``) give the runs
(:class:`Runs`, made by ``jaxlab.experiment.runs_from_config``); run ``i`` with seed ``s``
equals a single run with ``config.seed = s`` and those hyper-parameters.
The train state gets a leading ``[runs]`` axis, the step is vmapped over it, and the axis is
sharded over the "data" mesh axis so that 8 devices run 8 runs side by side.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

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


def make_runs_init(init_fn: Callable[[jax.Array], TrainState], runs: Runs) -> Callable[[], TrainState]:
  """``() -> TrainState`` with a leading run axis (jit it with the run-axis shardings)."""
  seeds = jnp.asarray(runs.seeds, jnp.uint32)
  values = {k: jnp.asarray(v, jnp.float32) for k, v in runs.hparams.items()}

  def one(seed, hp):
    state = init_fn(jax.random.key(seed))
    return state.replace(opt_state=set_hyperparams(state.opt_state, hp)) if hp else state

  return lambda: jax.vmap(one)(seeds, values)
