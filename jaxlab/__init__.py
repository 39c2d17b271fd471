"""jaxlab: four ICML 2024 methods as JAX components that compose into one sharded train step.

Submodules are imported lazily by the user (``from jaxlab import optim``); importing
``jaxlab`` itself pulls in nothing heavier than JAX.
"""

__version__ = "0.1.0"


def load_run(workdir, step=None, *, seed_index=None, opt_state=False, mesh=None):
  """A trained run back in hand; see :func:`jaxlab.load.load_run` (imported on first use)."""
  from jaxlab.load import load_run as _load_run  # noqa: PLC0415 - keeps ``import jaxlab`` light
  return _load_run(workdir, step, seed_index=seed_index, opt_state=opt_state, mesh=mesh)
