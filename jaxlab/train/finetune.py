"""Fine-tuning: start a run from another run's params, with chosen parts re-initialised.

``config.init_from.workdir`` names the pre-training run; its newest checkpoint's params replace
the fresh ones, except leaves whose path matches a ``config.init_from.reinit`` regex (e.g. a new
output head), which keep their fresh initialisation. Freezing is the optimizer's
``freeze`` option. Only params are read (the optimizer starts afresh), and only when the
fine-tuning run has no checkpoint of its own (a resumed fine-tuning run restores itself).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Sequence

import jax

from jaxlab.errors import CheckpointError, InputError
from jaxlab.train.checkpoint import restore_params
from jaxlab.sharding import path_name
from jaxlab.train.workdir import Workdir


def _prune(tree: Any, drop: Any, prefix: str = "") -> Any:
  if isinstance(tree, dict):
    out = {}
    for k, v in tree.items():
      name = f"{prefix}{k}"
      if isinstance(v, dict):
        sub = _prune(v, drop, f"{name}/")
        if sub:
          out[k] = sub
      elif not drop(name):
        out[k] = v
    return out
  raise InputError("init_from needs params that are nested dicts (flax/haiku params)")


def _merge(fresh: Any, loaded: Any) -> Any:
  if isinstance(fresh, dict):
    return {k: _merge(v, loaded[k]) if k in loaded else v for k, v in fresh.items()}
  return loaded


def _plan(params: Any, workdir: str, reinit: Sequence[str]) -> tuple[Any, list[str], str]:
  """``(abstract params to load, every param name, checkpoint directory)``; checks the patterns."""
  compiled = []
  for p in reinit:
    try:
      compiled.append(re.compile(p))
    except re.error as e:
      raise InputError(f"init_from.reinit has an invalid regex {p!r}: {e}") from None
  names = [path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  for p, c in zip(reinit, compiled):
    if not any(c.search(n) for n in names):
      raise InputError(f"init_from.reinit pattern {p!r} matches no parameter (paths look like: {', '.join(names[:4])})")
  if names and all(any(c.search(n) for c in compiled) for n in names):  # restoring nothing is no fine-tuning
    raise InputError(f"init_from.reinit={tuple(reinit)!r} re-initialises every parameter, so nothing would be "
                     f"loaded from init_from.workdir={workdir!r}; re-initialise only the new or changed leaves, "
                     "or train without init_from.workdir (from scratch)")
  directory = Workdir(workdir).checkpoints
  if not os.path.isdir(directory):
    raise InputError(f"init_from.workdir {workdir!r} holds no checkpoints/ directory")
  default = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", default)),
                          params)
  return _prune(abstract, lambda name: any(c.search(name) for c in compiled)), names, directory


def check_pretrained(params: Any, workdir: str, reinit: Sequence[str] = (), seed_index: int | None = None) -> None:
  """Refuses, in one line and before anything is compiled or written, a pre-trained run whose
  params do not fit ``params`` (arrays or ``ShapeDtypeStruct``s): leaves missing from its
  checkpoint, of another shape, or not in this model; ``reinit`` leaves are not loaded. A run of
  several vmapped seeds needs ``seed_index`` (``init_from.seed_index``)."""
  keep, names, directory = _plan(params, workdir, reinit)
  restore_params(directory, keep, model_names=names, source="init_from.workdir", check_only=True,
                 run_index=seed_index)


@dataclasses.dataclass(frozen=True)
class FineTuneStart:
  """What a fine-tuning run loaded, and from where.

  Attributes:
    params: the fresh params with the loaded leaves in place.
    workdir: the pre-training run (``init_from.workdir``).
    step: the checkpoint step the params came from.
    loaded: the number of param leaves loaded.
    reinitialised: the number of param leaves kept fresh (``init_from.reinit``).
    frozen: the number of param leaves frozen (``optimizer.freeze``; loaded or fresh).
  """
  params: Any
  workdir: str
  step: int
  loaded: int
  reinitialised: int
  frozen: int

  def describe(self) -> str:
    """One line for the log and the summary."""
    return (f"fine-tuning from {self.workdir} (step {self.step}): {self.loaded} param leaves loaded, "
            f"{self.reinitialised} re-initialised (init_from.reinit), {self.frozen} frozen (optimizer.freeze)")


def _matching(names: Sequence[str], patterns: Sequence[str]) -> int:
  compiled = [re.compile(p) for p in patterns]  # invalid ones were refused by the optimizer's freeze
  return sum(any(c.search(n) for c in compiled) for n in names)


def fine_tune_start(params: Any, workdir: str, reinit: Sequence[str] = (), freeze: Sequence[str] = (),
                    seed_index: int | None = None) -> FineTuneStart:
  """``params`` with every leaf not matching ``reinit`` replaced by ``workdir``'s newest readable params.

  Every loaded leaf must be in the checkpoint with its shape, and every checkpoint leaf in the
  model (``check_pretrained``); an unreadable newest checkpoint falls back to the newest readable
  one with a warning.

  Args:
    params: freshly initialised params (arrays; their shardings are kept).
    workdir: the pre-training run's workdir (``init_from.workdir``).
    reinit: regexes over param paths that keep their fresh values (``init_from.reinit``).
    freeze: the optimizer's ``freeze`` regexes, only counted for the report.
    seed_index: the run to load from a workdir of several vmapped seeds (``init_from.seed_index``);
      only that run is read, onto the shardings of ``params`` (not all runs onto one device).

  Returns:
    A :class:`FineTuneStart`: the params and what was loaded from which step.
  """
  keep, names, directory = _plan(params, workdir, reinit)
  steps = Workdir(workdir).steps()[::-1]
  if not steps:
    raise InputError(f"init_from.workdir={workdir!r}: no checkpoint in {directory}")
  failures = []
  for step in steps:  # newest first; restore_params warns about each unreadable one
    try:
      loaded = restore_params(directory, keep, step, model_names=names, source="init_from.workdir",
                              run_index=seed_index)
    except CheckpointError as e:
      failures.append(str(e))
      continue
    n_loaded = len(jax.tree.leaves(loaded))
    where = workdir if seed_index is None else f"{workdir} run {seed_index}"
    return FineTuneStart(params=_merge(params, loaded), workdir=where, step=step, loaded=n_loaded,
                         reinitialised=len(names) - n_loaded, frozen=_matching(names, freeze))
  raise CheckpointError(f"init_from.workdir={workdir!r}: no readable checkpoint in {directory} ({'; '.join(failures)})")


def load_pretrained(params: Any, workdir: str, reinit: Sequence[str] = ()) -> Any:
  """``params`` with every leaf not matching ``reinit`` replaced by ``workdir``'s newest readable
  params (:func:`fine_tune_start` without its report)."""
  return fine_tune_start(params, workdir, reinit).params
