"""XLA flag defaults that must be set before JAX starts its backends.

XLA:CPU runs each virtual device of ``--xla_force_host_platform_device_count`` as a thread, and a
collective (all-reduce, all-gather) waits for all of them in a rendezvous that aborts the whole
process after ``--xla_cpu_collective_call_terminate_timeout_seconds`` (40 s by default):
``rendezvous.cc:161 Termination timeout for all reduce ... only 7 of them arrived on time``. On a
loaded machine (8 virtual devices on 2 cores, beside other jobs) one device thread can be starved
that long, so a correct program dies at random. Raising the timeout removes the abort; a real
deadlock still ends, just later. The flags only affect CPU collectives.
"""

from __future__ import annotations

import os

#: The flags (name without ``--`` -> seconds) that :func:`add_cpu_collective_timeouts` adds.
CPU_COLLECTIVE_TIMEOUTS = {
    "xla_cpu_collective_call_terminate_timeout_seconds": 900,
    "xla_cpu_collective_call_warn_stuck_timeout_seconds": 120,
}


def add_cpu_collective_timeouts(environ: dict | None = None) -> str:
  """Adds the CPU collective timeouts to ``XLA_FLAGS`` unless the user set them; returns the flags."""
  env = os.environ if environ is None else environ
  flags = env.get("XLA_FLAGS", "")
  for name, value in CPU_COLLECTIVE_TIMEOUTS.items():
    if f"--{name}" not in flags:
      flags = f"{flags} --{name}={value}".strip()
  env["XLA_FLAGS"] = flags
  return flags
