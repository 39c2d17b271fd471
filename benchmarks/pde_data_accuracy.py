r"""Are the default solver settings stable and accurate, and do the NS data look like FNO's?

Side by side in one run (numbers in docs/methods/dpot.md, "PDE data: accuracy"):
  * time step, per data set of ``default_mixture``: ``--trajectories`` trajectories at the default
    dt, at dt / 2 and at about 2 dt (same initial states): the relative L2 difference of dt vs
    dt / 2 per frame, whether 2 dt stays finite, and the largest Courant number max|u| dt / dx
    met in the data (vorticity sets);
  * FNO statistics per viscosity: rms of w0 against the exact GRF value, rms / max |w| /
    enstrophy 0.5 <w^2> over time, and the amplitude of the forced mode (1, 1);
  * grid: our 64^2 solve against a ``--fine``^2 solve (dt scaled with dx) subsampled to 64^2 as
    FNO did (256^2 -> 64^2), from the same initial state.

  nice -n 5 python benchmarks/pde_data_accuracy.py --out=benchmarks/results/pde_data
"""

from __future__ import annotations

import json
import os
import time

from absl import app, flags
import jax
import numpy as np

from jaxlab.pde.data import dataset_spec, default_mixture, generate
from jaxlab.pde.data.families import substeps
from jaxlab.pde.data.grf import grf_pointwise_variance
from jaxlab.pde.data.steppers import ForcedNavierStokesVorticity, fno_forcing, rollout_frames

_OUT = flags.DEFINE_string("out", "benchmarks/results/pde_data", "results folder")
_TRAJ = flags.DEFINE_integer("trajectories", 16, "trajectories per data set for the dt check")
_FINE = flags.DEFINE_integer("fine", 128, "fine solver grid for the grid check (FNO: 256)")
_FINE_TRAJ = flags.DEFINE_integer("fine_trajectories", 2, "trajectories for the grid check")


