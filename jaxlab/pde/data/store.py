"""The on-disk cache of generated data sets: generate once, then memory-map.

Layout: ``<cache root>/pde_data/<family>-<key>/{trajectories.npy, settings.json}`` where key
hashes every generation setting (:meth:`DatasetSpec.settings`). The cache root is the
``cache_dir`` argument, else ``$JAXLAB_DATA_DIR``, else ``~/.cache/jaxlab``; never the source tree.

Writes are atomic: the set is generated into ``.tmp-<family>-<key>-<host>-<pid>-<random>/`` next
to its final place and renamed onto it only when complete, so a killed run leaves no
half-written cache (only a temp folder, removed by the next run on the same host once its
process is gone). Loads check the settings, shape and dtype, and that every value is finite.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from jaxlab.errors import InputError
from jaxlab.pde.data import generator
from jaxlab.pde.data.spec import DatasetSpec

#: The environment variable naming the data cache's folder (see :func:`cache_root`).
ENV_VAR = "JAXLAB_DATA_DIR"
DATA_FILE = "trajectories.npy"
SETTINGS_FILE = "settings.json"
_REPO_ROOT = Path(__file__).resolve().parents[3]


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
  """The cache root: the argument, else ``$JAXLAB_DATA_DIR``, else ``~/.cache/jaxlab``."""
  root = cache_dir if cache_dir is not None else os.environ.get(ENV_VAR) or "~/.cache/jaxlab"
  root = Path(root).expanduser().resolve()
  if (_REPO_ROOT / "setup.cfg").exists() and root.is_relative_to(_REPO_ROOT):
    raise InputError(f"cache dir {root} is inside the jaxlab source tree {_REPO_ROOT}; "
                     f"pass cache_dir or set ${ENV_VAR} to a folder outside it")
  return root


def dataset_dir(spec: DatasetSpec, cache_dir: str | os.PathLike | None = None) -> Path:
  """The folder that holds ``spec``'s generated data: one per family and settings, under :func:`cache_root`."""
  return cache_root(cache_dir) / "pde_data" / f"{spec.family}-{spec.cache_key()}"


def check_finite(array: np.ndarray, name: str, what: str = "loaded", chunk: int = 16) -> None:
  """Raises InputError naming the data set and the first trajectory with a NaN or inf."""
  for start in range(0, len(array), chunk):
    bad = generator.first_non_finite(np.asarray(array[start:start + chunk]))
    if bad is not None:
      raise InputError(f"data set {name!r}: {what} trajectory {start + bad} has non-finite values")


def _open_npy(path: Path, fix: str) -> np.ndarray:
  """``path`` memory-mapped read-only; a damaged file is one line naming it (and ``fix``), not numpy's error.

  Refused: a truncated file, an object-dtype array (it cannot be mapped, and reading it would unpickle),
  an ``.npz`` archive or anything else that is not one ``.npy`` array.
  """
  try:
    array = np.load(path, mmap_mode="r", allow_pickle=False)
  except (OSError, ValueError, EOFError) as e:
    reason = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise InputError(f"cache {path} is not a readable .npy array ({reason}; truncated or damaged?); {fix}") from None
  if not isinstance(array, np.ndarray):  # np.load opens an .npz archive whatever the file's name
    array.close()
    raise InputError(f"cache {path} is an .npz archive, not one .npy array; {fix}")
  return array


def _json_roundtrip(settings: dict[str, Any]) -> Any:
  return json.loads(json.dumps(settings, sort_keys=True))


def load_cached(spec: DatasetSpec, cache_dir: str | os.PathLike | None = None, *,
                verify_finite: bool = True) -> np.ndarray | None:
  """The cached array (read-only memory map), or None when this spec was never generated."""
  folder = dataset_dir(spec, cache_dir)
  if not (folder / DATA_FILE).exists() or not (folder / SETTINGS_FILE).exists():
    return None
  try:
    stored = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise InputError(f"cache {folder / SETTINGS_FILE} is not readable JSON ({e}); delete the folder {folder} to "
                     "regenerate") from None
  if stored != _json_roundtrip(spec.settings()):
    raise InputError(f"cache {folder} holds other settings than data set {spec.name!r}; delete it")
  array = _open_npy(folder / DATA_FILE, f"delete the folder {folder} to regenerate")
  if array.shape != spec.shape or array.dtype != np.float32:
    raise InputError(f"cache {folder / DATA_FILE} has shape {array.shape} / {array.dtype}; data set "
                     f"{spec.name!r} needs {spec.shape} / float32; delete the folder to regenerate")
  if verify_finite:
    check_finite(array, spec.name)
  return array


def _process_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def _remove_stale_temps(folder: Path) -> None:
  """Deletes temp folders of this data set left by dead processes on this host."""
  prefix = f".tmp-{folder.name}-{socket.gethostname()}-"
  for temp in folder.parent.glob(prefix + "*"):
    pid = temp.name[len(prefix):].split("-")[0]
    if pid.isdigit() and not _process_alive(int(pid)):
      shutil.rmtree(temp, ignore_errors=True)


def _check_free_space(spec: DatasetSpec, parent: Path) -> None:
  """Refuses a set that cannot fit on the cache's disk (else opening the memory map fails with a bare OSError,
  or a sparse file fills the disk mid-generation)."""
  need = int(np.prod(spec.shape, dtype=np.float64)) * 4
  free = shutil.disk_usage(parent).free
  if need > free:
    raise InputError(f"data set {spec.name!r} needs {need / 1e9:.3g} GB for shape {spec.shape} (trajectories, "
                     f"frames, X, Y, C) but {parent} has {free / 1e9:.3g} GB free; use fewer trajectories / "
                     f"frames / a lower resolution, or a cache_dir (${ENV_VAR}) on a larger disk")


def load_or_generate(spec: DatasetSpec, cache_dir: str | os.PathLike | None = None, *,
                     chunk_size: int = 32, progress: bool = True,
                     verify_finite: bool = True) -> np.ndarray:
  """The data set as a read-only memory map of shape ``spec.shape``; generated on a cache miss."""
  cached = load_cached(spec, cache_dir, verify_finite=verify_finite)
  if cached is not None:
    return cached
  generator.check_chunk_size(chunk_size)
  folder = dataset_dir(spec, cache_dir)
  folder.parent.mkdir(parents=True, exist_ok=True)
  _remove_stale_temps(folder)
  _check_free_space(spec, folder.parent)
  temp = folder.parent / f".tmp-{folder.name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
  temp.mkdir()
  try:
    out = np.lib.format.open_memmap(temp / DATA_FILE, mode="w+", dtype=np.float32, shape=spec.shape)
    generator.generate(spec, out=out, chunk_size=chunk_size, progress=progress)
    out.flush()
    del out
    (temp / SETTINGS_FILE).write_text(json.dumps(spec.settings(), sort_keys=True, indent=1))
    for name in (DATA_FILE, SETTINGS_FILE):
      with open(temp / name, "rb") as f:
        os.fsync(f.fileno())
    try:
      os.rename(temp, folder)  # atomic; fails if another process finished first
    except OSError:
      if not (folder / DATA_FILE).exists():
        raise
  finally:
    shutil.rmtree(temp, ignore_errors=True)
  # Generated data were checked chunk by chunk; re-read to also check what reached the disk.
  return load_cached(spec, cache_dir, verify_finite=False)
