"""The size checks both replay buffers share (``make_replay`` and ``make_frame_replay``)."""

from __future__ import annotations

from typing import Mapping

from jaxlab.errors import check, check_int


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
