"""What the trainer resolved before it builds a task: the mesh, the runs, the devices, the processes.

A task factory reads these from its :class:`TaskContext` instead of resolving them again from the
config (``config.mesh`` against ``jax.device_count()``, ``config.runs``), so the task is built on
exactly the mesh and runs the trainer uses. The config layer builds one context per run, once
(``jaxlab.experiment.task_context``), for the trainer and for ``jaxlab.load_run`` alike.
"""

from __future__ import annotations

import dataclasses

import jax

from jaxlab.train.runs import Runs


@dataclasses.dataclass(frozen=True)
class TaskContext:
  """What a task factory gets beside its config: what the trainer resolved.

  Attributes:
    mesh: the device mesh the run trains on (``config.mesh`` over ``devices``).
    runs: the vmapped runs (``config.runs``), or None for a single run.
    devices: the devices of the mesh.
    process_index: this process's index (``jax.process_index()``).
    process_count: the number of processes (``jax.process_count()``); each process builds its
      own share of the host data.
  """
  mesh: jax.sharding.Mesh
  runs: Runs | None
  devices: tuple[jax.Device, ...]
  process_index: int
  process_count: int
