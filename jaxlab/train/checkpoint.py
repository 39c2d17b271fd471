"""Checkpoints with orbax: the whole train state plus the config it was trained with.

Each step directory holds two items, ``state`` (the ``TrainState``; restored onto the shardings
of an abstract state) and ``config`` (JSON). Orbax writes a step to a temporary directory and
renames it when complete, so a run killed mid-save leaves the previous checkpoint intact. If the
latest checkpoint is unreadable anyway (files truncated by a crash on a network filesystem), the
restore warns, naming the step and the error, and falls back to the newest readable one.
``restore_params`` reads only the params (for fine-tuning another run's weights). This module is
the one place that knows orbax's layout of a checkpoints directory: :mod:`jaxlab.train.workdir`
reads a workdir through ``checkpoint_steps``, ``read_config`` and ``read_state``.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from typing import Any, Sequence

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from jaxlab.errors import CheckpointError, InputError, JaxlabRuntimeWarning, warn
from jaxlab.sharding import path_name


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


def flat_config(config: Any) -> dict[str, Any]:
  """A config (a nested dict) as ``{dotted key: JSON-safe value}``, as it is saved beside a checkpoint."""
  return _flat_config(_json_safe(config))


def config_differences(saved: Any, current: Any, limit: int = 6) -> list[str]:
  a, b = flat_config(saved), flat_config(current)
  keys = sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))
  return [f"{k}: {a.get(k, '<absent>')!r} there, {b.get(k, '<absent>')!r} here" for k in keys[:limit]]


#: Config keys that say how a run is named, logged, checkpointed and placed, not what it trains:
#: the keys that are a setting of neither a resumed run nor a results report. ``fnmatch``
#: patterns over flattened keys.
BOOKKEEPING_KEYS = (
    "name", "log_every", "eval_every", "eval_offset", "checkpoint_every", "checkpoint_keep", "checkpoint_keep_period",
    "prefetch", "steps_per_call", "remat", "mesh", "sharding_rules", "fsdp_axis", "fsdp_min_size", "init_from.*",
)
#: Config keys a resumed run may change: the bookkeeping and the length (``num_steps``), not the
#: model, data, optimizer or seed (a deliberate change of those is a new run started with
#: init_from). A task adds its own evaluation-only keys (``Task.resume_safe``). ``num_steps`` comes
#: second because the refusal lists the keys in this order.
RESUME_SAFE_KEYS = BOOKKEEPING_KEYS[:1] + ("num_steps",) + BOOKKEEPING_KEYS[1:]


def resume_differences(saved: Any, current: Any, safe: Sequence[str] = RESUME_SAFE_KEYS
                       ) -> tuple[list[str], list[str], list[str]]:
  """``(refused, allowed, unknown)``: changed keys between a checkpoint's config and this run's.

  ``refused`` changed and are not in ``safe``; ``allowed`` changed and are; ``unknown`` exist on
  one side only (a config written by another jaxlab version), which cannot be compared, unless
  they are safe keys or empty (``()``, ``""``: the off value a newer version adds).
  """
  a, b = _flat_config(_json_safe(saved)), _flat_config(_json_safe(current))
  refused, allowed, unknown = [], [], []
  for k in sorted(set(a) | set(b)):
    if k not in a or k not in b:
      value = a.get(k, b.get(k))
      safe_key = any(fnmatch.fnmatchcase(k, p) for p in safe)
      if not safe_key and value not in ((), [], "", None, {}):  # an empty value: a newer version's "off"
        unknown.append(f"{k} ({'only here' if k in b else 'only there'})")
    elif a[k] != b[k]:
      (allowed if any(fnmatch.fnmatchcase(k, p) for p in safe) else refused).append(
          f"{k}: {a[k]!r} there, {b[k]!r} here")
  return refused, allowed, unknown


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
    resume_safe: fnmatch patterns of config keys a resumed run may change (``RESUME_SAFE_KEYS``
      plus the task's); any other changed key refuses the restore.
  """

  def __init__(self, directory: str, save_every: int, keep: int = 2, keep_period: int | None = None,
               config: dict | None = None, resume_safe: Sequence[str] = RESUME_SAFE_KEYS):
    # save_every, keep and keep_period are checked where they come from (the trainer config's
    # checkpoint_every / checkpoint_keep / checkpoint_keep_period, jaxlab.experiment), once.
    self.directory = os.path.abspath(directory)
    self.save_every = save_every
    self.config = _json_safe(config or {})
    self.resume_safe = tuple(resume_safe)
    self._config_checked = False
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=keep, keep_period=keep_period, create=True,
                                             save_interval_steps=1),
        item_handlers={"state": ocp.StandardCheckpointHandler(), "config": ocp.JsonCheckpointHandler()})

  def _saved_config(self, step: int) -> dict | None:
    """The config saved beside checkpoint ``step``, to compare (None if unreadable: a workdir is read back
    with ``jaxlab.train.workdir.Workdir``; this only decides whether a restore may go on)."""
    try:
      return read_config(self.directory, step)
    except Exception:  # noqa: BLE001 - an unreadable config only loses the comparison
      return None

  def _check_matches(self, step: int, abstract_state: Any) -> None:
    try:
      tree = self._manager.item_metadata(step).state.tree
    except Exception:  # noqa: BLE001 - unreadable metadata: the restore below reports it
      return
    problems = _structure_differences(tree, abstract_state)
    if problems:
      saved = self._saved_config(step)
      diff = config_differences(saved, self.config) if saved is not None else []
      raise InputError(
          f"the workdir's checkpoint {self.directory}/{step} is of a different run: "
          + "; ".join(problems)
          + (f" (its config differs in {'; '.join(diff)})" if diff else "")
          + ". Use another --workdir, or move that one away.")

  def _check_config(self, step: int) -> None:
    """Refuses to resume into another model / task / data / optimizer setting (one line)."""
    if self._config_checked or not self.config:
      return
    saved = self._saved_config(step)
    if saved is None:
      return  # unreadable: the state restore below decides whether this step is usable
    self._config_checked = True
    refused, allowed, unknown = resume_differences(saved, self.config, self.resume_safe)
    if refused:
      raise InputError(
          f"the workdir's checkpoint {self.directory}/{step} was trained with another config: "
          + "; ".join(refused[:6]) + (f"; and {len(refused) - 6} more" if len(refused) > 6 else "")
          + ". Resuming may change only " + ", ".join(self.resume_safe)
          + ". To train on from it with a new setting, start a new --workdir with "
          "--config.init_from.workdir=<this workdir>; to start over, move the workdir away.")
    if allowed:
      warn(f"resuming {self.directory}/{step} with changed " + "; ".join(allowed)
           + (" (a learning-rate schedule follows the new num_steps)"
              if any(a.startswith("num_steps:") for a in allowed) else ""))
    if unknown:
      warn(f"resuming {self.directory}/{step}: config keys not compared (written by another version): "
           + ", ".join(unknown[:6]) + (f" and {len(unknown) - 6} more" if len(unknown) > 6 else ""))

  def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, int]:
    """``(state, step)`` from ``step`` or the newest readable checkpoint.

    Restores onto the shardings carried by ``abstract_state`` (``ShapeDtypeStruct``s). A
    checkpoint of another run (different tree or shapes) is an ``InputError`` naming the
    differences; unreadable checkpoints are skipped with a warning, and if none is readable a
    ``CheckpointError`` says so rather than starting over and overwriting them.
    """
    steps = [step] if step is not None else checkpoint_steps(self.directory)[::-1]
    quiet_closed_loop_reports()
    failures = []
    for s in steps:
      self._check_config(s)
      self._check_matches(s, abstract_state)
      try:
        restored = self._manager.restore(s, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state)))
        return restored.state, s
      except Exception as e:  # noqa: BLE001 - any read error: try the previous checkpoint
        failures.append(_failure(s, e))
        warn(f"checkpoint {self.directory}/{s} is unreadable ({failures[-1]}); trying the previous one",
             JaxlabRuntimeWarning)
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


