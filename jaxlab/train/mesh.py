"""Device mesh from a config, e.g. ``(("data", -1), ("model", 1))``.

``-1`` takes whatever devices the other axes leave. The mesh spans all processes' devices, so
the same config runs on 1 CPU, 8 virtual CPUs, one GPU host or a multi-host TPU slice.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
from jax.sharding import Mesh

MeshSpec = Sequence[tuple[str, int]]


def resolve_mesh_shape(spec: MeshSpec, num_devices: int) -> tuple[int, ...]:
  """Fills a single ``-1`` axis and checks that the shape uses exactly ``num_devices``."""
  sizes = [int(size) for _, size in spec]
  names = [name for name, _ in spec]
  if len(set(names)) != len(names):
    raise ValueError(f"mesh axis names must be unique, got {names}")
  bad = [s for s in sizes if s == 0 or s < -1]
  if bad or sizes.count(-1) > 1:
    raise ValueError(f"mesh axis sizes must be positive, with at most one -1; got {dict(zip(names, sizes))}")
  known = math.prod(s for s in sizes if s != -1)
  if num_devices % known:
    raise ValueError(
        f"mesh {dict(zip(names, sizes))} needs a multiple of {known} devices, "
        f"but there are {num_devices} devices")
  if -1 in sizes:
    sizes[sizes.index(-1)] = num_devices // known
  elif known != num_devices:
    raise ValueError(
        f"mesh {dict(zip(names, sizes))} uses {known} devices, but there are {num_devices} devices "
        "(use -1 on one axis to take the rest)")
  return tuple(sizes)


def make_mesh(spec: MeshSpec, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """Builds a ``Mesh`` from ``((axis_name, size), ...)``; sizes must multiply to the device count."""
  devices = list(jax.devices() if devices is None else devices)
  shape = resolve_mesh_shape(spec, len(devices))
  names = tuple(name for name, _ in spec)
  return jax.make_mesh(shape, names, devices=devices,
                       axis_types=(jax.sharding.AxisType.Auto,) * len(names))
