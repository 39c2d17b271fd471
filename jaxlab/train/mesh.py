"""Device mesh from a config, e.g. ``(("data", -1), ("model", 1))``.

``-1`` takes whatever devices the other axes leave. The mesh spans all processes' devices, so
the same config runs on 1 CPU, 8 virtual CPUs, one GPU host or a multi-host TPU slice.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
from jax.sharding import Mesh

from jaxlab.errors import InputError, is_int

MeshSpec = Sequence[tuple[str, int]]


def _check_spec(spec: MeshSpec) -> None:
  example = "e.g. (('data', -1), ('model', 1))"
  if isinstance(spec, (str, bytes)) or not isinstance(spec, (tuple, list)) or not spec:
    raise InputError(f"mesh must be a non-empty tuple of (axis name, size) pairs, {example}; got {spec!r}")
  for entry in spec:
    if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
      raise InputError(f"mesh must be a tuple of (axis name, size) pairs, {example}; got {spec!r} "
                       f"(entry {entry!r} is not a pair)")
    name, size = entry
    if not isinstance(name, str) or not name:
      raise InputError(f"mesh axis names must be non-empty strings, got {name!r} in {spec!r}")
    if not is_int(size):
      raise InputError(f"mesh axis {name!r} needs an integer size (or -1), got {size!r}")


def resolve_mesh_shape(spec: MeshSpec, num_devices: int) -> tuple[int, ...]:
  """Fills a single ``-1`` axis and checks that the shape uses exactly ``num_devices``."""
  _check_spec(spec)
  sizes = [size for _, size in spec]
  names = [name for name, _ in spec]
  if len(set(names)) != len(names):
    raise InputError(f"mesh axis names must be unique, got {names}")
  bad = [s for s in sizes if s == 0 or s < -1]
  if bad or sizes.count(-1) > 1:
    raise InputError(f"mesh axis sizes must be positive, with at most one -1; got {dict(zip(names, sizes))}")
  known = math.prod(s for s in sizes if s != -1)
  if num_devices % known:
    raise InputError(
        f"mesh {dict(zip(names, sizes))} needs a multiple of {known} devices, "
        f"but there are {num_devices} devices")
  if -1 in sizes:
    sizes[sizes.index(-1)] = num_devices // known
  elif known != num_devices:
    raise InputError(
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
