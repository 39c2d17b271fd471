"""The XLA:CPU settings the suite compiles with, and the compile options that give a test the program a
user gets instead.

The suite's programs are tiny and run a few steps, so nearly all of its CPU time is XLA:CPU compiling
them. Two settings halve that: LLVM's optimisation level 0 (it vectorises and inlines nothing), and
XLA:CPU's earlier fusion code generator instead of the MLIR fusion emitters. Measured on
tests/experiment/test_trainer.py (8 tests, CPU seconds of the whole pytest process, this 2-core machine):
30 at XLA's defaults, 22 at level 0, 17 with both. The operations are the same and round the same
way up to the last bit (a vectorised and a scalar ``exp`` can differ there), which every tolerance of
the suite bounds already (each is derived from the operations' count, tests/support/tolerances.py). The LLVM
level leaves the program (its HLO and buffers) as it is; the fusion code generator fuses a little
differently, so a program's temporary buffers can differ. A test about the compiled program itself
(its copies, its buffer sizes) compiles it with :data:`AS_USERS_COMPILE`.

This module imports nothing heavy: ``tests/conftest.py`` reads it before JAX starts.
"""

from __future__ import annotations

#: flag -> (the suite's value, XLA's default).
SPEED_FLAGS = {"xla_backend_optimization_level": (0, 3), "xla_cpu_use_fusion_emitters": (False, True)}

#: ``jax.jit(f).lower(...).compile(AS_USERS_COMPILE)``: the program a user gets, its HLO, fusions and
#: buffers (these options override the suite's ``XLA_FLAGS`` for that one compile). The fusion code
#: generator is XLA's default; the LLVM level stays the suite's, since it changes only the machine code.
AS_USERS_COMPILE = {"xla_cpu_use_fusion_emitters": SPEED_FLAGS["xla_cpu_use_fusion_emitters"][1]}


def with_speed_flags(flags: str) -> str:
  """``flags`` (an ``XLA_FLAGS`` value) with each of :data:`SPEED_FLAGS` added that it does not set."""
  for name, (value, _) in SPEED_FLAGS.items():
    if f"--{name}" not in flags:
      flags = f"{flags} --{name}={str(value).lower()}"
  return flags.strip()
