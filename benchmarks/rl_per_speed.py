r"""Prioritised replay's priorities on this machine: jaxlab's two-level blocks vs flashbax's sum tree.

One prioritised-replay iteration as a Rainbow agent does it, inside ``lax.scan`` (the jitted RL
loop), carry donated: ``num_envs`` new items at the largest priority recorded, a batch of 32
drawn in proportion to the priorities, the batch's new priorities set. Contenders, all doing that
work on the same capacities, timed round-robin in one process, so each ratio is measured side by
side. Each call is timed in wall-clock time (minimum and median over rounds) and in the process's CPU
time (``time.process_time``): on a shared machine the wall clock also counts the time other jobs
held the cores, the CPU time does not. Contenders:

* ``jaxlab_tree``: :mod:`jaxlab.rl.priorities` (what jaxlab uses);
* ``flat_cumsum``, ``binary_tree``: our other two (benchmarks/rl_per_contenders.py);
* ``flashbax_scan`` / ``flashbax_bincount``: flashbax's sum tree with the setter its prioritised
  buffer picks on CPU (``set_batch_scan``) and its other one, sampled with its ``stratified_sample``.

Before timing, each contender's sampling is checked: the probabilities it reports are ``p_i / sum
p`` and 20,000 draws from 50 items of unequal priority match them (``correct`` in the output).

  python benchmarks/rl_per_speed.py --rounds 15 --out benchmarks/results/rl/per_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flashbax.buffers import sum_tree as fbx_tree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rl_per_contenders as other  # noqa: E402

from jaxlab.rl import priorities  # noqa: E402

BATCH = 32


def _flashbax_sample(tree, rng, batch_size):
  indices = fbx_tree.stratified_sample(tree, batch_size, rng)
  return indices, fbx_tree.get_probability(tree, indices)


def _flashbax_init(capacity):
  tree = fbx_tree.init(capacity)
  return tree.replace(max_recorded_priority=jnp.ones((), jnp.float32))


def _max_of(state):
  return state.max_recorded_priority if hasattr(state, "max_recorded_priority") else state.max_priority


#: name -> (init(capacity), set(state, indices, values), sample(state, rng, batch_size) -> (indices, probs))
CONTENDERS = {
    "jaxlab_tree": (priorities.init, priorities.set_priorities, priorities.sample),
    "flat_cumsum": (other.flat_init, other.flat_set, other.flat_sample),
    "binary_tree": (other.tree_init, other.tree_set, other.tree_sample),
    "flashbax_scan": (_flashbax_init, fbx_tree.set_batch_scan, _flashbax_sample),
    "flashbax_bincount": (_flashbax_init, fbx_tree.set_batch_bincount, _flashbax_sample),
}


def _timed_program(init, setter, sampler, capacity, num_envs, k):
  def body(carry, _):
    state, cursor, key = carry
    key, k_sample, k_pri = jax.random.split(key, 3)
    new = (cursor + jnp.arange(num_envs)) % capacity
    state = setter(state, new, jnp.broadcast_to(_max_of(state), (num_envs,)))
    indices, _ = sampler(state, k_sample, BATCH)
    state = setter(state, indices, jax.random.uniform(k_pri, (BATCH,)) + 0.01)
    return (state, (cursor + num_envs) % capacity, key), None

  run = jax.jit(lambda c: jax.lax.scan(body, c, None, length=k)[0], donate_argnums=0)
  return run, (_full(init(capacity), capacity), jnp.int32(0), jax.random.key(0))


def _full(state, capacity):
  """``state`` with every one of ``capacity`` priorities 1 (a full replay), built in O(capacity)."""
  ones = jnp.ones((capacity,), jnp.float32)
  if isinstance(state, priorities.Priorities):
    levels = [state.levels[0].at[:capacity].set(1.0)]
    for above in state.levels[1:]:
      levels.append(jnp.sum(levels[-1].reshape(above.shape[0], -1), axis=1))
    return state._replace(levels=tuple(levels))
  if isinstance(state, other.Flat):
    return state._replace(values=ones)
  if isinstance(state, other.SumTree):
    return other.tree_from_priorities(ones)
  return jax.jit(fbx_tree.set_batch_bincount)(state, jnp.arange(capacity), ones)


def _check(init, setter, sampler) -> bool:
  """Reported probabilities are p / sum p, and 20,000 draws follow them (a loose 5-sigma check)."""
  n, draws = 50, 20_000
  p = np.random.default_rng(0).uniform(0.1, 2.0, n).astype(np.float32)
  state = setter(init(n), jnp.arange(n), jnp.asarray(p))
  want = p.astype(np.float64) / p.astype(np.float64).sum()
  keys = jax.random.split(jax.random.key(1), draws // BATCH + 1)
  idx, probs = jax.jit(jax.vmap(lambda k: sampler(state, k, BATCH)))(keys)
  idx, probs = np.asarray(idx).ravel(), np.asarray(probs).ravel()
  counts = np.bincount(idx, minlength=n)
  expected = want * idx.size
  ok_probs = np.allclose(probs, want[idx], rtol=1e-4)
  ok_counts = np.all(np.abs(counts - expected) <= 5 * np.sqrt(expected) + 1)
  return bool(ok_probs and ok_counts and idx.max() < n)


def _stats(name: str, seconds: list[float]) -> dict[str, float]:
  ordered = sorted(seconds)
  return {f"{name}_min": round(1e6 * ordered[0], 2), f"{name}_median": round(1e6 * ordered[len(ordered) // 2], 2)}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--capacities", default="100000,1000000")
  parser.add_argument("--num_envs", type=int, default=1)
  parser.add_argument("--k", type=int, default=200, help="iterations per timed call")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--out", default="")
  args = parser.parse_args()
  correct = {name: _check(*fns) for name, fns in CONTENDERS.items()}
  rows = {}
  for capacity in (int(c) for c in args.capacities.split(",")):
    built = {name: _timed_program(*fns, capacity, args.num_envs, args.k) for name, fns in CONTENDERS.items()}
    state = {name: jax.block_until_ready(run(carry)) for name, (run, carry) in built.items()}  # compile, warm up
    wall, cpu = {name: [] for name in built}, {name: [] for name in built}
    for _ in range(args.rounds):
      for name, (run, _) in built.items():
        start, start_cpu = time.perf_counter(), time.process_time()
        state[name] = jax.block_until_ready(run(state[name]))
        wall[name].append((time.perf_counter() - start) / args.k)
        cpu[name].append((time.process_time() - start_cpu) / args.k)
    row = rows[str(capacity)] = {name: {**_stats("us_per_iteration", wall[name]), **_stats("cpu_us_per_iteration", cpu[name])}
                                 for name in built}
    for name in CONTENDERS:  # > 1: slower than ours
      for key in ("us_per_iteration_min", "cpu_us_per_iteration_median"):
        row[name][f"ratio_to_jaxlab_tree/{key}"] = round(row[name][key] / row["jaxlab_tree"][key], 3)
  result = {"benchmark": "rl_per_speed",
            "command": "python benchmarks/rl_per_speed.py " + " ".join(
                f"--{k}={v}" for k, v in vars(args).items() if k != "out"),
            "batch_size": BATCH, "num_envs": args.num_envs, "k": args.k, "rounds": args.rounds,
            "backend": jax.default_backend(), "jax": jax.__version__, "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "load_average_at_start": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d"),
            "correct": correct, "capacities": rows}
  text = json.dumps(result, indent=1)
  print(text)
  if args.out:
    with open(args.out, "w") as f:
      f.write(text + "\n")


if __name__ == "__main__":
  main()
