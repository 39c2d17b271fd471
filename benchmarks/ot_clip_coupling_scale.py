r"""Per-device memory and step time of the OT-CLIP losses' B x B coupling: held whole vs split by rows vs chunked.

Side by side in one run, on XLA:CPU virtual devices (compile-only memory from XLA's
``compiled.memory_analysis().temp_size_in_bytes``; nothing of size B^2 is allocated):

* ``memory``: value-and-gradient of each loss w.r.t. both [B, dim] embeddings sharded by rows
  (``P("data")`` on an Explicit 8-device mesh, as ``jax.make_mesh`` makes it), at B = 8k..64k:
  *whole* is the dense definition as it ran before (every device holds the coupling:
  ``LOSSES.get(name)``), *rows* is ``get_loss(name)`` (the coupling split by rows). In units of
  one B x B / n float32 block.
* ``devices``: the rows split over 1, 2, 4 and 8 devices at B = 8192 (``--devices_losses``): the
  per-device temp must fall as 1/n (FGW and U-FG hold more blocks than the others; this shows they
  are split by rows all the same).
* ``chunked``: the same on one device with ``get_loss(name, chunk_size=...)`` at B = 65,536,
  dim 512 (the 2 GiB goal), and at the batches above.
* ``step_time``: value-and-gradient seconds, whole vs rows, on the 8 virtual devices at a batch
  where both fit (interleaved repeats, median), and chunked vs dense on one device.
* ``cli``: ``python -m jaxlab.main`` (``configs/clip_files.py:tiny``, synthetic paired embeddings
  written to ``--workdir``) at ``--config.batch_size=16384`` on 8 virtual devices, a few steps.

  XLA_FLAGS=--xla_force_host_platform_device_count=8 nice -n 5 python benchmarks/ot_clip_coupling_scale.py \
      --out=benchmarks/results/ot_clip/coupling_scale.json [--sections=memory,devices,chunked,step_time,cli]

``--sections`` runs some of the five and merges them into an existing result file, each section with
the command that wrote it. CPU time on 2 cores: memory ~10 min (72 compiles), devices ~2 min, chunked ~3 min,
step_time ~5 min, cli ~5 min.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOSSES_ALL = ("infonce", "siglip", "one_sided_ot", "entropic_ot", "unbalanced_ot", "dbot", "fgw", "ufgw")
CHUNKED = ("infonce", "siglip", "entropic_ot", "unbalanced_ot", "dbot")
HYPER = {"entropic_ot": {"num_iterations": 5}, "unbalanced_ot": {"num_iterations": 5}, "dbot": {"num_iterations": 5},
         "fgw": {"num_iterations": 5, "num_outer": 3}, "ufgw": {"num_iterations": 5, "num_outer": 3}}
SCALE, BIAS = 14.0, -10.0
GIB = 2.0 ** 30


def _parse() -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--out", default="")
  p.add_argument("--sections", default="memory,devices,chunked,step_time,cli", help="which parts to run")
  p.add_argument("--devices", type=int, default=8)
  p.add_argument("--batches", default="8192,16384,32768,65536")
  p.add_argument("--dim", type=int, default=256, help="embedding width of the memory table")
  p.add_argument("--losses", default=",".join(LOSSES_ALL))
  p.add_argument("--whole_max_batch", type=int, default=65536, help="skip whole-coupling compiles above this")
  p.add_argument("--devices_losses", default="entropic_ot,fgw,ufgw", help="losses of the 'devices' section")
  p.add_argument("--chunked_batch", type=int, default=65536)
  p.add_argument("--chunked_dim", type=int, default=512)
  p.add_argument("--chunk_size", type=int, default=1024)
  p.add_argument("--time_batch", type=int, default=2048)
  p.add_argument("--time_chunk", type=int, default=256, help="chunk_size of the one-device chunked timing")
  p.add_argument("--repeats", type=int, default=7)
  p.add_argument("--cli_batch", type=int, default=16384)
  p.add_argument("--cli_steps", type=int, default=3)
  p.add_argument("--workdir", default="runs/coupling_scale", help="the CLI's data and run folder")
  return p.parse_args()


def main() -> None:
  args = _parse()
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={args.devices}").strip()
  sys.path.insert(0, str(ROOT))
  from jaxlab.xla_flags import add_cpu_collective_timeouts  # pylint: disable=import-outside-toplevel
  add_cpu_collective_timeouts()
  import jax  # pylint: disable=import-outside-toplevel

  losses = args.losses.split(",")
  batches = [int(b) for b in args.batches.split(",")]
  command = ("XLA_FLAGS=--xla_force_host_platform_device_count=8 python benchmarks/ot_clip_coupling_scale.py "
             + " ".join(sys.argv[1:]))
  path = pathlib.Path(args.out) if args.out else None
  # Sections can be run one at a time (each within a few CPU-minutes); each keeps its own command.
  out: dict[str, Any] = json.loads(path.read_text()) if path is not None and path.exists() else {}
  out.update({"jax": jax.__version__, "devices": jax.device_count(), "platform": jax.devices()[0].platform,
              "dim": args.dim, "logit_scale": SCALE,
              "unit": "per-device temp bytes / (4 * B^2 / devices), one float32 block of the coupling's rows",
              "hyper": HYPER})
  runs = {"memory": lambda: memory_table(losses, batches, args), "chunked": lambda: chunked_table(args, batches),
          "devices": lambda: devices_table(args),
          "step_time": lambda: step_times(args), "cli": lambda: run_cli(args)}
  for section in args.sections.split(","):
    load = os.getloadavg()
    out[section] = runs[section]()
    out[section].update(command=command, load_average_at_start=load)
    if path is not None:
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text(json.dumps(out, indent=1) + "\n")
      print("wrote", path, "section", section, flush=True)


def _inputs(batch: int, dim: int, mesh: Any) -> tuple[Any, Any, Any]:
  import jax  # pylint: disable=import-outside-toplevel
  from jax.sharding import NamedSharding, PartitionSpec as P  # pylint: disable=import-outside-toplevel
  sharding = None if mesh is None else NamedSharding(mesh, P("data"))
  spec = jax.ShapeDtypeStruct((batch, dim), "float32", sharding=sharding)
  return spec, spec, jax.ShapeDtypeStruct((), "float32")


def _value_and_grad(loss: Callable[..., Any], scale_grad: bool = False) -> Callable[..., Any]:
  """jit(value_and_grad) over both embeddings (and the logit scale); the scale is traced, as a learned one is."""
  import jax  # pylint: disable=import-outside-toplevel
  return jax.jit(jax.value_and_grad(lambda x, y, s: loss(x, y, s, BIAS), argnums=(0, 1, 2) if scale_grad else (0, 1)))


def _temp_bytes(fn: Callable[..., Any], *specs: Any) -> tuple[int, float]:
  start = time.process_time()
  mem = fn.lower(*specs).compile().memory_analysis()
  return int(mem.temp_size_in_bytes), time.process_time() - start


def memory_table(losses: list[str], batches: list[int], args: argparse.Namespace) -> dict[str, Any]:
  """Per-device temp of the whole coupling (the dense definition) vs the rows split over "data"."""
  import jax  # pylint: disable=import-outside-toplevel
  from jaxlab.ot_clip import LOSSES, get_loss  # pylint: disable=import-outside-toplevel
  mesh = jax.make_mesh((args.devices,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))
  rows: dict[str, Any] = {}
  for name in losses:
    hyper = HYPER.get(name, {})
    forms = {"whole": lambda x, y, s, b, f=LOSSES.get(name), h=hyper: f(x, y, s, b, **h),
             "rows": get_loss(name, **hyper)}
    for batch in batches:
      block = 4.0 * batch * batch / args.devices
      for form, loss in forms.items():
        if form == "whole" and batch > args.whole_max_batch:
          continue
        with jax.set_mesh(mesh):
          temp, cpu = _temp_bytes(_value_and_grad(loss), *_inputs(batch, args.dim, mesh))
        row = {"temp_bytes": temp, "temp_gib": temp / GIB, "blocks": temp / block, "compile_cpu_s": cpu}
        rows.setdefault(name, {}).setdefault(form, {})[str(batch)] = row
        print(f"memory {name} {form} B={batch}: {temp / GIB:.3f} GiB = {temp / block:.2f} x B^2/{args.devices}",
              flush=True)
    # As a train step differentiates it: the learned scale's gradient too, at the smallest batch.
    batch = batches[0]
    with jax.set_mesh(mesh):
      temp, cpu = _temp_bytes(_value_and_grad(forms["rows"], scale_grad=True), *_inputs(batch, args.dim, mesh))
    rows[name]["rows_with_scale_grad"] = {str(batch): {"temp_bytes": temp, "temp_gib": temp / GIB,
                                                       "blocks": temp / (4.0 * batch * batch / args.devices)}}
  return {"mesh": f"data{args.devices} (Explicit)", "gradients": "both embeddings (rows_with_scale_grad: and the scale)",
          "losses": rows}


def devices_table(args: argparse.Namespace) -> dict[str, Any]:
  """Per-device temp of the rows split over 1, 2, 4, ... devices at the first batch: does it fall as 1/n?"""
  import jax  # pylint: disable=import-outside-toplevel
  from jaxlab.ot_clip import get_loss  # pylint: disable=import-outside-toplevel
  batch = int(args.batches.split(",")[0])
  counts = [n for n in (1, 2, 4, 8, 16) if n <= args.devices]
  out: dict[str, Any] = {"batch": batch, "dim": args.dim, "devices": counts,
                         "note": "1 device: the dense definition (nothing to split); blocks of B^2 / n"}
  for name in args.devices_losses.split(","):
    loss = get_loss(name, **HYPER.get(name, {}))
    for n in counts:
      mesh = jax.make_mesh((n,), ("data",), devices=jax.devices()[:n], axis_types=(jax.sharding.AxisType.Explicit,))
      with jax.set_mesh(mesh):
        temp, cpu = _temp_bytes(_value_and_grad(loss), *_inputs(batch, args.dim, mesh))
      out.setdefault(name, {})[str(n)] = {"temp_bytes": temp, "temp_gib": temp / GIB,
                                          "blocks": temp / (4.0 * batch * batch / n), "compile_cpu_s": cpu}
      print(f"devices {name} n={n} B={batch}: {temp / GIB:.3f} GiB = {temp / (4.0 * batch * batch / n):.2f} x B^2/n",
            flush=True)
  return out


def chunked_table(args: argparse.Namespace, batches: list[int]) -> dict[str, Any]:
  """One device, ``chunk_size`` rows at a time: temp at the goal size and at the table's batches."""
  from jaxlab.ot_clip import get_loss  # pylint: disable=import-outside-toplevel
  out: dict[str, Any] = {"chunk_size": args.chunk_size, "goal": {"batch": args.chunked_batch,
                                                                   "dim": args.chunked_dim, "limit_gib": 2.0}}
  for name in CHUNKED:
    loss = get_loss(name, chunk_size=args.chunk_size, **HYPER.get(name, {}))
    temp, cpu = _temp_bytes(_value_and_grad(loss, scale_grad=True), *_inputs(args.chunked_batch, args.chunked_dim, None))
    out.setdefault("at_goal", {})[name] = {"temp_bytes": temp, "temp_gib": temp / GIB, "compile_cpu_s": cpu,
                                           "within_goal": temp <= 2 * GIB}
    print(f"chunked {name} B={args.chunked_batch} D={args.chunked_dim}: {temp / GIB:.3f} GiB", flush=True)
    for batch in batches:
      temp, cpu = _temp_bytes(_value_and_grad(loss), *_inputs(batch, args.dim, None))
      out.setdefault("by_batch", {}).setdefault(name, {})[str(batch)] = {
          "temp_bytes": temp, "temp_gib": temp / GIB, "blocks_of_B2_over_8": temp / (4.0 * batch * batch / 8)}
  return out


