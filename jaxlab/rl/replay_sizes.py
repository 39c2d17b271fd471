"""The size checks both replay buffers share (``make_replay`` and ``make_frame_replay``), and
whether a buffer fits in memory before it is allocated."""

from __future__ import annotations

import os
from typing import Mapping, Sequence

import jax

from jaxlab.errors import InputError, check, check_int


def checked_sizes(capacity: int, num_envs: int, batch_size: int, min_size: int | None,
                  names: Mapping[str, str] | None, **more: int) -> tuple[dict[str, str], int]:
  """Checks the sizes every replay takes; returns the error-message names and ``min_size``.

  Args:
    capacity, num_envs, batch_size: ints >= 1; ``capacity`` below 2**31 (int32 indices).
    min_size: an int >= 1, or None for ``batch_size``.
    names: what messages call each argument (e.g. ``{"capacity": "dqn.replay_capacity"}``).
    **more: further sizes that must be ints >= 1 (e.g. ``stack_size``).

  Returns:
    ``(n, min_size)``: ``n[arg]`` the name to use in a message, ``min_size`` resolved.
  """
  n = {k: k for k in ("capacity", "num_envs", "batch_size", "min_size", *more)}
  n.update(names or {})
  for name, value in (("capacity", capacity), ("num_envs", num_envs), ("batch_size", batch_size),
                      *more.items()):
    check_int(value, n[name])
  check(capacity < 2**31, f"{n['capacity']}={capacity}; must be < 2**31 (the buffer's indices are int32)")
  min_size = batch_size if min_size is None else min_size
  check_int(min_size, n["min_size"])
  return n, min_size


def host_memory() -> tuple[int, str] | None:
  """``(bytes, what they are)``: the host's available memory (``MemAvailable``), else its physical
  memory; None where neither can be read."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024, "the host's available memory (MemAvailable)"
  except (OSError, ValueError, IndexError):
    pass
  try:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "the host's physical memory"
  except (OSError, ValueError, AttributeError):
    return None


def device_memory(device: jax.Device) -> tuple[int, str] | None:
  """``(bytes, what they are)`` a buffer on ``device`` can use: host memory for a CPU device, else
  the device's ``memory_stats()["bytes_limit"]``; None where the backend does not say."""
  if device.platform == "cpu":
    return host_memory()
  try:
    stats = device.memory_stats()
  except Exception:  # noqa: BLE001 -- backends without memory stats raise various errors; then nothing is known
    return None
  limit = (stats or {}).get("bytes_limit")
  return (int(limit), f"{device.device_kind} memory (memory_stats bytes_limit)") if limit else None


def check_fits_memory(nbytes: int, what: str, fix: str, devices: Sequence[jax.Device] | None = None) -> None:
  """InputError unless ``nbytes`` fit in the memory of each of ``devices``, checked before allocating.

  A buffer too large for memory would otherwise make the first allocation swap or hang without a
  word. Where a device's memory is unknown it is not checked.

  Args:
    nbytes: the bytes one device must hold.
    what: what needs them, as the message starts (e.g. ``"dqn.replay_capacity=10000000 (...)"``).
    fix: what to change, as the message ends.
    devices: where the buffer lives (default: JAX's first device).

  Raises:
    InputError: ``"<what> needs N GB (n bytes), but <memory> has M GB (m bytes); <fix>"``.
  """
  for device in devices or jax.devices()[:1]:
    known = device_memory(device)
    if known is not None and nbytes > known[0]:
      have, source = known
      raise InputError(f"{what} needs {nbytes / 1e9:.3g} GB ({nbytes} bytes), but {source} is "
                       f"{have / 1e9:.3g} GB ({have} bytes); {fix}")
