"""Experiment configs by path or by name: ``load_config("digits_mlp:tiny")``.

A config is a Python file with ``get_config(arg) -> ml_collections.ConfigDict`` (big_vision's
convention). ``spec`` is ``"<path>.py[:arg]"`` or ``"<name>[:arg]"``; names are looked up in
``$JAXLAB_CONFIG_DIR``, then in the ``configs/`` folder of a source checkout (next to the
``jaxlab`` package; an editable install), then in the copy a regular install puts under
``<prefix>/share/jaxlab/configs``. So a notebook or script finds the configs from any working
directory. A bad spec raises :class:`~jaxlab.errors.InputError` (one line).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from typing import Any

import ml_collections

from jaxlab.errors import InputError


def config_dirs() -> list[str]:
  """The folders that config names are looked up in, in order, those that exist.

  ``$JAXLAB_CONFIG_DIR``, the ``configs/`` folder next to the ``jaxlab`` package (a source
  checkout), then ``<prefix>/share/jaxlab/configs`` (a regular install).
  """
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  dirs = [os.environ.get("JAXLAB_CONFIG_DIR", ""), os.path.join(here, "configs"),
          os.path.join(sysconfig.get_path("data"), "share", "jaxlab", "configs"),
          os.path.join(sys.prefix, "share", "jaxlab", "configs")]
  return [d for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def available_configs() -> list[str]:
  """The config names (file names without ``.py``) found in :func:`config_dirs`, sorted."""
  names = set()
  for d in config_dirs():
    names.update(f[:-3] for f in os.listdir(d) if f.endswith(".py") and not f.startswith("_"))
  return sorted(names)


def resolve_config_path(spec: str) -> tuple[str, str | None]:
  """``spec`` -> ``(absolute path of the config file, arg or None)``."""
  if not isinstance(spec, str) or not spec:
    raise InputError(f"a config is '<file>.py[:arg]' or '<name>[:arg]', got {spec!r}")
  path, sep, arg = spec.rpartition(":") if spec.count(":") and not os.path.exists(spec) else (spec, "", "")
  if not sep:
    path, arg = spec, ""
  if os.path.isfile(path):
    return os.path.abspath(path), arg or None
  name = os.path.basename(path)[:-3] if path.endswith(".py") else path
  if os.sep not in path or not path.endswith(".py"):
    for d in config_dirs():
      candidate = os.path.join(d, f"{name}.py")
      if os.path.isfile(candidate):
        return candidate, arg or None
  raise InputError(f"config {path!r} not found (a file path, or one of: {', '.join(available_configs())})")


def _module(path: str) -> Any:
  """Executes the config file ``path`` as module ``jaxlab_config_<file name>``.

  The module is put in ``sys.modules`` first, as an import does, so that what the file defines
  (dataclasses, flax modules, pickled functions) finds its module. What the file registers
  (``@TASKS.register(...)``, ``@OPTIMIZERS.register(...)``) is registered under that module's
  name; a name that is already taken is one ``InputError`` naming the file.
  """
  name = f"jaxlab_config_{os.path.basename(path)[:-3]}"
  spec = importlib.util.spec_from_file_location(name, path)
  if spec is None or spec.loader is None:
    raise InputError(f"config {path!r} is not a Python file")
  module = importlib.util.module_from_spec(spec)
  previous = sys.modules.get(name)
  sys.modules[name] = module
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    _restore_module(name, previous)
    raise InputError(f"config {path} has a syntax error at line {e.lineno}: {e.msg}") from None
  except InputError as e:  # e.g. it registers a name that is taken
    _restore_module(name, previous)
    raise InputError(f"config {os.path.basename(path)}: {e}") from None
  except BaseException:
    _restore_module(name, previous)
    raise
  return module


def _restore_module(name: str, previous: Any) -> None:
  if previous is None:
    sys.modules.pop(name, None)
  else:
    sys.modules[name] = previous


def load_config_module(name: str) -> Any:
  """The Python module of config ``name`` (e.g. to reuse a helper of one config in another),
  found like :func:`load_config` finds it, so it works from any working directory."""
  return _module(resolve_config_path(name)[0])


def load_config(spec: str) -> ml_collections.ConfigDict:
  """The ConfigDict of ``spec`` (``"digits_mlp:tiny"``, ``"configs/<name>.py"``, ...), with the
  fine-tuning keys (``init_from.*``, ``optimizer.freeze``) added where it lacks them.

  Examples:
    >>> from jaxlab.config_files import load_config
    >>> config = load_config("digits_mlp:tiny")
    >>> config.task, config.model.name
    ('digits_classification', 'mlp')
  """
  path, arg = resolve_config_path(spec)
  module = _module(path)
  if not callable(getattr(module, "get_config", None)):
    raise InputError(f"config {path} defines no get_config(arg) function")
  try:
    config = module.get_config(arg)
  except InputError:
    raise
  except ValueError as e:  # configs reject unknown args with a ValueError naming the valid ones
    raise InputError(f"config {os.path.basename(path)}: {e}") from None
  if not isinstance(config, ml_collections.ConfigDict):
    raise InputError(f"config {path}: get_config must return an ml_collections.ConfigDict, got {type(config).__name__}")
  from jaxlab.experiment.config import add_fine_tune_keys  # every config takes init_from.* and optimizer.freeze
  return add_fine_tune_keys(config)