def _interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, dict[str, float]]:
  """Median and min seconds per function, round-robin so that machine load hits each alike."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  for fn in fns.values():
    jax.block_until_ready(fn())
  times: dict[str, list[float]] = {k: [] for k in fns}
  for _ in range(repeats):
    for k, fn in fns.items():
      t0 = time.perf_counter()
      jax.block_until_ready(fn())
      times[k].append(time.perf_counter() - t0)
  return {k: {"median_s": float(np.median(t)), "min_s": float(np.min(t))} for k, t in times.items()}


def step_times(args: argparse.Namespace) -> dict[str, Any]:
  """Value-and-grad seconds: whole vs rows on the devices; dense vs chunked on one device."""
  import jax  # pylint: disable=import-outside-toplevel
  from jax.sharding import NamedSharding, PartitionSpec as P  # pylint: disable=import-outside-toplevel
  from jaxlab.ot_clip import LOSSES, get_loss  # pylint: disable=import-outside-toplevel
  batch = args.time_batch
  mesh = jax.make_mesh((args.devices,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))
  kx, ky = jax.random.split(jax.random.key(0))
  x = jax.random.normal(kx, (batch, args.dim))
  y = x + jax.random.normal(ky, (batch, args.dim))
  xs, ys = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (x, y))
  out: dict[str, Any] = {"batch": batch, "dim": args.dim, "repeats": args.repeats, "chunk_size": args.time_chunk,
                         "note": "virtual CPU devices share the host's cores: 'whole' runs the full loss on every "
                                 "device, 'rows' 1/n of it on each"}
  for name in ("infonce", "entropic_ot", "unbalanced_ot", "dbot"):
    hyper = HYPER.get(name, {})
    whole = _value_and_grad(lambda a, b, s, c, f=LOSSES.get(name), h=hyper: f(a, b, s, c, **h), scale_grad=True)
    rows = _value_and_grad(get_loss(name, **hyper), scale_grad=True)
    dense = _value_and_grad(get_loss(name, **hyper), scale_grad=True)
    chunked = _value_and_grad(get_loss(name, chunk_size=args.time_chunk, **hyper), scale_grad=True)
    with jax.set_mesh(mesh):
      sharded = _interleaved({"whole": lambda: whole(xs, ys, SCALE), "rows": lambda: rows(xs, ys, SCALE)},
                             args.repeats)
    one = _interleaved({"dense": lambda: dense(x, y, SCALE), "chunked": lambda: chunked(x, y, SCALE)}, args.repeats)
    out[name] = {"devices": sharded, "rows_over_whole": sharded["rows"]["median_s"] / sharded["whole"]["median_s"],
                 "one_device": one, "chunked_over_dense": one["chunked"]["median_s"] / one["dense"]["median_s"]}
    print(f"time {name}: rows/whole {out[name]['rows_over_whole']:.3f}, "
          f"chunked/dense {out[name]['chunked_over_dense']:.3f}", flush=True)
  return out


def run_cli(args: argparse.Namespace) -> dict[str, Any]:
  """The two-tower task through ``python -m jaxlab.main`` at a CLIP-scale batch on the virtual devices."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  work = pathlib.Path(args.workdir)
  shutil.rmtree(work / "run", ignore_errors=True)  # a fresh run each time, not a resume of the last one
  data = work / "pairs"
  data.mkdir(parents=True, exist_ok=True)
  rows = int(args.cli_batch / 0.8) + 64  # the tiny config holds out 20 %: the rest holds one global batch
  r = np.random.default_rng(0)
  image = r.standard_normal((rows, 32)).astype(np.float32)
  np.save(data / "image.npy", image)
  np.save(data / "text.npy", (image + 0.5 * r.standard_normal(image.shape)).astype(np.float32))
  flags = [f"--config.data.dir={data}", "--config.data.embeddings=.", f"--config.batch_size={args.cli_batch}",
           f"--config.num_steps={args.cli_steps}", "--config.log_every=1", f"--config.eval_every={args.cli_steps}",
           f"--config.checkpoint_every={args.cli_steps}", "--config.prefetch=0"]
  cmd = [sys.executable, "-m", "jaxlab.main", "--config=configs/clip_files.py:tiny", f"--workdir={work / 'run'}",
         *flags]
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  start, cpu0 = time.perf_counter(), os.times()
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
  cpu1 = os.times()
  shown = ["XLA_FLAGS=--xla_force_host_platform_device_count=8", "python", "-m", "jaxlab.main",
           "--config=configs/clip_files.py:tiny", "--workdir=<workdir>/run",
           *[f.replace(str(data), "<workdir>/pairs") for f in flags]]
  # "cli_command": the run's own command ("command" is the section's: the benchmark's).
  result = {"cli_command": " ".join(shown), "data": f"{rows} synthetic pairs of 32-dim embeddings (text = image + noise)",
            "returncode": proc.returncode, "wall_s": time.perf_counter() - start,
            "children_cpu_s": (cpu1.children_user + cpu1.children_system) - (cpu0.children_user + cpu0.children_system),
            "summary": {line.split()[0]: " ".join(line.split()[1:]) for line in proc.stdout.splitlines()
                        if line.split() and line.split()[0] in ("devices", "mesh", "steps", "final_loss",
                                                                 "nonfinite_skipped", "pairs_per_sec")},
            "stderr_tail": proc.stderr[-600:] if proc.returncode else ""}
  print("cli", {k: v for k, v in result.items() if not k.endswith("_tail")}, flush=True)
  return result


if __name__ == "__main__":
  main()
