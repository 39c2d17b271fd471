r"""Soft-MoE value head vs the dense value head: forward + backward time, side by side.

The MinAtar configuration of Obando-Ceron et al. (ICML 2024): 100 tokens of dim 16 (per-conv
tokens of a 10x10x16 encoder output), 8 experts of hidden 128, p = 13 slots each, flatten ->
Q over 6 actions; against flatten 1600 -> Dense(512) -> ReLU -> Q. Both time
``value_and_grad`` of a TD-like loss w.r.t. the head parameters AND the input features (the
gradient that flows on into the encoder), jitted, at batch 32 and 128. Variants of the MoE head:

  softmoe         jaxlab.moe.soft_moe (the default impl="auto": on CPU the fast kernel, two
                  exponentials, exact; chosen by jax.lax.platform_dependent when lowered)
  softmoe_kernel  soft_moe(impl="cpu_kernel"): the kernel called directly (``--heads`` only;
                  shows that "auto" costs nothing on CPU)
  softmoe_1exp    soft_moe(single_exponential=True, impl="cpu_kernel")
  softmoe_einsum  the straightforward einsum version with autodiff (soft_moe_einsum)

All heads are timed in interleaved rounds (each round runs every head once, ``inner`` calls
each) and the median per-call time is reported, with ratios to dense from the same run; the
machine is shared, so the load average is recorded. FLOPs are XLA's cost analysis of the
compiled function.

  nice -n 5 .venv/bin/python benchmarks/moe_layer_speed.py --out=benchmarks/results/moe
"""

from __future__ import annotations

import json
import os
import platform
import time
from typing import Callable

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.moe import init_soft_moe, soft_moe, soft_moe_einsum

_OUT = flags.DEFINE_string("out", "benchmarks/results/moe", "results folder")
_BATCHES = flags.DEFINE_list("batches", ["32", "128"], "batch sizes")
_ROUNDS = flags.DEFINE_integer("rounds", 30, "interleaved timing rounds (median reported)")
_INNER = flags.DEFINE_integer("inner", 3, "calls per head per round")
_HEADS = flags.DEFINE_list("heads", ["dense", "softmoe", "softmoe_1exp", "softmoe_einsum"],
                           "heads to time; the first is the baseline")

TOKENS, DIM, EXPERTS, HIDDEN, ACTIONS, DENSE_WIDTH = 100, 16, 8, 128, 6, 512


def _glorot(key, shape):
  return jax.nn.initializers.glorot_uniform()(key, shape)


