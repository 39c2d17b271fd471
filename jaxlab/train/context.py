"""What the trainer resolved before it builds a task: the mesh, the runs, the devices, the processes.

A task factory reads these from its :class:`TaskContext` instead of resolving them again from the
config (``config.mesh`` against ``jax.device_count()``, ``config.runs``), so the task is built on
exactly the mesh and runs the trainer uses. The trainer builds one context per run
(``jaxlab.train.trainer.make_train_setup``); ``jaxlab.load_run`` builds one for the device it loads
onto.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import ml_collections

from jaxlab.train.mesh import make_mesh
from jaxlab.train.runs import Runs, runs_from_config


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

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict, devices: Sequence[jax.Device] | None = None, *,
                  mesh: jax.sharding.Mesh | None = None) -> TaskContext:
    """The context of ``config`` on ``devices``: its mesh first, then its runs.

    Args:
      config: an experiment config (``mesh``, ``runs``, ``seed``).
      devices: devices for the mesh (default: all).
      mesh: the mesh, if already made (its devices are then the context's devices).

    Returns:
      A :class:`TaskContext`.

    Raises:
      InputError: a mesh that does not fit the devices, or bad ``runs`` keys (one line each).
    """
    mesh = make_mesh(config.mesh, devices) if mesh is None else mesh
    return cls(mesh=mesh, runs=runs_from_config(config), devices=tuple(mesh.devices.flat),
               process_index=jax.process_index(), process_count=jax.process_count())
