"""Test set-up: 8 virtual CPU devices, so multi-device code is tested on one machine."""

import os

# Must happen before jax initialises its backends.
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
  _flags += " --xla_force_host_platform_device_count=8"
# Compiled for compile time, not run time (the flags and why: tests/support/xla.py); a value the
# user set is kept. The CLI, worker and notebook processes the tests start inherit them.
from tests.support.xla import with_speed_flags  # noqa: E402

os.environ["XLA_FLAGS"] = with_speed_flags(_flags)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One persistent compilation cache for the test processes of a run (the xdist workers inherit it
# from the controller, and so do the CLI and notebook subprocesses they start): many tests compile
# the same small programs again (a resumed run, 1 vs 8 devices, the CLI after the library), and a
# hit loads the executable XLA compiled the first time, so results are unchanged. It saved ~35% of
# the DQN resume/vmap tests' time. A cache the user set is used as it is; ours is removed at exit.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ and "PYTEST_XDIST_WORKER" not in os.environ:
  import atexit  # noqa: E402
  import shutil  # noqa: E402
  import tempfile  # noqa: E402

  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxlab-tests-compile-cache-")
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
  atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], True)

# 8 device threads per test process, 2 processes on 2 cores: a collective's rendezvous can wait
# longer than XLA:CPU's 40 s abort timeout on a loaded machine (see jaxlab/xla_flags.py).
from jaxlab.xla_flags import add_cpu_collective_timeouts  # noqa: E402

add_cpu_collective_timeouts()

import jax  # noqa: E402
import pytest  # noqa: E402

from tests.support.cli import Cli  # noqa: E402


@pytest.fixture
def rng() -> jax.Array:
  return jax.random.key(0)


@pytest.fixture(scope="session")
def cli():
  """Runs jaxlab's commands as a user runs them (``tests/support/cli.py``): every test that starts
  ``python -m jaxlab.main``, a guide's shell block or a worker script uses it."""
  return Cli()


if os.environ.get("JAXLAB_TOLERANCE_LOG"):  # the tolerance audit (tests/support/tolerance_log.py)
  from tests.support.tolerance_log import install  # noqa: E402

  install(os.environ["JAXLAB_TOLERANCE_LOG"])