def make_heads(key: jax.Array) -> dict[str, tuple[Callable, dict]]:
  """name -> (q_fn(params, tokens [b, m, d]) -> [b, A], params)."""
  k_moe, k_q, k_d, k_dq = jax.random.split(key, 4)
  moe_params = init_soft_moe(k_moe, DIM, EXPERTS, -(-TOKENS // EXPERTS), HIDDEN)
  moe_params["q"] = {"kernel": _glorot(k_q, (TOKENS * DIM, ACTIONS)), "bias": jnp.zeros(ACTIONS)}
  dense_params = {"hidden": {"kernel": _glorot(k_d, (TOKENS * DIM, DENSE_WIDTH)),
                             "bias": jnp.zeros(DENSE_WIDTH)},
                  "q": {"kernel": _glorot(k_dq, (DENSE_WIDTH, ACTIONS)), "bias": jnp.zeros(ACTIONS)}}

  def q_head(p, y):
    return y.reshape(y.shape[0], -1) @ p["q"]["kernel"] + p["q"]["bias"]

  def dense(p, x):
    h = jax.nn.relu(x.reshape(x.shape[0], -1) @ p["hidden"]["kernel"] + p["hidden"]["bias"])
    return h @ p["q"]["kernel"] + p["q"]["bias"]

  heads = {
      "dense": (dense, dense_params),
      "softmoe": (lambda p, x: q_head(p, soft_moe(p, x)[0]), moe_params),
      "softmoe_kernel": (lambda p, x: q_head(p, soft_moe(p, x, impl="cpu_kernel")[0]), moe_params),
      "softmoe_1exp": (lambda p, x: q_head(p, soft_moe(p, x, single_exponential=True, impl="cpu_kernel")[0]),
                       moe_params),
      "softmoe_einsum": (lambda p, x: q_head(p, soft_moe_einsum(p, x)), moe_params),
  }
  return {k: heads[k] for k in _HEADS.value}


def make_step(q_fn: Callable) -> Callable:
  def loss(params, x, actions, targets):
    q = jnp.take_along_axis(q_fn(params, x), actions[:, None], axis=1)[:, 0]
    return jnp.mean(jnp.square(q - targets))
  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def main(_):
  os.makedirs(_OUT.value, exist_ok=True)
  heads = make_heads(jax.random.key(0))
  results = {"config": dict(tokens=TOKENS, dim=DIM, experts=EXPERTS, slots=-(-TOKENS // EXPERTS),
                            expert_hidden=HIDDEN, actions=ACTIONS, dense_width=DENSE_WIDTH,
                            rounds=_ROUNDS.value, inner=_INNER.value),
             "machine": dict(cpus=os.cpu_count(), processor=platform.processor(),
                             jax=jax.__version__, backend=jax.default_backend()),
             "batches": {}}
  baseline = _HEADS.value[0]
  for batch in map(int, _BATCHES.value):
    kx, ka, kt = jax.random.split(jax.random.key(batch), 3)
    x = jax.nn.relu(jax.random.normal(kx, (batch, TOKENS, DIM)))  # post-ReLU encoder features
    actions = jax.random.randint(ka, (batch,), 0, ACTIONS)
    targets = jax.random.normal(kt, (batch,))
    steps, flops = {}, {}
    for name, (q_fn, params) in heads.items():
      steps[name] = make_step(q_fn)
      compiled = steps[name].lower(params, x, actions, targets).compile()
      cost = compiled.cost_analysis()
      cost = cost[0] if isinstance(cost, (list, tuple)) else cost
      flops[name] = float(cost.get("flops", float("nan")))
      jax.block_until_ready(steps[name](params, x, actions, targets))  # warm up
    load_before = os.getloadavg()
    times = {name: [] for name in heads}
    for _ in range(_ROUNDS.value):
      for name, (_, params) in heads.items():
        start = time.perf_counter()
        for _ in range(_INNER.value):
          out = steps[name](params, x, actions, targets)
        jax.block_until_ready(out)
        times[name].append((time.perf_counter() - start) / _INNER.value)
    load_after = os.getloadavg()
    med = {k: float(np.median(v)) for k, v in times.items()}
    row = {"load_avg_1min_before_after": [load_before[0], load_after[0]], "heads": {}}
    for name in heads:
      row["heads"][name] = {
          "median_ms": 1e3 * med[name], "min_ms": 1e3 * float(np.min(times[name])),
          "ratio_to_" + baseline: med[name] / med[baseline],
          "min_ratio_to_" + baseline: float(np.min(times[name]) / np.min(times[baseline])),
          "xla_flops": flops[name], "gflop_per_s": flops[name] / med[name] / 1e9,
      }
    results["batches"][str(batch)] = row
    print(f"batch {batch} (load {load_before[0]:.1f} -> {load_after[0]:.1f})")
    for name, r in row["heads"].items():
      print(f"  {name:15s} {r['median_ms']:7.2f} ms (min {r['min_ms']:6.2f})  "
            f"x{r['ratio_to_' + baseline]:.2f} (min x{r['min_ratio_to_' + baseline]:.2f})  "
            f"{r['xla_flops'] / 1e6:7.1f} MFLOP  {r['gflop_per_s']:5.1f} GFLOP/s")
  path = os.path.join(_OUT.value, "moe_layer_speed.json")
  with open(path, "w") as f:
    json.dump(results, f, indent=2)
  print("wrote", path)


if __name__ == "__main__":
  app.run(main)