def _failure(step: int, e: Exception) -> str:
  return f"step {step}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def quiet_closed_loop_reports() -> None:
  """Drops the "Event loop is closed" reports of a failed orbax read; other reports pass through.

  When one array of a checkpoint is unreadable, orbax's restore raises while tensorstore still
  completes the other reads; their callbacks then reach the closed asyncio loop and each is
  printed through ``sys.unraisablehook`` (dozens of tracebacks that bury the one warning), some
  while the restore is still running. So the first restore installs the filter, once per process;
  a report from a closed loop has no consequence left to act on.
  """
  previous = sys.unraisablehook
  if getattr(previous, "_jaxlab_closed_loop_filter", False):
    return

  def hook(report: Any) -> None:
    if isinstance(report.exc_value, RuntimeError) and str(report.exc_value) == "Event loop is closed":
      return
    previous(report)

  hook._jaxlab_closed_loop_filter = True  # type: ignore[attr-defined]
  sys.unraisablehook = hook


def _flat_shapes(tree: Any) -> dict[str, tuple | None]:
  return {path_name(p): (tuple(x.shape) if getattr(x, "shape", None) is not None else None)
          for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _listing(kind: str, names: list[str], limit: int = 4) -> str:
  more = f" and {len(names) - limit} more" if len(names) > limit else ""
  return f"{len(names)} {kind} ({' | '.join(names[:limit])}{more})"


def params_differences(saved: Any, wanted: Any, model_names: Sequence[str] | None = None) -> list[str]:
  """Missing, mis-shaped and unexpected leaves between saved params (metadata) and wanted ones.

  ``wanted`` are the leaves to load; ``model_names`` every param path of the model (default: those
  of ``wanted``), so that a checkpoint leaf the model has but does not load is not "unexpected".
  """
  there, here = _flat_shapes(saved), _flat_shapes(wanted)
  model = set(model_names) if model_names is not None else set(here)
  missing = sorted(set(here) - set(there))
  shaped = [f"{k}: {there[k]} there, {here[k]} here" for k in sorted(set(here) & set(there))
            if there[k] is not None and there[k] != here[k]]
  unexpected = sorted(set(there) - model)
  out = []
  if missing:
    out.append(_listing("missing from the checkpoint", missing))
  if shaped:
    out.append(_listing("of another shape", shaped))
  if unexpected:
    out.append(_listing("in the checkpoint but not in this model", unexpected))
  return out


def _run_axis_size(saved: Any, wanted: Any) -> int | None:
  """R when every saved leaf is ``(R,) + `` the wanted shape (a run of R vmapped seeds), else None."""
  there, here = _flat_shapes(saved), _flat_shapes(wanted)
  sizes = {there[k][0] for k in here if k in there and there[k] and there[k][1:] == here[k]}
  whole = all(k in there and there[k] and there[k][1:] == here[k] for k in here)
  return sizes.pop() if whole and len(sizes) == 1 else None


# ---------------------------------------------------------------- reading a checkpoints directory
# Orbax's layout, known only here: ``<directory>/<step>/`` (the manager's default step names) holds
# the items ``state`` (the TrainState) and ``config`` (JSON); a step still being written is a
# temporary directory that orbax does not count.

def _item_path(directory: str, step: int, item: str) -> epath.Path:
  return epath.Path(os.path.abspath(directory)) / str(int(step)) / item


def checkpoint_steps(directory: str) -> list[int]:
  """The steps of the complete checkpoints in ``directory``, ascending (``[]``: none, or no directory)."""
  if not os.path.isdir(directory):
    return []
  return sorted(int(s) for s in ocp.utils.checkpoint_steps(os.path.abspath(directory)))


def read_config(directory: str, step: int) -> dict:
  """The config saved beside checkpoint ``step``; raises what the read raised (missing, not JSON)."""
  config = ocp.JsonCheckpointHandler().restore(_item_path(directory, step, "config"))
  if not isinstance(config, dict):
    raise ValueError(f"the saved config is a {type(config).__name__}, not a dict")
  return config


def state_metadata(directory: str, step: int) -> Any:
  """The saved train state's tree of array metadata (shapes, dtypes) at ``step``; reads no array."""
  return ocp.PyTreeCheckpointHandler().metadata(_item_path(directory, step, "state")).tree


def _read_region(store: Any, index: tuple[slice, ...]) -> np.ndarray:
  """One device's region of one run: the only thing a run-slice read brings into memory at a time."""
  return np.asarray(store[index].read().result())


def _read_run(path: epath.Path, item: dict[str, Any], run_index: int) -> dict[str, Any]:
  """Run ``run_index`` of every leaf under ``item``, read region by region onto its sharding.

  Orbax restores whole arrays (its target sharding must tile the saved ``[runs, ...]`` shape), so
  one run out of R would first be R runs in memory, on one device unless R divides the devices.
  TensorStore reads an index of the stored array instead: each device's region of run
  ``run_index`` is read from the chunks that hold it (orbax writes one chunk per shard of the run
  axis) and placed straight onto that device by ``jax.make_array_from_callback``. The bytes are
  those orbax would read (cast, if the dtype differs, by TensorStore as orbax does), so the result
  is bit-identical to restoring every run and slicing.
  """
  import tensorstore as ts  # noqa: PLC0415 - orbax's storage layer

  metadata = ocp.PyTreeCheckpointHandler().metadata(path)
  saved = {path_name(p): m for p, m in jax.tree_util.tree_flatten_with_path(metadata.tree)[0]}
  ocdbt = ocp.type_handlers.is_ocdbt_checkpoint(path)
  context = ocp.type_handlers.get_ts_context(use_ocdbt=ocdbt)

  def one(key_path: Any, target: Any) -> jax.Array:
    name = path_name(key_path)
    if name not in saved:
      raise KeyError(f"{name} is not in the checkpoint")
    info = ocp.type_handlers.ParamInfo(name=saved[name].name, parent_dir=path, is_ocdbt_checkpoint=ocdbt,
                                       use_zarr3=metadata.use_zarr3, ts_context=context)
    store = ts.open(ocp.type_handlers.get_json_tspec_read(info, use_ocdbt=ocdbt), open=True, context=context).result()
    if store.dtype.numpy_dtype != np.dtype(target.dtype):
      store = ts.cast(store, np.dtype(target.dtype))
    run = store[run_index]
    if tuple(run.shape) != tuple(target.shape):
      raise ValueError(f"{name} has shape {tuple(store.shape)} there, a run of {tuple(target.shape)} here")
    sharding = getattr(target, "sharding", None) or jax.sharding.SingleDeviceSharding(jax.devices()[0])
    regions: dict[tuple, np.ndarray] = {}  # replicated leaves: one read, every device gets a copy

    def region(index: tuple[slice, ...]) -> np.ndarray:
      key = tuple((s.start, s.stop, s.step) for s in index)
      if key not in regions:
        regions[key] = _read_region(run, index)
      return regions[key]
    return jax.make_array_from_callback(tuple(target.shape), sharding, region)

  return jax.tree_util.tree_map_with_path(one, item)


def read_state(directory: str, step: int, item: dict[str, Any], *, run_index: int | None = None) -> dict[str, Any]:
  """Some of the train state saved at ``step``, onto the shardings ``item`` carries; nothing is written.

  Args:
    directory: a checkpoints directory (``workdir/checkpoints``).
    step: a complete checkpoint's step.
    item: ``{field: tree of ShapeDtypeStruct}`` for the state fields to read (``params``,
      ``opt_state``, ...), each leaf with the sharding to restore onto; the other fields are not read.
    run_index: of a checkpoint of vmapped runs (leaves ``[runs, ...]``), read only this run;
      ``item`` then has the shapes of one run, without the run axis.

  Returns:
    ``{field: tree of jax.Array}``; a read error is raised as it came.
  """
  path = _item_path(directory, step, "state")
  if run_index is not None:
    return _read_run(path, item, run_index)
  checkpointer = ocp.Checkpointer(ocp.PyTreeCheckpointHandler())
  try:
    return checkpointer.restore(path, args=ocp.args.PyTreeRestore(
        item=item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_restore=True))
  finally:
    checkpointer.close()


def restore_params(directory: str, abstract_params: Any, step: int | None = None, *,
                   model_names: Sequence[str] | None = None, source: str = "", check_only: bool = False,
                   run_index: int | None = None) -> Any:
  """Only ``params`` from a jaxlab checkpoint directory (``workdir/checkpoints``), for fine-tuning.

  ``abstract_params`` are ``ShapeDtypeStruct``s (with shardings) of the params to load; the
  optimizer state and everything else in the checkpoint are not read. Leaves missing from the
  checkpoint, of another shape, or (given ``model_names``) in the checkpoint but not in the model
  are one ``InputError`` naming them, before anything is read. An unreadable newest checkpoint
  falls back to the newest readable one with a warning, as a resume does. ``source`` names the
  config key the directory came from, for messages. ``check_only``: run the checks on the newest
  checkpoint whose metadata is readable, read no array, return None. ``run_index``: the run to take
  from a checkpoint of several vmapped runs (params with a leading run axis); only that run is
  read, straight onto the shardings of ``abstract_params`` (``read_state``). Such a checkpoint
  without it is refused in one line that says how many runs it holds.
  """
  directory = os.path.abspath(directory)
  where = f"{source}={os.path.dirname(directory)!r}: " if source else ""
  steps = [step] if step is not None else checkpoint_steps(directory)[::-1]
  if not steps:
    raise InputError(f"{where}no checkpoint in {directory}")
  quiet_closed_loop_reports()
  failures = []
  for s in steps:
    try:
      saved = state_metadata(directory, s)["params"]
    except Exception as e:  # noqa: BLE001 - unreadable metadata: try the previous checkpoint
      failures.append(_failure(s, e))
      warn(f"checkpoint {directory}/{s} is unreadable ({failures[-1]}); trying the previous one",
           JaxlabRuntimeWarning)
      continue
    runs = _run_axis_size(saved, abstract_params)
    index_key = "init_from.seed_index" if source else "run_index"
    if run_index is not None:
      if runs is None:
        raise InputError(f"{where}{index_key}={run_index}, but {directory}/{s} holds one run (no run axis); "
                         f"allowed: {'-1' if source else 'None'} for a single run")
      if not (isinstance(run_index, int) and 0 <= run_index < runs):
        raise InputError(f"{where}{index_key}={run_index!r}; allowed: an int in [0, {runs - 1}] "
                         f"({directory}/{s} holds {runs} vmapped runs)")
    elif runs is not None:
      raise InputError(f"{where}{directory}/{s} holds {runs} vmapped runs (params with a leading run axis); "
                       f"choose one with {'--config.' if source else ''}{index_key}=<0..{runs - 1}>")
    wanted = abstract_params if run_index is None else jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((runs,) + tuple(x.shape), x.dtype), abstract_params)
    problems = params_differences(saved, wanted, model_names)
    if problems:
      raise InputError(f"{where}params in {directory}/{s} do not fit this model: " + "; ".join(problems)
                       + (". Re-initialise new or changed leaves with init_from.reinit (regexes over these names), "
                          "or fine-tune from a run of the same model" if source else ""))
    if check_only:
      return None
    try:
      return read_state(directory, s, {"params": abstract_params}, run_index=run_index)["params"]
    except Exception as e:  # noqa: BLE001 - any read error: try the previous checkpoint
      failures.append(_failure(s, e))
      warn(f"checkpoint {directory}/{s} is unreadable ({failures[-1]}); trying the previous one",
           JaxlabRuntimeWarning)
  raise CheckpointError(f"{where}no readable checkpoint in {directory} ({'; '.join(failures)})")
