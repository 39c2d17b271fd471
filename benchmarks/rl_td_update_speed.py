r"""Why a DQN TD update is slow inside lax.scan on XLA:CPU, and what a fast jitted loop looks like.

Same update everywhere: DQN, batch 32, dense MinAtar net (conv16 3x3 -> 128 -> Q), Adam, with
the network's conv either ``nn.Conv`` ("xla_conv") or the same conv as patches @ kernel
("patch_conv", identical params and outputs). Variants, all timed round-robin in one process
so background load hits them alike (minimum over rounds; the machine is shared):

  a  fwd+bwd only, jitted, called from Python per update
  b  full update (fwd+bwd+Adam), jitted, donated, called from Python per update
  c  the update inside lax.scan over K pre-made batches
  d  a full DQN iteration inside lax.scan: 4 epsilon-greedy env steps + 4 replay adds
     (flashbax, capacity 100k) + sample + update; with/without donating the carry;
     also 4 envs x 1 step per update (same 4 frames per update)
  e  d vmapped over S seeds (S = 1, 2, 4, 8): wall time per iteration of all seeds
  cleanrl  the Python-loop baseline (rl_cleanrl_baseline.run), interleaved with the rest
  replay   flashbax add+sample inside lax.scan vs capacity, donated or not
  env_steps  8 envs stepped in lax.scan with unroll=1..4 (time per env step; the fusion blow-up)

  nice -n 5 python benchmarks/rl_td_update_speed.py --out benchmarks/results/rl/td_update_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import rl_cleanrl_baseline
import rl_dqn_parts as parts
from jaxlab.rl.envs import make_env
from jaxlab.rl.replay import TimeStep, make_replay

CONVS = {"xla_conv": False, "patch_conv": True}
NETS = {"dense": parts.MinAtarQNetwork, "moe_proxy": parts.SoftMoEProxyQNetwork,
        "dopamine_net": partial(parts.MinAtarQNetwork, hidden=None)}  # no 128 hidden layer
FLOPS: dict[str, float] = {}  # XLA cost analysis of one update, per net/conv


def make_net(env, conv: str, net: str = "dense"):
  return NETS[net](env.num_actions, patch_conv=CONVS[conv])


def _block(x):
  return jax.block_until_ready(x)


def timer_calls(fn: Callable, state, k: int) -> Callable[[], float]:
  """Seconds per call of ``state = fn(state)``, K calls from Python (each waited for)."""
  box = [state]

  def once() -> float:
    s = box[0]
    t = time.perf_counter()
    for _ in range(k):
      s = _block(fn(s))
    box[0] = s
    return (time.perf_counter() - t) / k
  return once


def variants_update(env, conv: str, k: int, net_name: str = "dense",
                    unrolls: tuple[int, ...] = (1,)) -> dict[str, Callable[[], float]]:
  net = make_net(env, conv, net_name)
  tag = conv if net_name == "dense" else f"{net_name}/{conv}"
  learner = parts.init_learner(net, env.obs_shape, jax.random.key(0))
  batches = jax.vmap(lambda key: parts.random_batch(env.obs_shape, env.num_actions, key))(
      jax.random.split(jax.random.key(1), k))
  batch = jax.tree.map(lambda x: x[0], batches)

  grad = jax.jit(lambda p, b: jax.value_and_grad(parts.td_loss, argnums=1)(
      net, p, learner.target_params, b))
  update = jax.jit(partial(parts.td_update, net), donate_argnums=0)
  FLOPS[tag] = float(update.lower(learner, batch).compile().cost_analysis()["flops"])

  fresh = lambda: jax.tree.map(jnp.copy, learner)  # noqa: E731
  out = {
      f"a_fwdbwd_call/{tag}": timer_calls(lambda g: grad(learner.params, batch), None, k),
      f"b_update_call/{tag}": timer_calls(lambda l: update(l, batch)[0], fresh(), k),
  }
  for u in unrolls:
    scanned = jax.jit(lambda l, bs, u=u: jax.lax.scan(
        lambda l, b: parts.td_update(net, l, b), l, bs, unroll=u)[0], donate_argnums=0)
    name = f"c_update_scan/{tag}" + (f"/unroll={u}" if u > 1 else "")
    out[name] = timer_calls(lambda l, f=scanned: f(l, batches), fresh(), 1)
  return out


def make_loop(env, conv: str, num_envs: int, k: int, seeds: int | None, donate: bool,
              net_name: str = "dense"):
  """(jitted chunk fn, carry): K iterations of collect_and_update, optionally vmapped."""
  net = make_net(env, conv, net_name)
  replay = make_replay(parts.REPLAY_CAPACITY, num_envs, parts.BATCH_SIZE,
                       min_size=parts.MIN_REPLAY_HISTORY)
  steps = parts.UPDATE_PERIOD // num_envs

  def init(rng):
    carry = parts.init_carry(net, env, replay, num_envs, rng)
    fill = parts.MIN_REPLAY_HISTORY // num_envs + 2  # random steps so that sampling is valid
    return jax.lax.fori_loop(0, fill, lambda _, c: parts.env_step(net, env, replay, c, 1.0),
                             carry)

  def chunk(carry):
    body = lambda c, _: parts.collect_and_update(net, env, replay, c, steps)  # noqa: E731
    carry, losses = jax.lax.scan(body, carry, None, length=k)
    return parts.sync_target(carry)  # chunk boundary = target sync point

  if seeds is None:
    carry = jax.jit(init)(jax.random.key(0))
  else:
    carry = jax.jit(jax.vmap(init))(jax.random.split(jax.random.key(0), seeds))
    chunk = jax.vmap(chunk)
  fn = jax.jit(chunk, donate_argnums=0 if donate else ())
  return fn, carry


def variants_loop(env, k: int, seeds_list: list[int], loop_convs: list[str],
                  moe: bool) -> dict:
  out = {}
  if moe:
    fn, carry = make_loop(env, "patch_conv", 1, k, None, True, "moe_proxy")
    out["d_iter_scan/moe_proxy/patch_conv/donated"] = timer_calls(fn, carry, 1)
    fn, carry = make_loop(env, "patch_conv", 1, k, None, True, "dopamine_net")
    out["d_iter_scan/dopamine_net/patch_conv/donated"] = timer_calls(fn, carry, 1)
    for s in seeds_list:
      fn, carry = make_loop(env, "patch_conv", 1, k, s, True, "moe_proxy")
      out[f"e_vmap_seeds/moe_proxy/patch_conv/S={s}"] = timer_calls(fn, carry, 1)
  for conv in loop_convs:
    for donate in (True, False):
      fn, carry = make_loop(env, conv, 1, k, None, donate)
      out[f"d_iter_scan/{conv}/{'donated' if donate else 'not_donated'}"] = timer_calls(
          fn, carry, 1)
    fn, carry = make_loop(env, conv, 4, k, None, True)
    out[f"d_iter_scan_4envs/{conv}/donated"] = timer_calls(fn, carry, 1)
  for s in seeds_list:
    for conv in loop_convs:
      fn, carry = make_loop(env, conv, 1, k, s, True)
      out[f"e_vmap_seeds/{conv}/S={s}"] = timer_calls(fn, carry, 1)
  return out


def variants_replay(k: int, capacities: list[int]) -> dict:
  """Add (1 env) + sample (batch 32) inside a scan of K steps."""
  out = {}
  obs = jnp.zeros((10, 10, 4), jnp.bool_)
  step = TimeStep(obs[None], jnp.zeros([1], jnp.int32), jnp.zeros([1]), jnp.ones([1]))
  for cap in capacities:
    replay = make_replay(cap, 1, parts.BATCH_SIZE)
    state = replay.init(jax.tree.map(lambda x: x[0], step))
    state = replay.add(replay.add(state, step), step)

    def chunk(s):
      def body(s, key):
        s = replay.add(s, step)
        return s, replay.sample(s, key).reward.sum()
      s, r = jax.lax.scan(body, s, jax.random.split(jax.random.key(0), k))
      return s
    for donate in (True, False):
      fn = jax.jit(chunk, donate_argnums=0 if donate else ())
      out[f"replay_add_sample/cap={cap}/{'donated' if donate else 'not_donated'}"] = (
          timer_calls(fn, jax.tree.map(jnp.copy, state), 1))
  return out


def variants_env_unroll(env, num_envs: int, steps: int, unrolls: list[int]) -> dict:
  """``steps`` env steps of ``num_envs`` envs in lax.scan with ``unroll=u`` (no network)."""
  out = {}
  for u in unrolls:
    def chunk(carry, u=u):
      def body(c, _):
        state, obs, rng = c
        k_a, k_env, rng = jax.random.split(rng, 3)
        action = jax.random.randint(k_a, (num_envs,), 0, env.num_actions)
        state, obs, *_ = env.step(state, action, k_env)
        return (state, obs, rng), None
      return jax.lax.scan(body, carry, None, length=steps, unroll=u)[0]
    state, obs = env.reset(jax.random.key(0), num_envs)
    out[f"env_steps/{num_envs}envs/unroll={u}"] = timer_calls(
        jax.jit(chunk, donate_argnums=0), (state, obs, jax.random.key(1)), 1)
  return out


def cleanrl_timer(env_name: str, steps: int, hidden: int | None = 128) -> Callable[[], float]:
  def once() -> float:  # seconds per update period (4 env steps incl. one update)
    res = rl_cleanrl_baseline.run(env_name, steps, hidden, False, seed=0)
    return res["wall_s"] / steps * parts.UPDATE_PERIOD
  return once


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--env", default="breakout")
  ap.add_argument("--k", type=int, default=250, help="updates per timed chunk")
  ap.add_argument("--rounds", type=int, default=5)
  ap.add_argument("--seeds", default="1,2,4,8")
  ap.add_argument("--loop_convs", default="xla_conv,patch_conv")
  ap.add_argument("--capacities", default="10000,100000,1000000")
  ap.add_argument("--cleanrl_steps", type=int, default=2000)
  ap.add_argument("--env_unrolls", default="1,2,3,4")
  ap.add_argument("--env_unroll_envs", type=int, default=8)
  ap.add_argument("--env_unroll_steps", type=int, default=8)
  ap.add_argument("--moe", type=int, default=1,
                  help="also time the Soft-MoE proxy and Dopamine's (no hidden layer) nets")
  ap.add_argument("--only", default="", help="comma list of prefixes to run (default: all)")
  ap.add_argument("--out", type=pathlib.Path)
  args = ap.parse_args()
  env = make_env(args.env)
  seeds = [int(s) for s in args.seeds.split(",") if s]
  loop_convs = [c for c in args.loop_convs.split(",") if c]

  timers: dict[str, Callable[[], float]] = {}
  for conv in CONVS:
    timers.update(variants_update(env, conv, args.k,
                                  unrolls=(1, 4) if conv == "patch_conv" else (1,)))
  if args.moe:
    timers.update(variants_update(env, "patch_conv", args.k, "moe_proxy"))
    timers.update(variants_update(env, "patch_conv", args.k, "dopamine_net"))
  timers.update(variants_loop(env, args.k, seeds, loop_convs, args.moe))
  timers.update(variants_replay(args.k, [int(c) for c in args.capacities.split(",") if c]))
  unrolls = [int(u) for u in args.env_unrolls.split(",") if u]
  timers.update(variants_env_unroll(env, args.env_unroll_envs, args.env_unroll_steps, unrolls))
  if args.cleanrl_steps:
    timers["cleanrl_python_loop"] = cleanrl_timer(args.env, args.cleanrl_steps)
    if args.moe:
      timers["cleanrl_python_loop/dopamine_net"] = cleanrl_timer(args.env, args.cleanrl_steps,
                                                                 None)
  if args.only:
    timers = {n: t for n, t in timers.items() if n.startswith(tuple(args.only.split(",")))}

  per_update = {n: [] for n in timers}  # seconds per update (per timed unit)
  for name, once in timers.items():  # compile + warm up
    t = time.perf_counter()
    once()
    print(f"warm {name}: {time.perf_counter() - t:.1f}s", flush=True)
  loads = []
  for r in range(args.rounds):
    loads.append(os.getloadavg()[0])
    for name, once in timers.items():
      dt = once()
      if name.startswith("env_steps"):
        dt /= args.env_unroll_steps  # seconds per env step (all envs)
      elif not name.startswith(("a_", "b_", "cleanrl")):
        dt /= args.k
      per_update[name].append(dt)
    print(f"round {r} done, load {loads[-1]:.1f}", flush=True)

  rows = {}
  for name, ts in per_update.items():
    best = min(ts)
    row = dict(ms_min=1e3 * best, ms_median=1e3 * float(np.median(ts)))
    if not name.startswith(("a_", "replay", "env_steps")):
      seeds_n = int(name.split("S=")[1]) if "S=" in name else 1
      row["frames_per_s_per_seed"] = parts.UPDATE_PERIOD / best
      row["frames_per_s_all_seeds"] = seeds_n * parts.UPDATE_PERIOD / best
    rows[name] = row
  for name, row in rows.items():  # ratios to the CleanRL loop with the same network
    base = rows.get("cleanrl_python_loop/dopamine_net" if "dopamine_net" in name
                    else "cleanrl_python_loop")
    if base and "frames_per_s_per_seed" in row:
      row["speedup_per_seed_vs_cleanrl"] = (row["frames_per_s_per_seed"]
                                            / base["frames_per_s_per_seed"])
      row["speedup_all_seeds_vs_cleanrl"] = (row["frames_per_s_all_seeds"]
                                             / base["frames_per_s_per_seed"])
  print("flops per update:", {n: f"{f / 1e6:.1f}M" for n, f in FLOPS.items()})
  print(f"\n{'variant':48s} {'ms/upd min':>10s} {'median':>8s} {'frames/s/seed':>13s} "
        f"{'x cleanrl':>9s}")
  for name, row in rows.items():
    print(f"{name:48s} {row['ms_min']:10.3f} {row['ms_median']:8.3f} "
          f"{row.get('frames_per_s_per_seed', float('nan')):13.0f} "
          f"{row.get('speedup_per_seed_vs_cleanrl', float('nan')):9.2f}")
  if args.out:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(dict(
        benchmark="rl_td_update_speed", env=args.env, k=args.k, rounds=args.rounds,
        rows=rows, raw_s=per_update, flops_per_update=FLOPS, loadavg_1m_per_round=loads,
        jax=jax.__version__,
        machine=platform.machine(), cpus=os.cpu_count(),
        xla_flags=os.environ.get("XLA_FLAGS", "")), indent=1) + "\n")


if __name__ == "__main__":
  main()
