"""Flax NNX modules whose parameters have the layout of the linen module they mirror.

Each method package has an ``nnx`` submodule (:mod:`jaxlab.moe.nnx`, :mod:`jaxlab.pde.nnx`,
:mod:`jaxlab.rl.nnx`, :mod:`jaxlab.ot_clip.nnx`) of ``flax.nnx`` modules named as the package's
linen modules, over the same pure functions. Their attribute names are the linen module's
parameter names, so ``nnx.state(model, nnx.Param)`` has the tree of the linen ``params``
collection, path for path (``router/phi``, ``experts/w1``, ``blocks_0/filter/w1``, ...). Hence:

* a linen ``params`` tree (a trainer checkpoint, ``module.init(...)["params"]``) loads into an NNX
  model with :meth:`LinenLayout.load_linen_params`, and :meth:`LinenLayout.linen_params` gives an
  NNX model's parameters back as that tree (for the linen module, the trainer, ``load_run``);
* sharding rules written for linen paths (:data:`jaxlab.moe.EXPERT_PARALLEL_RULES`,
  :func:`jaxlab.pde.dpot_sharding_rules`) match the NNX state's: apply them to
  ``nnx.as_pure(nnx.state(model, nnx.Param))``, whose paths are linen's (``nnx.state`` alone adds a
  ``/value`` to each).

The linen modules are what the trainer (:mod:`jaxlab.train`) and every config use; the NNX ones are for
code of your own written in NNX (``nnx.Optimizer``, ``nnx.jit``).
"""

from __future__ import annotations

from typing import Any, Mapping

import dataclasses

import jax
from flax import nnx

from jaxlab.errors import check

__all__ = ["LinenLayout", "linen_config", "param_dict", "param_values"]


def param_dict(tree: Mapping[str, Any]) -> nnx.Dict:
  """A nested dict of arrays as nested ``nnx.Dict`` s of ``nnx.Param`` s, key for key.

  How an NNX module here holds a parameter group that a pure function takes as a dict (an
  expert MLP's ``{"w1", "b1", "w2", "b2"}``): its state paths are the dict's keys.

  Args:
    tree: nested mapping with string keys and array leaves.

  Returns:
    An ``nnx.Dict`` with an ``nnx.Dict`` per inner mapping and an ``nnx.Param`` per array.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.nnx_params import param_dict, param_values
    >>> group = param_dict({"fc": {"kernel": jnp.ones((2, 3)), "bias": jnp.zeros(3)}})
    >>> sorted(nnx.to_pure_dict(nnx.state(group, nnx.Param))["fc"])
    ['bias', 'kernel']
    >>> param_values(group)["fc"]["kernel"].shape
    (2, 3)
  """
  return nnx.Dict({k: param_dict(v) if isinstance(v, Mapping) else nnx.Param(v) for k, v in tree.items()})


def param_values(node: nnx.Dict) -> dict[str, Any]:
  """The arrays of a :func:`param_dict` as the nested dict it was made from (what the pure functions take).

  Args:
    node: an ``nnx.Dict`` of ``nnx.Dict`` s and variables.

  Returns:
    A nested dict of the variables' values (tracers inside ``nnx.jit`` / ``nnx.grad``).

  Examples:
    >>> import jax.numpy as jnp
    >>> from jaxlab.nnx_params import param_dict, param_values
    >>> param_values(param_dict({"scale": jnp.ones(())}))
    {'scale': Array(1., dtype=float32)}
  """
  return {k: param_values(v) if isinstance(v, nnx.Dict) else v.get_value() for k, v in node.items()}


