"""Test set-up: 8 virtual CPU devices, so multi-device code is tested on one machine."""

import os

# Must happen before jax initialises its backends.
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
  os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# 8 device threads per test process, 2 processes on 2 cores: a collective's rendezvous can wait
# longer than XLA:CPU's 40 s abort timeout on a loaded machine (see jaxlab/xla_flags.py).
from jaxlab.xla_flags import add_cpu_collective_timeouts  # noqa: E402

add_cpu_collective_timeouts()

import jax  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def rng() -> jax.Array:
  return jax.random.key(0)


if os.environ.get("JAXLAB_TOLERANCE_LOG"):  # the tolerance audit (tests/tolerance_log.py)
  from tests.tolerance_log import install  # noqa: E402

  install(os.environ["JAXLAB_TOLERANCE_LOG"])
