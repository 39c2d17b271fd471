"""An optax transform from a config's ``optimizer`` block.

::

  optimizer = {
      "name": "adamw",                 # OPTIMIZERS
      "learning_rate": 1e-3,           # goes to the optimizer's own learning-rate argument
      "schedule": "warmup_cosine",     # SCHEDULES; refused where that argument takes no schedule
      "schedule_kwargs": {"warmup_steps": 100},
      "weight_decay": 1e-4,
      "weight_decay_mask": "no_bias_norm",   # no decay on 1-d leaves (biases, norm scales)
      "chain": (("clip_by_global_norm", {"max_norm": 1.0}),),   # GRADIENT_TRANSFORMS, applied first
      "cycle_momentum": {"base_momentum": 0.85, "max_momentum": 0.95},   # with schedule "onecycle" only
      "freeze": (r"^embed/", r"blocks_0/"),   # params whose path matches are not updated
      # any other key: a keyword argument of the optimizer (unknown ones are an error)
  }

``swept`` names hyper-parameters that differ between vmapped runs: the optimizer is then built
with ``optax.inject_hyperparams`` so that they live in its state (``set_hyperparams``).

``cycle_momentum`` is torch ``OneCycleLR``'s ``cycle_momentum=True``: the optimizer's ``b1`` follows
the one-cycle momentum schedule (max -> base -> max, inverse to the learning rate) through
``optax.inject_hyperparams``; torch replaces beta1 this way for any optimizer with ``betas``.

torch's ``Adam(weight_decay=wd)`` adds ``wd * p`` to the gradient before the moments (an L2 term,
not AdamW): ``"chain": (("add_decayed_weights", {"weight_decay": wd}),)`` with ``"name": "adam"``
(the chain runs first). ``"weight_decay"`` goes to the optimizer itself (e.g. adamw's decoupled decay).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.errors import InputError, check_choice, check_range
from jaxlab.optim.registry import OPTIMIZERS
from jaxlab.optim.schedules import SCHEDULES, onecycle_momentum
from jaxlab.registry import Registry

# The argument that takes the learning rate, where it is not ``learning_rate``; and the
# optimizers whose learning-rate argument cannot be a schedule.
LR_ARG = {"polyak_sgd": "max_learning_rate"}
NO_SCHEDULE = {"polyak_sgd"}

#: Gradient transforms by name (``config.optimizer.chain``), applied before the optimizer.
GRADIENT_TRANSFORMS: Registry = Registry("gradient transform")
GRADIENT_TRANSFORMS.register("clip_by_global_norm")(optax.clip_by_global_norm)
GRADIENT_TRANSFORMS.register("clip")(optax.clip)
GRADIENT_TRANSFORMS.register("adaptive_grad_clip")(optax.adaptive_grad_clip)
GRADIENT_TRANSFORMS.register("zero_nans")(optax.zero_nans)
GRADIENT_TRANSFORMS.register("centralize")(optax.centralize)
# Before "adam" in a chain: torch Adam's L2 weight decay (grad + wd * p enters both moments).
GRADIENT_TRANSFORMS.register("add_decayed_weights")(optax.add_decayed_weights)


def no_bias_norm(params: Any) -> Any:
  """The weight-decay mask that leaves out biases and norm scales/offsets: the 1-d leaves of every jaxlab model."""
  return jax.tree.map(lambda p: p.ndim > 1, params)


#: Weight-decay masks by name (``optimizer.weight_decay_mask``), each ``params -> bool tree`` of the decayed
#: leaves; "all" is no mask (every leaf decays, the optimizer's own default, and its state has no mask in it).
WEIGHT_DECAY_MASKS: Registry = Registry("weight-decay mask")
WEIGHT_DECAY_MASKS.register("all")(None)
WEIGHT_DECAY_MASKS.register("no_bias_norm")(no_bias_norm)


def freeze_labels(patterns: Sequence[str]) -> Callable[[Any], Any]:
  """``params -> labels``: "frozen" where a regex matches the param path, else "train".

  A pattern matching no parameter, and patterns freezing every parameter (a run that would train
  nothing for its whole schedule), raise ``InputError`` naming ``optimizer.freeze``.
  """
  import re

  # "params/Dense_0/kernel", the same name jaxlab.sharding.path_name gives (optim stays below train).
  path_name = lambda path: jax.tree_util.keystr(path, simple=True, separator="/")
  compiled = []
  for p in patterns:
    try:
      compiled.append((p, re.compile(p)))
    except re.error as e:
      raise InputError(f"optimizer.freeze has an invalid regex {p!r}: {e}") from None

  def labels(params):
    names = {id(leaf): path_name(path) for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]}
    for p, c in compiled:
      if not any(c.search(n) for n in names.values()):
        raise InputError(f"optimizer.freeze pattern {p!r} matches no parameter (paths look like: "
                         f"{', '.join(list(names.values())[:4])})")
    out = jax.tree_util.tree_map_with_path(
        lambda path, _: "frozen" if any(c.search(path_name(path)) for _, c in compiled) else "train", params)
    leaves = jax.tree.leaves(out)
    if leaves and all(label == "frozen" for label in leaves):
      raise InputError(f"optimizer.freeze={tuple(patterns)!r} freezes every parameter ({len(leaves)} of them): "
                       "training would change nothing; allowed: patterns that leave some parameter trainable")
    return out
  return labels


def _parameters(fn: Callable) -> dict[str, inspect.Parameter]:
  return dict(inspect.signature(fn).parameters)


def _check_kwargs(kind: str, name: str, fn: Callable, kwargs: dict[str, Any]) -> None:
  params = _parameters(fn)
  if any(p.kind == p.VAR_KEYWORD for p in params.values()):
    return
  unknown = sorted(set(kwargs) - set(params))
  if unknown:
    raise InputError(f"{kind} {name!r} has no argument(s) {unknown}; valid: {sorted(params)}")


def _chain(spec: Any) -> list[optax.GradientTransformation]:
  out = []
  for i, entry in enumerate(spec or ()):
    if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], str)):
      raise InputError(f"optimizer.chain[{i}] must be (name, {{kwargs}}), got {entry!r}")
    name, kwargs = entry[0], dict(entry[1] or {})
    fn = GRADIENT_TRANSFORMS.get(name)
    _check_kwargs("gradient transform", name, fn, kwargs)
    out.append(fn(**kwargs))
  return out


def _check_schedule_values(schedule_fn: Any, num_steps: int, name: str, schedule_kwargs: dict) -> None:
  """A schedule's learning rate must be finite and >= 0 at every step (a negative one ascends the loss).

  Evaluated once on the host over steps 0..num_steps (schedules are elementwise jnp functions).
  """
  if not callable(schedule_fn):
    return
  values = np.asarray(schedule_fn(jnp.arange(num_steps + 1)))
  bad = np.flatnonzero(~(np.isfinite(values) & (values >= 0)))
  if bad.size:
    raise InputError(f"optimizer.schedule={name!r} with optimizer.schedule_kwargs={schedule_kwargs} gives the learning "
                     f"rate {values[bad[0]]:.4g} at step {bad[0]} (of {num_steps}); it must be finite and >= 0 at "
                     "every step (a negative one ascends the loss)")


def optimizer_from_config(opt_config: Any, num_steps: int, swept: Sequence[str] = ()
                          ) -> optax.GradientTransformation:
  """``{"name": ..., "learning_rate": ..., "schedule": ..., ...}`` -> an optax transform."""
  kwargs = dict(opt_config)
  if "name" not in kwargs:
    raise InputError(f"optimizer config needs a 'name'; valid names: {', '.join(OPTIMIZERS.names())}")
  name = kwargs.pop("name")
  factory = OPTIMIZERS.get(name)
  schedule = kwargs.pop("schedule", "constant")
  schedule_kwargs = dict(kwargs.pop("schedule_kwargs", {}) or {})
  mask_name = kwargs.pop("weight_decay_mask", "all") or "all"
  chain = _chain(kwargs.pop("chain", ()))
  cycle = kwargs.pop("cycle_momentum", None)
  freeze = tuple(kwargs.pop("freeze", ()) or ())
  lr_arg = LR_ARG.get(name, "learning_rate")

  if "learning_rate" in kwargs and lr_arg != "learning_rate":
    kwargs[lr_arg] = kwargs.pop("learning_rate")
  if lr_arg in kwargs:
    lr = kwargs[lr_arg]
    check_range(lr, "optimizer.learning_rate", 0, got=True)
    if schedule != "constant" and name in NO_SCHEDULE:
      raise InputError(f"optimizer {name!r} takes no schedule for its {lr_arg}; use schedule='constant'")
    if schedule != "constant" and lr_arg in swept:
      raise InputError(f"a swept {lr_arg} needs schedule='constant', got schedule={schedule!r}")
    sched_fn = SCHEDULES.get(schedule)
    _check_kwargs("schedule", schedule, sched_fn, {"learning_rate": lr, "num_steps": num_steps, **schedule_kwargs})
    kwargs[lr_arg] = sched_fn(lr, num_steps, **schedule_kwargs)
    _check_schedule_values(kwargs[lr_arg], num_steps, schedule, schedule_kwargs)
  elif schedule != "constant":
    raise InputError(f"optimizer.schedule={schedule!r} needs optimizer.learning_rate")

  check_choice(mask_name, "optimizer.weight_decay_mask", sorted(WEIGHT_DECAY_MASKS), got=True)
  mask = WEIGHT_DECAY_MASKS.get(mask_name)
  if mask is not None:
    if "mask" not in _parameters(factory):
      raise InputError(f"optimizer {name!r} takes no weight-decay mask (weight_decay_mask={mask_name!r})")
    kwargs["mask"] = mask

  if cycle:
    cycle = dict(cycle)
    if schedule != "onecycle":
      raise InputError(f"optimizer.cycle_momentum needs schedule='onecycle', got schedule={schedule!r}")
    if "b1" not in _parameters(factory):
      raise InputError(f"optimizer.cycle_momentum sets b1, which optimizer {name!r} does not take")
    if "b1" in kwargs:
      raise InputError(f"optimizer.b1={kwargs['b1']} and optimizer.cycle_momentum both set b1 (torch's OneCycleLR "
                       "replaces beta1 by its momentum cycle); remove optimizer.b1")
    if "b1" in swept:
      raise InputError("a swept b1 cannot follow optimizer.cycle_momentum")
    unknown = sorted(set(cycle) - {"base_momentum", "max_momentum"})
    if unknown:
      raise InputError(f"optimizer.cycle_momentum has no key(s) {unknown}; valid: ['base_momentum', 'max_momentum']")
    shared = {k: schedule_kwargs[k] for k in ("pct_start", "anneal_strategy") if k in schedule_kwargs}
    kwargs["b1"] = onecycle_momentum(num_steps, **cycle, **shared)

  _check_kwargs("optimizer", name, factory, kwargs)
  missing = sorted(set(swept) - set(kwargs))
  if missing:
    raise InputError(f"swept optimizer hyper-parameter(s) {missing} must be set in the optimizer config "
                     f"(it has {sorted(kwargs)})")
  if swept or cycle:  # b1 under cycle_momentum is a schedule evaluated at the step count
    static = [k for k in kwargs if k not in swept and not (cycle and k == "b1")]
    opt = optax.inject_hyperparams(factory, static_args=static)(**kwargs)
  else:
    opt = factory(**kwargs)
  opt = optax.chain(*chain, opt) if chain else opt
  if freeze:  # fine-tuning: frozen params get zero updates and carry no optimizer state
    opt = optax.partition({"train": opt, "frozen": optax.set_to_zero()}, freeze_labels(freeze))
  return opt


def set_hyperparams(opt_state: Any, values: dict[str, Any]) -> Any:
  """Sets ``inject_hyperparams`` hyper-parameters (by name) wherever they occur in ``opt_state``."""
  found = set()

  def replace(path, leaf):
    keys = [getattr(k, "key", getattr(k, "name", None)) for k in path]
    if len(keys) >= 2 and keys[-2] == "hyperparams" and keys[-1] in values:
      found.add(keys[-1])
      return jax.numpy.asarray(values[keys[-1]], leaf.dtype)
    return leaf

  out = jax.tree_util.tree_map_with_path(replace, opt_state)
  if set(values) - found:
    raise InputError(f"hyper-parameter(s) {sorted(set(values) - found)} are not in the optimizer state "
                     "(build it with optimizer_from_config(..., swept=...))")
  return out
