"""A tiny name -> constructor registry, so configs pick models, losses, tasks and optimizers by name.

Entries are registered with a decorator, or lazily as ``"module:attribute"`` strings that are
imported on first ``get`` (as big_vision does), so that a registry can name constructors whose
modules need optional extras without importing them up front. :func:`optional_imports` is how
jaxlab imports an optional package anywhere: a missing one is one line naming its extra.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, Generic, Iterator, TypeVar

from jaxlab.errors import InputError, MissingExtraError, UnknownNameError

#: What a registry maps names to: a constructor (any callable).
T = TypeVar("T", bound=Callable[..., Any])

#: The optional extra (``pip install 'jaxlab[<extra>]'``, setup.cfg's ``extras_require``) that
#: installs each top-level module jaxlab imports optionally (inside :func:`optional_imports`): a
#: missing one is named in one line.
EXTRAS: dict[str, str] = {
    "sklearn": "data",
    "gymnax": "rl", "flashbax": "rl", "rliable": "rl", "six": "rl", "pandas": "rl",
    "exponax": "pde", "h5py": "pde",
    "envpool": "atari", "ale_py": "atari",
    "grain": "clip_data", "tokenizers": "clip_data", "pyarrow": "clip_data", "PIL": "clip_data",
    "matplotlib": "notebooks",
}


def missing_extra_error(error: ModuleNotFoundError, what: str) -> MissingExtraError | None:
  """``error`` (a failed import) as one line naming the extra to install, if an extra installs it.

  Args:
    error: the ``ModuleNotFoundError`` an import raised.
    what: what needed the module, for the message (e.g. ``"task 'dqn_minatar'"``).

  Returns:
    A :class:`~jaxlab.errors.MissingExtraError` saying ``pip install 'jaxlab[<extra>]'``, or None
    when the missing module is no extra's (a bug, or a broken install: the caller re-raises ``error``).
  """
  module = (error.name or "").split(".")[0]
  extra = EXTRAS.get(module)
  if extra is None:
    return None
  return MissingExtraError(f"{what} needs the optional package {module!r}, which is not installed: "
                           f"pip install 'jaxlab[{extra}]'", name=module)


@contextlib.contextmanager
def optional_imports(what: str) -> Iterator[None]:
  """Imports of optional packages: a missing one (a module of :data:`EXTRAS`) raises one line naming its extra.

  Every import of an optional package in jaxlab runs inside this block, so each door (a module
  import, a function, a registry entry, a command-line task) says the same thing. Nested blocks:
  the outermost names what the user called. A missing module that no extra installs, and any other
  ``ImportError`` (a broken install), keeps its traceback.

  Args:
    what: what needs the packages, for the message: a module's ``__name__``, a function
      (``"jaxlab.rl.make_env"``) or a registry entry (``"task 'dqn_minatar'"``).

  Raises:
    MissingExtraError: an import inside the block failed because an optional package is not
      installed (also a ``ModuleNotFoundError``, so ``except ImportError`` catches it).

  Examples:
    >>> import sys
    >>> from jaxlab.registry import optional_imports
    >>> saved = sys.modules.get("h5py")
    >>> sys.modules["h5py"] = None  # as if h5py were not installed
    >>> try:
    ...   with optional_imports("my_reader"):
    ...     import h5py
    ... except ImportError as e:
    ...   print(e)
    ... finally:
    ...   if saved is None: del sys.modules["h5py"]
    ...   else: sys.modules["h5py"] = saved
    my_reader needs the optional package 'h5py', which is not installed: pip install 'jaxlab[pde]'
  """
  try:
    yield
  except ModuleNotFoundError as e:
    error = missing_extra_error(e, what)
    if error is None:
      raise
    raise error from None


class Registry(Generic[T]):
  """Maps names to constructors; unknown names raise an error listing the valid ones.

  Examples:
    >>> from jaxlab.registry import Registry
    >>> ACTIVATIONS = Registry("activation")
    >>> @ACTIVATIONS.register("double")
    ... def double(x):
    ...   return 2 * x
    >>> ACTIVATIONS.get("double")(3)
    6
    >>> ACTIVATIONS.get("triple")
    Traceback (most recent call last):
    ...
    jaxlab.errors.UnknownNameError: unknown activation 'triple'; valid names: double
  """

  def __init__(self, kind: str):
    self.kind = kind
    self._entries: dict[str, T | str] = {}

  def register(self, name: str) -> Callable[[T], T]:
    """Decorator. Registering the same object again (a re-run notebook cell) is allowed."""
    def decorator(fn: T) -> T:
      old = self._entries.get(name)
      if old is not None and not _same(old, fn):
        raise InputError(f"{self.kind} {name!r} is already registered (to {_describe(old)}); "
                         f"register {_describe(fn)} under another name")
      self._entries[name] = fn
      return fn
    return decorator

  def register_lazy(self, name: str, target: str) -> None:
    """Registers ``"package.module:attribute"``, imported on first ``get(name)``."""
    if ":" not in target:
      raise InputError(f"lazy {self.kind} target must be 'module:attribute', got {target!r}")
    old = self._entries.get(name)
    if old is not None and old != target and _describe(old) != target:
      raise InputError(f"{self.kind} {name!r} is already registered (to {_describe(old)})")
    if old is None or isinstance(old, str):
      self._entries[name] = target

  def get(self, name: str) -> T:
    """The constructor registered as ``name``, importing a lazy entry's module on first use.

    Raises:
      UnknownNameError: no such name (the valid ones are listed).
      MissingExtraError: a lazy entry's module needs an optional extra that is not installed (the
        ``pip install 'jaxlab[<extra>]'`` to run is named; see :data:`EXTRAS`).
    """
    try:
      entry = self._entries[name]
    except (KeyError, TypeError):
      raise UnknownNameError(
          f"unknown {self.kind} {name!r}; valid names: {', '.join(sorted(self._entries))}") from None
    if isinstance(entry, str):
      module, _, attr = entry.partition(":")
      with optional_imports(f"{self.kind} {name!r}"):
        loaded = importlib.import_module(module)
      entry = getattr(loaded, attr)
      self._entries[name] = entry
    return entry

  def target(self, name: str) -> str:
    """Where ``name``'s constructor is defined, ``"module:qualified_name"``, without importing a lazy entry."""
    if name not in self._entries:
      raise UnknownNameError(f"unknown {self.kind} {name!r}; valid names: {', '.join(sorted(self._entries))}")
    return _describe(self._entries[name])

  def names(self) -> list[str]:
    """The registered names, sorted."""
    return sorted(self._entries)

  def __contains__(self, name: str) -> bool:
    return name in self._entries

  def __iter__(self) -> Iterator[str]:
    """The registered names, sorted (``tuple(REGISTRY)`` lists them, e.g. in a message)."""
    return iter(self.names())

  def __len__(self) -> int:
    return len(self._entries)


def _describe(entry: Any) -> str:
  if isinstance(entry, str):
    return entry
  return f"{getattr(entry, '__module__', '?')}:{getattr(entry, '__qualname__', repr(entry))}"


def _same(old: Any, new: Any) -> bool:
  """The same object, or the same definition executed again: a re-run cell, a reloaded module, or
  one file executed under two module names (a config file imported as ``configs.<name>`` and
  loaded by ``jaxlab.config_files``): same qualified name, source file and code."""
  if old is new:
    return True
  if isinstance(old, str):  # a lazy entry, now imported: its module registers the real object
    return old == _describe(new)
  code_old, code_new = getattr(old, "__code__", None), getattr(new, "__code__", None)
  if code_old is None or code_new is None:
    return code_old is code_new and _describe(old) == _describe(new)  # classes: same module and qualified name
  if getattr(old, "__qualname__", None) != getattr(new, "__qualname__", None):
    return False
  if _describe(old) != _describe(new) and code_old.co_filename != code_new.co_filename:
    return False
  return (code_old.co_code, code_old.co_consts, code_old.co_names) == (code_new.co_code, code_new.co_consts, code_new.co_names)
