"""Submodules a package imports on first use, so that ``import jaxlab.<package>`` stays cheap.

A package whose submodule pulls in a heavy dependency (``jaxlab.moe.nnx``: ``flax.nnx``) lists
it in ``__all__`` and binds the module-level ``__getattr__`` / ``__dir__`` (PEP 562) made here.
"""

from __future__ import annotations

import importlib
from typing import Callable, Sequence


def lazy_submodules(package: str, submodules: Sequence[str], public: Sequence[str]
                    ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
  """``(__getattr__, __dir__)`` for ``package``: ``package.<name>`` imports ``package.<name>`` when first read.

  Args:
    package: the package's ``__name__``.
    submodules: the names imported on first use.
    public: the package's ``__all__`` (what ``dir(package)`` shows).

  Returns:
    The two functions, for ``__getattr__, __dir__ = lazy_submodules(__name__, ("nnx",), __all__)``.
  """
  def __getattr__(name: str) -> object:
    if name in submodules:
      return importlib.import_module(f"{package}.{name}")
    raise AttributeError(f"module {package!r} has no attribute {name!r}")

  def __dir__() -> list[str]:
    return sorted(public)
  return __getattr__, __dir__