def linen_config(linen_cls: type, settings: Mapping[str, Any], implemented: tuple[str, ...]) -> Any:
  """The linen module ``linen_cls(**settings)`` as the settings of its NNX twin.

  An NNX twin that takes the linen module's fields as keyword arguments keeps them as this
  (never applied) linen module, so the names, defaults, derived sizes and checks have one
  definition. A field the twin does not implement is refused unless it has its default, so that
  an option added to the linen module is never silently ignored by the NNX one.

  Args:
    linen_cls: the linen module class, e.g. :class:`jaxlab.pde.DPOT`.
    settings: keyword arguments for it.
    implemented: the fields the NNX twin implements.

  Returns:
    ``linen_cls(**settings)``.

  Raises:
    InputError: for a name that is no field of ``linen_cls``, or a field not in ``implemented``
      set to other than its default.

  Examples:
    >>> from jaxlab.nnx_params import linen_config
    >>> from jaxlab.pde import FNO2d
    >>> linen_config(FNO2d, {"modes": 4}, ("modes", "width")).width
    20
    >>> linen_config(FNO2d, {"n_layers": 2}, ("modes", "width"))
    Traceback (most recent call last):
    ...
    jaxlab.errors.InputError: FNO2d.n_layers=2 has no NNX counterpart; use the linen module jaxlab.pde.fno.FNO2d
  """
  fields = {f.name: f for f in dataclasses.fields(linen_cls) if f.name not in ("parent", "name")}
  for name in sorted(set(settings) - set(fields)):
    check(False, f"{linen_cls.__name__} has no setting {name!r}; settings: {sorted(fields)}")
  config = linen_cls(**settings)
  for name, field in fields.items():
    check(name in implemented or getattr(config, name) == field.default,
          f"{linen_cls.__name__}.{name}={getattr(config, name)!r} has no NNX counterpart; use the linen module "
          f"{linen_cls.__module__}.{linen_cls.__name__}")
  return config


def _flat(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
  out = {}
  for key, value in tree.items():
    if isinstance(value, Mapping):
      out.update(_flat(value, prefix + (str(key),)))
    else:
      out[prefix + (str(key),)] = value
  return out


def _nested(flat: dict[tuple[str, ...], Any]) -> dict[str, Any]:
  out: dict[str, Any] = {}
  for path, value in flat.items():
    node = out
    for key in path[:-1]:
      node = node.setdefault(key, {})
    node[path[-1]] = value
  return out


class LinenLayout(nnx.Module):
  """Base of jaxlab's NNX modules: parameters in the layout of the linen module they mirror.

  Subclasses name their attributes after the linen module's parameters, so the linen
  ``params`` tree and ``nnx.state(self, nnx.Param)`` have the same paths, shapes and dtypes.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxlab.moe import SoftMoE
    >>> from jaxlab.moe import nnx as moe_nnx
    >>> x = jnp.ones((2, 4, 8))
    >>> params = SoftMoE(num_experts=2, expert_hidden=16).init(jax.random.key(0), x)["params"]
    >>> model = moe_nnx.SoftMoE(8, num_experts=2, expert_hidden=16, num_tokens=4, rngs=nnx.Rngs(0))
    >>> model = model.load_linen_params(params)
    >>> bool(jnp.array_equal(model.linen_params()["router"]["phi"], params["router"]["phi"]))
    True
  """

  def load_linen_params(self, params: Mapping[str, Any]) -> LinenLayout:
    """Sets every ``nnx.Param`` from the linen ``params`` tree of the same layout; returns ``self``.

    Works on a module built abstractly too (``nnx.eval_shape(lambda: Model(..., rngs=nnx.Rngs(0)))``),
    which skips the random initialisation.

    Args:
      params: the linen module's ``params`` collection (``variables["params"]``), nested mappings of arrays.

    Returns:
      ``self``, its parameters replaced (other state, e.g. RNG streams, is kept).

    Raises:
      InputError: when a path is missing or extra, or a shape or dtype differs, naming the first such path.
    """
    want = {k: v for k, v in nnx.to_flat_state(nnx.state(self, nnx.Param))}
    got = _flat(params)
    name = type(self).__name__
    for path in sorted(set(want) | set(got)):
      key = "/".join(str(p) for p in path)
      check(path in got, f"linen params have no '{key}', which {name} has; the trees differ "
                         f"(expected paths: {sorted('/'.join(map(str, p)) for p in want)})")
      check(path in want, f"linen params have '{key}', which {name} does not (built with other settings?)")
      new, old = jax.eval_shape(lambda v: v, got[path]), want[path].get_value()
      check((tuple(new.shape), new.dtype) == (tuple(old.shape), old.dtype),
            f"linen param '{key}' has shape {tuple(new.shape)} and dtype {new.dtype}; {name} has "
            f"{tuple(old.shape)} and {old.dtype}")
    nnx.update(self, _nested(got))
    return self

  def linen_params(self) -> dict[str, Any]:
    """The parameters as the linen module's ``params`` tree (nested dicts of arrays).

    Returns:
      ``nnx.to_pure_dict(nnx.state(self, nnx.Param))``: ``linen_module.apply({"params": tree}, x)``
      computes what this module computes.
    """
    return nnx.to_pure_dict(nnx.state(self, nnx.Param))
