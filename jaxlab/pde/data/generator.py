"""Batched trajectory generation: ``vmap`` over trajectories, one ``jit`` per data set, tqdm progress."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from jaxlab.errors import InputError, check, is_int
from jaxlab.pde.data.families import get_family
from jaxlab.pde.data.spec import DatasetSpec


def trajectory_keys(seed: int, start: int, stop: int) -> jax.Array:
  """PRNG keys of trajectories start..stop-1: ``fold_in(key(seed), i)``, independent of batching."""
  base = jax.random.key(seed)
  return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(start, stop, dtype=jnp.uint32))


def batch_simulator(spec: DatasetSpec) -> Callable[[jax.Array], jax.Array]:
  """jit(vmap(simulate)): keys (B,) -> (B, frames, X, Y, C) float32 at ``spec.resolution``.

  Memoised on what decides the program (not the seed or count), so it compiles once per setting.
  """
  return _batch_simulator(spec.family, spec.params, spec.solver_resolution, spec.resolution)


@functools.lru_cache(maxsize=16)
def _batch_simulator(family_name: str, params: tuple[tuple[str, Any], ...], solver_resolution: int,
                     resolution: int) -> Callable[[jax.Array], jax.Array]:
  family = get_family(family_name)
  param_dict = dict(params)
  stride = solver_resolution // resolution

  def one(key: jax.Array) -> jax.Array:
    trajectory = family.simulate(param_dict, solver_resolution, key)
    return trajectory[:, ::stride, ::stride]  # FNO's downsampling: keep every stride-th point

  return jax.jit(jax.vmap(one))


def first_non_finite(block: np.ndarray) -> int | None:
  """Index (along axis 0) of the first entry with a NaN or inf, else None."""
  bad = ~np.isfinite(block).reshape(len(block), -1).all(axis=1)
  return int(np.argmax(bad)) if bad.any() else None


def check_chunk_size(chunk_size: int) -> None:
  check(is_int(chunk_size) and chunk_size >= 1,
        f"chunk_size={chunk_size!r} must be an int >= 1 (trajectories per vmapped solver call)")


def generate(spec: DatasetSpec, *, out: np.ndarray | None = None, chunk_size: int = 32,
             progress: bool = True) -> np.ndarray:
  """All ``spec.num_trajectories`` trajectories, shape ``spec.shape``, float32.

  Writes into ``out`` (e.g. a memory-mapped .npy) chunk by chunk when given. Every chunk has
  the same size (the last one is padded), so the solver compiles once. A trajectory with a
  NaN or inf raises :class:`InputError` naming the data set and the trajectory.
  """
  if out is None:
    out = np.empty(spec.shape, np.float32)
  if out.shape != spec.shape or out.dtype != np.float32:
    raise InputError(f"out has shape {out.shape} / {out.dtype}; expected {spec.shape} / float32")
  check_chunk_size(chunk_size)
  n = spec.num_trajectories
  chunk = min(chunk_size, n)
  simulate = batch_simulator(spec)
  with tqdm.tqdm(total=n, desc=f"generating {spec.name}", unit="traj", disable=not progress) as bar:
    for start in range(0, n, chunk):
      stop = min(start + chunk, n)
      keys = trajectory_keys(spec.seed, start, start + chunk)  # padded to a full chunk
      block = np.asarray(simulate(keys))[: stop - start]
      bad = first_non_finite(block)
      if bad is not None:
        raise InputError(
            f"data set {spec.name!r}: generated trajectory {start + bad} has non-finite values "
            f"(solver unstable: lower dt={spec.param_dict['dt']} or change the parameters)")
      out[start:stop] = block
      bar.update(stop - start)
  return out
