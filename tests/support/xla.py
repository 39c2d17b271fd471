"""The XLA:CPU settings the suite compiles with, and the compile options that give a test the program a
user gets instead.

The suite's programs are tiny and run a few steps, so nearly all of its CPU time is XLA:CPU compiling
them. Two settings halve that: LLVM's optimisation level 0 (it vectorises and inlines nothing), and
XLA:CPU's earlier fusion code generator instead of the MLIR fusion emitters. Measured on
tests/train/test_trainer.py (8 tests, CPU seconds of the whole pytest process, this 2-core machine):
30 at XLA's defaults, 22 at level 0, 17 with both. The operations are the same and round the same
way up to the last bit (a vectorised and a scalar ``exp`` can differ there), which every tolerance of
the suite bounds already (each is derived from the operations' count, tests/tolerances.py); the
fusions, and so a program's temporary buffers, can differ a little. A test about the compiled program
itself (its copies, its buffer sizes) compiles it with :data:`AS_USERS_COMPILE`.

This module imports nothing heavy: ``tests/conftest.py`` reads it before JAX starts.
"""

from __future__ import annotations

#: flag -> (the suite's value, XLA's default).
SPEED_FLAGS = {"xla_backend_optimization_level": (0, 3), "xla_cpu_use_fusion_emitters": (False, True)}

#: ``jax.jit(f).lower(...).compile(AS_USERS_COMPILE)``: XLA's own defaults for :data:`SPEED_FLAGS`,
#: which override the suite's ``XLA_FLAGS`` for that one program.
AS_USERS_COMPILE = {name: default for name, (_, default) in SPEED_FLAGS.items()}


def with_speed_flags(flags: str) -> str:
  """``flags`` (an ``XLA_FLAGS`` value) with each of :data:`SPEED_FLAGS` added that it does not set."""
  for name, (value, _) in SPEED_FLAGS.items():
    if f"--{name}" not in flags:
      flags = f"{flags} --{name}={str(value).lower()}"
  return flags.strip()
