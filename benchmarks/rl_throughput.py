r"""Whole-training throughput of the jitted DQN (``dqn_minatar`` through the shared step) vs a
CleanRL-style loop, side by side in one run, and wall time vs the number of vmapped seeds.

Both sides use the same jaxlab ``QNetwork``, TD loss (``jaxlab.rl.dqn.td_loss``), Adam, batch 32,
update period 4 and Breakout environment (``jaxlab.rl.envs``). The baseline is the usual Python
loop: one environment step per iteration (a jitted forward pass for epsilon-greedy acting, a
jitted gymnax step), a numpy replay buffer, a jitted TD update every 4 frames. Ours: acting,
environment steps, buffer writes, sampling and the update all inside one jitted program of 250
updates (``make_train_step(collect=..., steps_per_call=250)``). Rounds alternate the two; frames
per second are medians over rounds. Nets: ``dense`` (conv16 -> Dense 128 -> Q), ``softmoe``
(8 experts of 128 units over the 100 per-pixel tokens), ``none`` (Dopamine's MinAtar net,
conv16 -> Q).

Against the hardware: each agent's update FLOPs (XLA cost analysis of one update: the loss's
online and target forward passes, the backward pass, Adam) times its updates per second, as a
fraction of the fp32 matmul peak measured in the same run (``rl_profile.matmul_peak``, a 2048^3
matmul, before and after the agents; the larger is the peak). The targets: dense >= 50%,
Soft MoE >= 40% (docs/methods/soft_moe_rl.md, "Profile of one jitted call"). ``--seed_devices=N`` shards the
vmapped seeds over N devices (on CPU: one per core, ``XLA_FLAGS=--xla_force_host_platform_device_count=N``):
XLA:CPU runs one program's small ops on one core, so seeds add throughput only across devices.

  nice -n 5 python benchmarks/rl_throughput.py --out benchmarks/results/rl/throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.config_files import load_config
from jaxlab.optim import optimizer_from_config
from jaxlab.rl import dqn
from jaxlab.rl.envs import make_env
from jaxlab.rl.replay import Transition
from jaxlab.train import make_train_step, tree_shardings, make_mesh
from jaxlab.train.state import make_init_fn
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from rl_profile import compiled_flops, matmul_peak, save_result

K = 250  # updates per jitted call


def _config(head: str, config_arg: str = ""):
  c = load_config("dqn_minatar" + (f":{config_arg}" if config_arg else ""))
  c.network.head = head
  return c


class Ours:
  """The dqn_minatar task's program: ``updates_per_call`` updates (``dqn.update_period`` frames each)
  per call, of ``configs/dqn_minatar.py`` (``config_arg``: its variant, e.g. "tiny")."""

  def __init__(self, head: str, seeds: int = 1, config_arg: str = "", updates_per_call: int = K, devices: int = 1):
    c = _config(head, config_arg)
    task = make_task(c, task_context(c))
    opt = optimizer_from_config(c.optimizer, c.num_steps)
    init = make_init_fn(task.init_params, opt, task.init_extra, task.init_data)
    kwargs = dict(collect=task.collect, update_extra=task.update_extra, steps_per_call=updates_per_call)
    if seeds == 1:
      self.state = jax.jit(init)(jax.random.key(0))
      self.step = make_train_step(task.loss_fn, opt, **kwargs)
    else:
      states = jax.jit(jax.vmap(init))(jax.random.split(jax.random.key(0), seeds))
      mesh = make_mesh((("data", devices),), jax.devices()[:devices])  # the run axis over the devices
      sharding = tree_shardings(states, mesh, run_axis="data")
      self.state = jax.device_put(states, sharding)
      self.step = make_train_step(task.loss_fn, opt, vmap_runs=True, state_sharding=sharding, **kwargs)
    self.frames_per_call = updates_per_call * c.dqn.update_period * seeds
    self.update_period = c.dqn.update_period
    self.update_flops = _update_flops(task, opt)
    self.run()  # compile

  def run(self) -> float:
    t = time.perf_counter()
    self.state, metrics = self.step(self.state)
    jax.block_until_ready(metrics)
    return time.perf_counter() - t


def _update_flops(task, opt) -> float:
  """FLOPs of one TD update (value_and_grad of the task's loss + Adam) on a replay batch."""
  state = jax.jit(make_init_fn(task.init_params, opt, task.init_extra, task.init_data))(jax.random.key(0))
  batch = jax.jit(lambda s: task.collect(s, jax.random.key(1))[1])(state)

  def update(params, opt_state, target, batch):
    (_, _), grads = jax.value_and_grad(task.loss_fn, has_aux=True)(params, batch, jax.random.key(0), target)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
  return compiled_flops(update, state.params, state.opt_state, state.extra, batch)


class CleanRL:
  """One env step per Python iteration, numpy replay, jitted TD update every 4 frames."""

  def __init__(self, head: str, seed: int = 0):
    c = _config(head)
    self.env = make_env(c.env.name)
    task = make_task(c, task_context(c))  # only for its network and loss
    self.net_params = jax.jit(task.init_params)(jax.random.key(seed))
    self.target = jax.tree.map(jnp.copy, self.net_params)
    self.opt = optimizer_from_config(c.optimizer, c.num_steps)
    self.opt_state = self.opt.init(self.net_params)
    loss_fn = task.loss_fn

    @jax.jit  # (donating params and opt_state changes nothing measurable at this size)
    def update(params, opt_state, target, batch):
      (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, None, target)
      updates, opt_state = self.opt.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, loss

    from jaxlab.rl.networks import QNetwork
    net = QNetwork(num_actions=self.env.num_actions, **dict(c.network))
    self.q = jax.jit(lambda p, o: net.apply({"params": p}, o.astype(jnp.float32))[0])
    # The step's key is folded in inside jit: one dispatch per environment step.
    self.env_step = jax.jit(lambda s, a, key, t: self.env.step(s, a, jax.random.fold_in(key, t)))
    self.update = update
    n = c.dqn.replay_capacity
    shape = self.env.obs_shape
    self.buf = {"obs": np.zeros((n, *shape), bool), "next_obs": np.zeros((n, *shape), bool),
                "action": np.zeros(n, np.int32), "reward": np.zeros(n, np.float32), "discount": np.zeros(n, np.float32)}
    self.n, self.pos, self.size, self.frames = n, 0, 0, 0
    self.rng = np.random.default_rng(seed)
    self.key = jax.random.key(seed)
    self.env_state, obs = self.env.reset(jax.random.key(seed), 1)
    self.obs = np.asarray(obs)
    self.epsilon = lambda f: float(dqn.linear_epsilon(jnp.asarray(f), c.dqn.epsilon_decay_frames, 1000, 0.01))
    self.run(1000)  # warm-up frames: fill the buffer, compile

  def run(self, frames: int) -> float:
    t = time.perf_counter()
    for _ in range(frames):
      eps = 1.0 if self.frames < 1000 else 0.05
      if self.rng.random() < eps:
        action = np.array([self.rng.integers(0, self.env.num_actions)], np.int32)
      else:
        action = np.array([np.argmax(np.asarray(self.q(self.net_params, self.obs)))], np.int32)
      self.env_state, next_obs, reward, _, info = self.env_step(self.env_state, action, self.key, self.frames)
      next_obs, reward, discount = jax.device_get((next_obs, reward, info["discount"]))
      i = self.pos
      self.buf["obs"][i], self.buf["next_obs"][i] = self.obs[0], next_obs[0]
      self.buf["action"][i], self.buf["reward"][i], self.buf["discount"][i] = action[0], reward[0], discount[0]
      self.pos, self.size, self.obs = (i + 1) % self.n, min(self.size + 1, self.n), next_obs
      self.frames += 1
      if self.frames > 1000 and self.frames % 4 == 0:
        idx = self.rng.integers(0, self.size, 32)
        batch = Transition(*(self.buf[k][idx] for k in ("obs", "action", "reward", "discount", "next_obs")))
        self.net_params, self.opt_state, _ = self.update(self.net_params, self.opt_state, self.target, batch)
      if self.frames % 1000 == 0:
        self.target = self.net_params
    jax.block_until_ready(self.net_params)
    return time.perf_counter() - t


def compare(head: str, rounds: int, baseline_frames: int) -> dict:
  ours, base = Ours(head), CleanRL(head)
  fps = {"jaxlab": [], "CleanRL loop": []}
  for _ in range(rounds):
    fps["jaxlab"].append(ours.frames_per_call / ours.run())
    fps["CleanRL loop"].append(baseline_frames / base.run(baseline_frames))
  med = {k: float(np.median(v)) for k, v in fps.items()}
  return {"frames_per_sec": med, "speedup_vs_cleanrl": {k: v / med["CleanRL loop"] for k, v in med.items()},
          "update_mflop": ours.update_flops / 1e6,
          "update_gflops": {k: v / ours.update_period * ours.update_flops / 1e9 for k, v in med.items()}}


def seeds_table(head: str, rounds: int, devices: int = 1) -> dict:
  out = {}
  for s in (1, 2, 4, 8):
    if s % devices:
      continue
    ours = Ours(head, seeds=s, devices=devices)
    t = float(np.median([ours.run() for _ in range(rounds)]))
    out[s] = {"ms_per_update": 1e3 * t / K, "frames_per_sec_per_seed": K * 4 / t, "frames_per_sec_all": K * 4 * s / t,
              "update_gflops_all": K * s * ours.update_flops / t / 1e9}
  return out


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--heads", default="dense,softmoe,none")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--baseline_frames", type=int, default=2000)
  parser.add_argument("--seed_heads", default="dense,softmoe")
  parser.add_argument("--seed_devices", type=int, default=1,
                      help="shard the seeds over this many devices; on CPU one per core, made with "
                           "XLA_FLAGS=--xla_force_host_platform_device_count=N set before the run")
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  if args.seed_devices > len(jax.devices()):
    parser.error(f"--seed_devices={args.seed_devices} but jax sees {len(jax.devices())} device(s); on CPU set "
                 f"XLA_FLAGS=--xla_force_host_platform_device_count={args.seed_devices} before the run")
  result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__, "load_avg_start": os.getloadavg()[0],
            "seed_devices": args.seed_devices,
            "matmul_gflops_start": matmul_peak(), "heads": {}, "seeds": {}}
  print("matmul peak GFLOP/s", round(result["matmul_gflops_start"], 1), flush=True)
  for head in args.heads.split(","):
    result["heads"][head] = compare(head, args.rounds, args.baseline_frames)
    print(head, json.dumps(result["heads"][head]), flush=True)
  for head in filter(None, args.seed_heads.split(",")):
    result["seeds"][head] = seeds_table(head, max(2, args.rounds // 2), args.seed_devices)
    print(head, "seeds", json.dumps(result["seeds"][head]), flush=True)
  result["load_avg_end"] = os.getloadavg()[0]
  result["matmul_gflops_end"] = matmul_peak()
  peak = result["matmul_gflops"] = max(result["matmul_gflops_start"], result["matmul_gflops_end"])
  for head, row in result["heads"].items():
    row["roofline_fraction"] = {k: v / peak for k, v in row["update_gflops"].items()}
    print(head, "fraction of the matmul peak", json.dumps({k: round(v, 3) for k, v in row["roofline_fraction"].items()}))
  for head, table in result["seeds"].items():
    for row in table.values():
      row["roofline_fraction_all"] = row["update_gflops_all"] / peak
    print(head, "seeds: fraction of the peak, all seeds",
          {s: round(r["roofline_fraction_all"], 3) for s, r in table.items()})
  save_result(args.out, result)


if __name__ == "__main__":
  main()
