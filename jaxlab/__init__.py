"""jaxlab: four ICML 2024 methods as JAX components that compose into one sharded train step.

Submodules are imported lazily by the user (``from jaxlab import optim``); importing
``jaxlab`` itself pulls in nothing heavier than JAX.
"""

__version__ = "0.1.0"
