"""Which environment a name (``config.env.name``) means: a MinAtar game, a gymnax id, or your own.

Three kinds of names, looked up in this order:

* MinAtar games by short name (``ENV_IDS``: "breakout", ...) or by their gymnax id
  ("Breakout-MinAtar", ...): both run with Dopamine's MinAtar conventions (see ``jaxlab.rl.envs``).
* Any other id of ``gymnax.registered_envs`` ("CartPole-v1", "Acrobot-v1", "Catch-bsuite", ...):
  gymnax's own dynamics and default ``EnvParams``.
* A name registered in :data:`ENVS`, e.g. from a config file, whose factory builds a gymnax
  ``Environment``::

    from gymnax.environments import environment
    from jaxlab.rl.envs import ENVS

    @ENVS.register("coin_flip")
    class CoinFlip(environment.Environment):
      ...

  A factory is called with no arguments and returns an ``Environment`` (its ``default_params``
  are used) or a tuple ``(env, params)`` as ``gymnax.make`` does; so a subclass itself is a factory.
"""

from __future__ import annotations

import difflib
from typing import Any, NamedTuple

from jaxlab.errors import InputError
from jaxlab.registry import Registry, optional_imports

with optional_imports(__name__):
  import gymnax

#: MinAtar games, short name (``config.env``) -> gymnax id.
ENV_IDS = {
    "asterix": "Asterix-MinAtar",
    "breakout": "Breakout-MinAtar",
    "freeway": "Freeway-MinAtar",
    "seaquest": "Seaquest-MinAtar",
    "space_invaders": "SpaceInvaders-MinAtar",
}
_MINATAR_BY_ID = {gymnax_id: short for short, gymnax_id in ENV_IDS.items()}
#: gymnax ids whose environment downloads a data set when it is built (``gymnax.utils.load_mnist``); jaxlab
#: reaches no network at run time, so they are refused by name before anything is built.
DOWNLOADS = {"MNISTBandit-bsuite": "MNIST"}



def is_builtin(name: Any) -> bool:
  """Whether ``name`` is a MinAtar short name or any id of ``gymnax.registered_envs``."""
  return isinstance(name, str) and (name in ENV_IDS or name in _MINATAR_BY_ID or name in gymnax.registered_envs)


class EnvRegistry(Registry):
  """The :class:`~jaxlab.registry.Registry` of your environments; a built-in name cannot be registered."""

  def register(self, name: str):
    """Decorator registering a factory under ``name``; a MinAtar or gymnax name is one line."""
    if is_builtin(name):
      raise InputError(f"environment {name!r} is a built-in name (MinAtar or gymnax); register yours under "
                       "another name")
    return super().register(name)


#: Your own environments: name -> factory returning a gymnax ``Environment`` or ``(env, params)``
#: (a :class:`jaxlab.registry.Registry`; register from a config file with ``@ENVS.register(name)``).
ENVS: Registry = EnvRegistry("environment")


class EnvSpec(NamedTuple):
  """What a name resolved to: the gymnax environment, its params, and whether it is a MinAtar game."""

  name: str          # the MinAtar short name for a MinAtar game, else the name as given
  env: Any           # a gymnax ``Environment``
  params: Any        # its ``EnvParams``
  minatar: bool      # True: Dopamine's MinAtar conventions apply


def gymnax_ids() -> list[str]:
  """The ids ``gymnax.make`` accepts (``gymnax.registered_envs``), in gymnax's order."""
  return list(gymnax.registered_envs)


def resolve(name: Any, where: str = "", full_action_set: bool = True) -> EnvSpec:
  """The environment ``name`` means (see the module doc for the order of lookup).

  Args:
    name: a MinAtar short name or gymnax id, any other gymnax id, or a name in :data:`ENVS`.
    where: the config key the name came from, for the message (e.g. ``" (env.name)"``).
    full_action_set: MinAtar only: all 6 actions (False: gymnax's minimal set).

  Returns:
    The :class:`EnvSpec`.

  Raises:
    InputError: an unknown name (one line with the valid names and the closest matches), or a
      factory that returns no gymnax ``Environment``.
  """
  if isinstance(name, str) and (name in ENV_IDS or name in _MINATAR_BY_ID):
    short = _MINATAR_BY_ID.get(name, name)
    env, params = gymnax.make(ENV_IDS[short], use_minimal_action_set=not full_action_set)
    return EnvSpec(short, env, params, True)
  if isinstance(name, str) and name in DOWNLOADS:
    raise InputError(f"environment {name!r}{where} downloads {DOWNLOADS[name]} from the internet when gymnax builds "
                     "it, and jaxlab reaches no network at run time; choose another environment, or register your "
                     "own in jaxlab.rl.envs.ENVS that reads the data from a local file")
  if isinstance(name, str) and name in gymnax.registered_envs:
    env, params = gymnax.make(name)
    return EnvSpec(name, env, params, False)
  if isinstance(name, str) and name in ENVS:
    return EnvSpec(name, *_call_factory(name, ENVS.get(name), where), False)
  raise InputError(unknown_name_message(name, where))


def unknown_name_message(name: Any, where: str = "") -> str:
  """One line: ``name`` is no environment; the valid names by kind, and the closest matches."""
  own = ENVS.names()
  message = (f"unknown MinAtar environment {name!r}{where}; valid: {', '.join(sorted(ENV_IDS))}, a gymnax id "
             f"({', '.join(gymnax_ids())}) or one registered in jaxlab.rl.envs.ENVS "
             f"({', '.join(own) if own else 'none registered'})")
  if isinstance(name, str):
    candidates = [*ENV_IDS, *gymnax_ids(), *own]
    lowered = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
    close += [c.lower() for c in candidates if name.lower() in c.lower() and c.lower() not in close][:3 - len(close)]
    if close:
      message += f"; did you mean {' or '.join(repr(lowered[c]) for c in close)}?"
  return message


def _call_factory(name: str, factory: Any, where: str) -> tuple[Any, Any]:
  """``(env, params)`` from a registered factory, which returns an ``Environment`` or ``(env, params)``."""
  from gymnax.environments import environment  # noqa: PLC0415 (gymnax's public base class)
  out = factory()
  env, params = out if isinstance(out, tuple) and len(out) == 2 else (out, None)
  if not isinstance(env, environment.Environment):
    raise InputError(f"environment {name!r}{where}: its factory {ENVS.target(name)} returned "
                     f"{type(out).__name__}; it must return a gymnax.environments.environment.Environment "
                     "or a tuple (env, params)")
  return env, env.default_params if params is None else params