def _rel_per_frame(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Mean over trajectories of ||a - b|| / ||b|| per frame; a, b (n, T, X, Y, C)."""
  num = np.sqrt(((a - b) ** 2).sum(axis=(2, 3, 4)))
  den = np.sqrt((b ** 2).sum(axis=(2, 3, 4)))
  return (num / den).mean(axis=0)


def _max_speed(w: np.ndarray, length: float) -> float:
  """max |u| of the velocity u = (d2 psi, -d1 psi), -Lap psi = w; w (..., N, N)."""
  n = w.shape[-1]
  k = 2 * np.pi * np.fft.fftfreq(n, length / n)
  k1, k2 = np.meshgrid(k, k, indexing="ij")
  neg_lap = k1 ** 2 + k2 ** 2
  neg_lap[0, 0] = 1.0
  psi = np.fft.fft2(w) / neg_lap
  u1, u2 = np.fft.ifft2(1j * k2 * psi).real, np.fft.ifft2(-1j * k1 * psi).real
  return float(np.sqrt(u1 ** 2 + u2 ** 2).max())


def _pick(curve: np.ndarray) -> dict[str, float]:
  t = len(curve) - 1
  return {f"t{i}": float(curve[i]) for i in sorted({1, t // 2, t})}


def dt_check(n: int) -> dict:
  out = {}
  for spec in default_mixture(n):
    params = spec.param_dict
    sub = substeps(params)
    variants = {"dt": params["dt"], "dt/2": params["dt"] / 2,
                "coarse": params["frame_interval"] / max(1, sub // 2)}
    data = {}
    for label, dt in variants.items():
      s = dataset_spec(spec.family, n, seed=spec.seed, resolution=spec.resolution,
                       name=spec.name, **{**params, "dt": dt})
      start = time.perf_counter()
      try:
        data[label] = generate(s, progress=False)
      except ValueError as e:  # InputError: non-finite trajectory
        data[label] = None
        print(spec.name, label, "refused:", e, flush=True)
      print(spec.name, label, f"dt={dt:.5f}", f"{time.perf_counter() - start:.1f}s", flush=True)
    row = dict(dt=params["dt"], coarse_dt=variants["coarse"],
               rel_l2_dt_vs_half=_pick(_rel_per_frame(data["dt"], data["dt/2"])),
               coarse_finite=data["coarse"] is not None)
    if data["coarse"] is not None:
      row["rel_l2_coarse_vs_half"] = _pick(_rel_per_frame(data["coarse"], data["dt/2"]))
    if spec.num_channels == 1:
      length = params["domain_extent"]
      speed = max(_max_speed(data["dt"][i, t, ..., 0], length)
                  for i in range(n) for t in range(spec.num_frames))
      row["max_speed"] = speed
      row["courant_max"] = speed * params["dt"] / (length / spec.resolution)
    if spec.family == "ns_fno":
      row["stats"] = ns_stats(data["dt"][..., 0], params["viscosity"])
    out[spec.name] = row
    print(spec.name, json.dumps(row), flush=True)
  return out


def ns_stats(w: np.ndarray, viscosity: float) -> dict:
  """Vorticity statistics over time; w (n, T, N, N) on the unit square."""
  n_grid = w.shape[-1]
  f = fno_forcing(n_grid)
  f_unit = f / np.sqrt((f ** 2).mean())
  rms = np.sqrt((w ** 2).mean(axis=(0, 2, 3)))
  forced = (w * f_unit).mean(axis=(2, 3)).mean(0)  # projection on the forcing's shape
  t = w.shape[1] - 1
  frames = sorted({0, 1, t // 4, t // 2, t})
  return dict(
      w0_rms=float(rms[0]), w0_rms_exact=float(np.sqrt(grf_pointwise_variance(n_grid))),
      rms={str(i): float(rms[i]) for i in frames},
      max_abs={str(i): float(np.abs(w[:, i]).max()) for i in frames},
      enstrophy={str(i): float(0.5 * rms[i] ** 2) for i in frames},
      forced_mode={str(i): float(forced[i]) for i in frames},
      stokes_forced_mode=float(0.1 / (8 * np.pi ** 2 * viscosity)))


def grid_check(fine: int, n: int) -> dict:
  out = {}
  for spec in default_mixture(n)[:3]:
    params = spec.param_dict
    ratio = fine // spec.resolution
    fine_spec = dataset_spec("ns_fno", n, seed=spec.seed, resolution=spec.resolution,
                             solver_resolution=fine, name=spec.name,
                             **{**params, "dt": params["dt"] / ratio})
    start = time.perf_counter()
    reference = generate(fine_spec, progress=False)[..., 0]
    fine_s = time.perf_counter() - start
    stepper = ForcedNavierStokesVorticity(
        1.0, spec.resolution, params["dt"], diffusivity=params["viscosity"],
        forcing=fno_forcing(spec.resolution), order=params["order"])
    run = jax.jit(jax.vmap(lambda w0: rollout_frames(stepper, w0[None], substeps=substeps(params),
                                                     num_frames=params["num_frames"])[:, 0]))
    coarse = np.asarray(run(reference[:, 0]))
    rel = _rel_per_frame(coarse[..., None], reference[..., None])
    out[spec.name] = dict(fine_grid=fine, fine_dt=params["dt"] / ratio, fine_seconds=round(fine_s, 1),
                          rel_l2_64_vs_fine=_pick(rel),
                          rel_l2_curve=[round(float(r), 5) for r in rel])
    print(spec.name, json.dumps(out[spec.name]), flush=True)
  return out


def main(_):
  os.makedirs(_OUT.value, exist_ok=True)
  results = dict(devices=[str(d) for d in jax.devices()], load_average_start=os.getloadavg())
  results["dt_check"] = dt_check(_TRAJ.value)
  results["grid_check"] = grid_check(_FINE.value, _FINE_TRAJ.value)
  results["load_average_end"] = os.getloadavg()
  with open(os.path.join(_OUT.value, "accuracy.json"), "w") as f:
    json.dump(results, f, indent=1)


if __name__ == "__main__":
  app.run(main)
