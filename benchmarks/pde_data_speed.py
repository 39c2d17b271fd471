r"""Generation speed (trajectories / minute) and cache size per family, vs FNO's own recipe.

Side by side in one run on whatever devices JAX sees (the numbers in docs/methods/dpot.md, "PDE data: cache, speed, loader": 2 shared
CPU cores):
  * each data set of ``default_mixture`` at 64^2: ``--trajectories`` trajectories through
    ``load_or_generate`` into a fresh cache folder (so the timing includes the .npy write),
    compile time reported apart; trajectories / minute, minutes per 1000, bytes on disk;
  * FNO's recipe for the same NS data (Crank-Nicolson, explicit convection, dt = 1e-4, 64^2;
    Li et al. 2021, Sec. 5.3) in JAX on the same batch size, timed over ``--fno_time`` time
    units and extrapolated to T = 50: the ratio is our speed-up at nu = 1e-3;
  * the loader: ``mixture_batch`` over the generated sets, rows / second.

  nice -n 5 python benchmarks/pde_data_speed.py --out=benchmarks/results/pde_data
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.pde.data import default_mixture, load_dataset, mixture_batch, store
from jaxlab.pde.data import generator
from jaxlab.pde.data.grf import fno_gaussian_random_field
from jaxlab.pde.data.steppers import fno_forcing

_OUT = flags.DEFINE_string("out", "benchmarks/results/pde_data", "results folder")
_TRAJ = flags.DEFINE_integer("trajectories", 64, "trajectories generated per data set")
_CHUNK = flags.DEFINE_integer("chunk", 32, "trajectories per vmapped chunk")
_FNO_TIME = flags.DEFINE_float("fno_time", 0.2, "time units of the FNO recipe to time (dt 1e-4)")
_CACHE = flags.DEFINE_string("cache_dir", None, "cache root (default: a temp folder, deleted)")
_SETS = flags.DEFINE_list("sets", None, "names of default_mixture sets to run (default: all)")
_FILE = flags.DEFINE_string("file", "speed.json", "results file name in --out")


def _fno_recipe(batch: int, time_units: float) -> tuple[float, float]:
  """(wall, CPU) seconds for ``batch`` trajectories of FNO's Crank-Nicolson recipe over ``time_units``."""
  n, dt, nu = 64, 1e-4, 1e-3
  k = jnp.fft.fftfreq(n, 1.0 / n)
  k1, k2 = jnp.meshgrid(k, k, indexing="ij")
  neg_lap = 4 * jnp.pi ** 2 * (k1 ** 2 + k2 ** 2)
  inv = jnp.where(neg_lap == 0, 0.0, 1.0 / jnp.where(neg_lap == 0, 1.0, neg_lap))
  keep = (jnp.abs(k1) <= 2 / 3 * (n // 2)) & (jnp.abs(k2) <= 2 / 3 * (n // 2))
  f_hat = jnp.fft.fft2(jnp.asarray(fno_forcing(n)))
  d1, d2 = 2j * jnp.pi * k1, 2j * jnp.pi * k2

  def step(_, w_hat):
    psi = w_hat * inv
    u1, u2 = jnp.fft.ifft2(d2 * psi).real, jnp.fft.ifft2(-d1 * psi).real
    w1, w2 = jnp.fft.ifft2(d1 * w_hat).real, jnp.fft.ifft2(d2 * w_hat).real
    adv = keep * jnp.fft.fft2(u1 * w1 + u2 * w2)
    return ((1 - 0.5 * dt * nu * neg_lap) * w_hat + dt * (f_hat - adv)) / (1 + 0.5 * dt * nu * neg_lap)

  steps = round(time_units / dt)
  run = jax.jit(lambda w: jax.lax.fori_loop(0, steps, step, jnp.fft.fft2(w)).real)
  keys = jax.random.split(jax.random.key(0), batch)
  w0 = jax.vmap(lambda key: fno_gaussian_random_field(key, n))(keys)
  jax.block_until_ready(run(w0))  # compile
  start, cpu_start = time.perf_counter(), time.process_time()
  jax.block_until_ready(run(w0))
  return time.perf_counter() - start, time.process_time() - cpu_start


def _folder_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def main(_):
  os.makedirs(_OUT.value, exist_ok=True)
  cache = _CACHE.value or tempfile.mkdtemp(prefix="jaxlab_pde_speed_")
  n = _TRAJ.value
  results = dict(devices=[str(d) for d in jax.devices()], trajectories=n, chunk=_CHUNK.value,
                 load_average_start=os.getloadavg(), sets={})
  datasets = []
  specs = [s for s in default_mixture(n) if _SETS.value is None or s.name in _SETS.value]
  for spec in specs:
    # Compile on a throw-away chunk first, so the timed run is the steady state.
    keys = generator.trajectory_keys(spec.seed, 0, min(_CHUNK.value, n))
    start = time.perf_counter()
    jax.block_until_ready(generator.batch_simulator(spec)(keys))
    compile_s = time.perf_counter() - start
    start, cpu_start = time.perf_counter(), time.process_time()
    ds = load_dataset(spec, cache, chunk_size=_CHUNK.value, progress=False)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    datasets.append(ds)
    size = _folder_bytes(str(store.dataset_dir(spec, cache)))
    row = dict(family=spec.family, shape=list(spec.shape), params=spec.param_dict,
               compile_and_first_chunk_s=round(compile_s, 2), seconds=round(seconds, 2),
               trajectories_per_minute=round(60 * n / seconds, 1),
               minutes_per_1000=round(1000 * seconds / n / 60, 2),
               cpu_seconds_per_trajectory=round(cpu_seconds / n, 3), bytes_on_disk=size,
               gigabytes_per_1000=round(size / n * 1000 / 1e9, 3))
    results["sets"][spec.name] = row
    print(spec.name, json.dumps(row), flush=True)

  fno_s, fno_cpu = _fno_recipe(_CHUNK.value, _FNO_TIME.value)
  per_traj_t50 = fno_s / _CHUNK.value * 50 / _FNO_TIME.value
  ours = results["sets"].get("ns_fno_nu1e-03", {"trajectories_per_minute": float("nan")})
  results["fno_recipe"] = dict(
      method="Crank-Nicolson + explicit convection, dt=1e-4, 64^2, same batch (chunk) size",
      timed_time_units=_FNO_TIME.value, seconds=round(fno_s, 2),
      seconds_per_trajectory_T50=round(per_traj_t50, 2),
      cpu_seconds_per_trajectory_T50=round(fno_cpu / _CHUNK.value * 50 / _FNO_TIME.value, 2),
      trajectories_per_minute=round(60 / per_traj_t50, 2),
      our_speedup_nu_1e3=round(ours["trajectories_per_minute"] * per_traj_t50 / 60, 1))
  print("fno recipe", json.dumps(results["fno_recipe"]), flush=True)

  rows = np.arange(256)
  mixture_batch(datasets, [1] * len(datasets), 0, 0, 256, rows, 10, 1)  # warm the page cache
  start = time.perf_counter()
  for step in range(20):
    mixture_batch(datasets, [1] * len(datasets), 0, step, 256, rows, 10, 1)
  loader_s = (time.perf_counter() - start) / 20
  results["loader"] = dict(global_batch=256, t_in=10, t_out=1, seconds_per_batch=round(loader_s, 4),
                           rows_per_second=round(256 / loader_s))
  print("loader", json.dumps(results["loader"]), flush=True)
  results["load_average_end"] = os.getloadavg()
  with open(os.path.join(_OUT.value, _FILE.value), "w") as f:
    json.dump(results, f, indent=1)
  if _CACHE.value is None:
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
  app.run(main)
