"""Experiment configs by path or by name: ``load_config("digits_mlp:tiny")``.

A config is a Python file with ``get_config(arg) -> ml_collections.ConfigDict`` (big_vision's
convention). ``spec`` is ``"<path>.py[:arg]"`` or ``"<name>[:arg]"``; names are looked up in
``$JAXLAB_CONFIG_DIR``, then in the ``configs/`` folder of a source checkout (next to the
``jaxlab`` package; an editable install), then in the copy a regular install puts under
``<prefix>/share/jaxlab/configs``. So a notebook or script finds the configs from any working
directory. Bad specs are one-line ``InputError``s.
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
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  dirs = [os.environ.get("JAXLAB_CONFIG_DIR", ""), os.path.join(here, "configs"),
          os.path.join(sysconfig.get_path("data"), "share", "jaxlab", "configs"),
          os.path.join(sys.prefix, "share", "jaxlab", "configs")]
  return [d for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def available_configs() -> list[str]:
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
  name = f"jaxlab_config_{os.path.basename(path)[:-3]}"
  spec = importlib.util.spec_from_file_location(name, path)
  if spec is None or spec.loader is None:
    raise InputError(f"config {path!r} is not a Python file")
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    raise InputError(f"config {path} has a syntax error at line {e.lineno}: {e.msg}") from None
  return module


def load_config_module(name: str) -> Any:
  """The Python module of config ``name`` (e.g. to reuse a helper of one config in another),
  found like :func:`load_config` finds it, so it works from any working directory."""
  return _module(resolve_config_path(name)[0])


def load_config(spec: str) -> ml_collections.ConfigDict:
  """The ConfigDict of ``spec`` (``"digits_mlp:tiny"``, ``"configs/<name>.py"``, ...)."""
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
  return config
