"""jaxlab: four ICML 2024 methods as JAX components that compose into one sharded train step.

Submodules are imported lazily by the user (``from jaxlab import optim``); importing
``jaxlab`` itself pulls in nothing heavier than JAX. ``jaxlab.load_run`` is
:func:`jaxlab.load.load_run`, imported on first use.
"""

__version__ = "0.1.0"

__all__ = ["load_run"]


def __getattr__(name: str) -> object:
  if name == "load_run":  # the loader imports the trainer's modules: only when first used
    from jaxlab.load import load_run  # noqa: PLC0415
    return load_run
  raise AttributeError(f"module 'jaxlab' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted(__all__)
