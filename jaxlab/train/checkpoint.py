"""Checkpoints with orbax: the whole train state plus the config it was trained with.

Each step directory holds two items, ``state`` (the ``TrainState``; restored onto the shardings
of an abstract state) and ``config`` (JSON). Orbax writes a step to a temporary directory and
renames it when complete, so a run killed mid-save leaves the previous checkpoint intact. If the
latest checkpoint is unreadable anyway (files truncated by a crash on a network filesystem), the
restore warns, naming the step and the error, and falls back to the newest readable one.
``restore_params`` reads only the params (for fine-tuning another run's weights).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Sequence

import jax
import orbax.checkpoint as ocp

from jaxlab.errors import CheckpointError, InputError
from jaxlab.train.sharding import path_name


def _json_safe(tree: Any) -> Any:
  if isinstance(tree, dict):
    return {str(k): _json_safe(v) for k, v in tree.items()}
  if isinstance(tree, (list, tuple)):
    return [_json_safe(v) for v in tree]
  if isinstance(tree, (str, int, float, bool)) or tree is None:
    return tree
  return repr(tree)


def _flat_config(tree: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(tree, dict):
    out = {}
    for k, v in tree.items():
      out.update(_flat_config(v, f"{prefix}{k}."))
    return out
  return {prefix[:-1]: tree}


def config_differences(saved: Any, current: Any, limit: int = 6) -> list[str]:
  a, b = _flat_config(_json_safe(saved)), _flat_config(_json_safe(current))
  keys = sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))
  return [f"{k}: {a.get(k, '<absent>')!r} there, {b.get(k, '<absent>')!r} here" for k in keys[:limit]]


def _structure_differences(metadata_tree: Any, abstract: Any, limit: int = 4) -> list[str]:
  """Leaves that are missing, unexpected or of another shape in the checkpoint."""
  saved = {path_name(p): getattr(m, "shape", None)
           for p, m in jax.tree_util.tree_flatten_with_path(metadata_tree)[0]}
  here = {path_name(p): tuple(x.shape) for p, x in jax.tree_util.tree_flatten_with_path(abstract)[0]}
  params_first = lambda keys: sorted(keys, key=lambda k: (not k.startswith("params/"), k))
  out = [f"{k} has shape {tuple(saved[k])} there, {here[k]} here" for k in params_first(set(here) & set(saved))
         if saved[k] is not None and tuple(saved[k]) != here[k]]
  out += [f"{k} missing from the checkpoint" for k in params_first(set(here) - set(saved))]
  out += [f"{k} in the checkpoint but not in this run" for k in params_first(set(saved) - set(here))]
  return out[:limit]


class Checkpointer:
  """``ocp.CheckpointManager`` for one ``TrainState`` and its config.

  Args:
    directory: where step directories go (``workdir/checkpoints``).
    save_every: save at multiples of this many steps (and when asked with ``final``).
    keep: how many of the newest checkpoints to keep.
    keep_period: also keep every checkpoint whose step is a multiple of this (None: none).
    config: the run's config (a dict), saved beside each checkpoint and compared on restore.
  """

  def __init__(self, directory: str, save_every: int, keep: int = 2, keep_period: int | None = None,
               config: dict | None = None):
    if not isinstance(save_every, int) or save_every <= 0:
      raise InputError(f"checkpoint_every must be a positive number of steps, got {save_every!r}")
    if not isinstance(keep, int) or keep < 1:
      raise InputError(f"checkpoint_keep must be an integer >= 1, got {keep!r}")
    if keep_period is not None and (not isinstance(keep_period, int) or keep_period < 1):
      raise InputError(f"checkpoint_keep_period must be a positive integer (or 0 for none), got {keep_period!r}")
    self.directory = os.path.abspath(directory)
    self.save_every = save_every
    self.config = _json_safe(config or {})
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=keep, keep_period=keep_period, create=True,
                                             save_interval_steps=1),
        item_handlers={"state": ocp.StandardCheckpointHandler(), "config": ocp.JsonCheckpointHandler()})

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> Sequence[int]:
    return sorted(self._manager.all_steps())

  def saved_config(self, step: int) -> dict | None:
    try:
      return self._manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore())).config
    except Exception:  # noqa: BLE001 - an unreadable config only loses the comparison
      return None

  def _check_matches(self, step: int, abstract_state: Any) -> None:
    try:
      tree = self._manager.item_metadata(step).state.tree
    except Exception:  # noqa: BLE001 - unreadable metadata: the restore below reports it
      return
    problems = _structure_differences(tree, abstract_state)
    if problems:
      saved = self.saved_config(step)
      diff = config_differences(saved, self.config) if saved is not None else []
      raise InputError(
          f"the workdir's checkpoint {self.directory}/{step} is of a different run: "
          + "; ".join(problems)
          + (f" (its config differs in {'; '.join(diff)})" if diff else "")
          + ". Use another --workdir, or move that one away.")

  def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, int]:
    """``(state, step)`` from ``step`` or the newest readable checkpoint.

    Restores onto the shardings carried by ``abstract_state`` (``ShapeDtypeStruct``s). A
    checkpoint of another run (different tree or shapes) is an ``InputError`` naming the
    differences; unreadable checkpoints are skipped with a warning, and if none is readable a
    ``CheckpointError`` says so rather than starting over and overwriting them.
    """
    steps = [step] if step is not None else sorted(self.all_steps(), reverse=True)
    failures = []
    for s in steps:
      self._check_matches(s, abstract_state)
      try:
        restored = self._manager.restore(s, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state)))
        return restored.state, s
      except Exception as e:  # noqa: BLE001 - any read error: try the previous checkpoint
        failures.append(f"step {s}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
        warnings.warn(f"checkpoint {self.directory}/{s} is unreadable ({failures[-1]}); "
                      "trying the previous one", RuntimeWarning, stacklevel=2)
    raise CheckpointError(
        f"no readable checkpoint in {self.directory} ({'; '.join(failures)}); refusing to start over and "
        "overwrite them: move the directory away (or delete the broken steps) to start afresh")

  def reached_preemption(self, step: int) -> bool:
    return self._manager.reached_preemption(step)

  def maybe_save(self, step: int, state: Any, final: bool = False) -> bool:
    """Saves at multiples of ``save_every`` and when ``final``; returns whether it saved."""
    if not (final or step % self.save_every == 0) or step == self._manager.latest_step():
      return False
    try:
      return self._manager.save(step, args=ocp.args.Composite(
          state=ocp.args.StandardSave(state), config=ocp.args.JsonSave(self.config)), force=True)
    except Exception as e:  # noqa: BLE001 - disk full, permissions: name the place, keep the old ones
      raise CheckpointError(f"saving checkpoint {step} in {self.directory} failed: {type(e).__name__}: {e}; "
                            "the earlier checkpoints are intact") from e

  def wait(self) -> None:
    try:
      self._manager.wait_until_finished()
    except Exception as e:  # noqa: BLE001
      raise CheckpointError(f"writing a checkpoint in {self.directory} failed: {type(e).__name__}: {e}; "
                            "the earlier checkpoints are intact") from e

  def close(self) -> None:
    try:
      self.wait()
    finally:
      self._manager.close()


def abstract_like(tree: Any, shardings: Any) -> Any:
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)


def _subtree(saved: Any, wanted: Any) -> Any:
  """The part of ``saved`` (metadata) that ``wanted`` asks for, so a partial request is no mismatch."""
  if isinstance(saved, dict) and isinstance(wanted, dict):
    return {k: _subtree(saved[k], v) if k in saved else v for k, v in wanted.items()}
  return saved


def restore_params(directory: str, abstract_params: Any, step: int | None = None) -> Any:
  """Only ``params`` from a jaxlab checkpoint directory (``workdir/checkpoints``), for fine-tuning.

  ``abstract_params`` are ``ShapeDtypeStruct``s (with shardings) of the params; the optimizer
  state and everything else in the checkpoint are not read.
  """
  directory = os.path.abspath(directory)
  manager = ocp.CheckpointManager(directory, item_handlers={"state": ocp.PyTreeCheckpointHandler(),
                                                            "config": ocp.JsonCheckpointHandler()})
  try:
    step = manager.latest_step() if step is None else step
    if step is None:
      raise InputError(f"no checkpoint in {directory}")
    saved = manager.item_metadata(step).state.tree["params"]
    problems = _structure_differences(_subtree(saved, abstract_params), abstract_params)
    if problems:
      raise InputError(f"params in {directory}/{step} do not fit this model: " + "; ".join(problems))
    item = {"params": abstract_params}
    restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
        item=item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_restore=True)))
    return restored.state["params"]
  finally:
    manager.close()
