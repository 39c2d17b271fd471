"""The context a task is built in, from a config: the mesh over the devices, then the runs.

Built once per run, by the config layer: the trainer (``make_train_setup``) and ``jaxlab.load_run``
both build a :class:`~jaxlab.train.context.TaskContext` here, and the task and the loop read it
instead of the config's ``mesh`` and ``runs``.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import jax

from jaxlab.errors import InputError, check_int
from jaxlab.train.context import TaskContext
from jaxlab.train.mesh import make_mesh
from jaxlab.train.runs import Runs


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


def task_context(config: Any, devices: Sequence[jax.Device] | None = None, *,
                 mesh: jax.sharding.Mesh | None = None) -> TaskContext:
  """The context of ``config`` on ``devices``: its mesh first, then its runs.

  Args:
    config: an experiment config (``mesh``, ``runs``, ``seed``).
    devices: devices for the mesh (default: all).
    mesh: the mesh, if already made (its devices are then the context's devices).

  Returns:
    A :class:`~jaxlab.train.context.TaskContext`.

  Raises:
    InputError: a mesh that does not fit the devices, or bad ``runs`` keys (one line each).

  Examples:
    >>> import jax
    >>> from jaxlab.experiment import task_context, trainer_config
    >>> ctx = task_context(trainer_config(mesh=(("data", 1),)), jax.devices()[:1])
    >>> dict(ctx.mesh.shape), ctx.runs
    ({'data': 1}, None)
  """
  mesh = make_mesh(config.mesh, devices) if mesh is None else mesh
  return TaskContext(mesh=mesh, runs=runs_from_config(config), devices=tuple(mesh.devices.flat),
                     process_index=jax.process_index(), process_count=jax.process_count())
