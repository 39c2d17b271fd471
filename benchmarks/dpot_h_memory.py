r"""Per-device memory of the DPOT-H train step on (data x model) meshes, from compiled abstract steps.

Nothing is allocated: the state and batch are ``ShapeDtypeStruct``s with shardings, the step is
``jaxlab.train.make_train_step`` (Adam, relative-L2 loss) with ``jaxlab.pde.sharding`` rules,
and XLA's ``memory_analysis()`` gives per-device argument (params + Adam + batch), temporary
(activations, gradients, workspace) and output bytes. Virtual CPU devices stand in for
accelerators, so the temporaries are XLA:CPU's schedule; treat them as estimates.

  nice -n 5 .venv/bin/python benchmarks/dpot_h_memory.py --devices=16 --out=benchmarks/results/dpot/h_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--devices", type=int, default=16)
  parser.add_argument("--size", default="H")
  parser.add_argument("--configs", default="8x1:8,2x4:8,2x4:32,4x2:32,4x4:32,4x4:64",
                      help="data x model : global batch, comma-separated (meshes larger than --devices are skipped)")
  parser.add_argument("--remat", default="1", help="1, 0 or 0,1")
  parser.add_argument("--out", default="")
  args = parser.parse_args()
  os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
  os.environ["JAX_PLATFORMS"] = "cpu"
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  from jax.sharding import NamedSharding, PartitionSpec as P  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.dpot import init_params  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.losses import make_loss_fn  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.sharding import dpot_state_shardings  # pylint: disable=import-outside-toplevel
  from jaxlab.pde.sizes import make_dpot  # pylint: disable=import-outside-toplevel
  from jaxlab.train import TrainState, make_mesh, make_train_step  # pylint: disable=import-outside-toplevel

  opt = optax.chain(optax.add_decayed_weights(1e-6), optax.adam(1e-3, b1=0.9, b2=0.9))
  rows = []
  for remat in [r == "1" for r in args.remat.split(",")]:
    model = make_dpot(args.size, remat=remat)
    state = jax.eval_shape(lambda k, m=model: TrainState.create(init_params(m, k), opt, k), jax.random.key(0))
    total_state = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(state))
    for spec in args.configs.split(","):
      mesh_spec, batch = spec.split(":")
      data, mdl = (int(v) for v in mesh_spec.split("x"))
      if data * mdl > args.devices:
        continue
      devices = jax.devices()[:data * mdl]
      mesh = make_mesh((("data", data), ("model", mdl)), devices=devices)
      shardings = dpot_state_shardings(state, mesh)
      abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), state, shardings)
      ds = NamedSharding(mesh, P("data"))
      n, b = model.img_size, int(batch)
      xb = {"x": jax.ShapeDtypeStruct((b, n, n, model.in_timesteps, model.in_channels), jnp.float32, sharding=ds),
            "y": jax.ShapeDtypeStruct((b, n, n, model.out_timesteps, model.out_channels), jnp.float32, sharding=ds)}
      step = make_train_step(make_loss_fn(model.apply), opt, state_sharding=shardings, batch_sharding=ds)
      start = time.process_time()
      compiled = step.jitted.lower(abstract, xb).compile()
      mem = compiled.memory_analysis()
      row = {"size": args.size, "remat": remat, "mesh": f"data{data}xmodel{mdl}", "global_batch": b,
             "samples_per_data_shard": b // data, "state_gb_total": total_state / 1e9,
             "argument_gb_per_device": mem.argument_size_in_bytes / 1e9,
             "temp_gb_per_device": mem.temp_size_in_bytes / 1e9,
             "output_gb_per_device": mem.output_size_in_bytes / 1e9,
             "alias_gb_per_device": mem.alias_size_in_bytes / 1e9,
             "peak_estimate_gb_per_device": (mem.argument_size_in_bytes + mem.temp_size_in_bytes
                                             + mem.output_size_in_bytes - mem.alias_size_in_bytes) / 1e9,
             "compile_cpu_s": time.process_time() - start}
      rows.append(row)
      print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
  if args.out:
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))
    print("wrote", out)


if __name__ == "__main__":
  main()
