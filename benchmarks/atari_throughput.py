r"""Atari DQN throughput (``dqn_atari`` through the shared step) and where its time goes.

For the dense (Dopamine's NatureDQNNetwork: Dense 512) and the Soft-MoE agent (8 experts of 512
units over the 121 per-pixel tokens), at the paper's network sizes and batch 32, this times:

* ``whole``: the task's program, ``--updates`` updates per jitted call (acting, envpool steps,
  replay writes and samples, the TD update), as the trainer runs it; frames/s = emulator frames
  (4 per agent step, 4 agent steps per update) per second;
* ``env``: the same number of envpool steps alone (uniformly random actions, one jitted scan),
  through each stepping route (``xla``: envpool's FFI custom calls; ``callback``: io_callback);
* ``act``: the epsilon-greedy forward passes of those steps alone;
* ``update``: the TD update alone (loss, gradient, Adam) on a fixed replay batch, in a scan.

``whole - env - act - update`` is the rest (replay writes and sampling, frame stacking, the
target sync). Rounds alternate the parts; the medians are reported. The replay is shrunk to
``--replay`` transitions (its size does not change the per-step cost once the state is donated).

  nice -n 5 python benchmarks/atari_throughput.py --out benchmarks/results/rl/atari_throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.config_files import load_config
from jaxlab.optim import optimizer_from_config
from jaxlab.rl import dqn
from jaxlab.rl.atari import make_atari
from jaxlab.rl.networks import QNetwork
from jaxlab.rl.replay_frames import StackedTransition
from jaxlab.train import make_train_step
from jaxlab.train.state import make_init_fn
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task


def _config(head: str, num_envs: int, replay: int, game: str):
  c = load_config("dqn_atari")
  c.network.head = head
  c.env.name, c.env.num_envs, c.env.step_via = game, num_envs, "xla"
  c.mesh = (("data", 1), ("model", 1))
  c.dqn.replay_capacity, c.dqn.min_replay_history = replay, 1000
  return c


def _timed(fn, *args):
  t = time.perf_counter()
  jax.block_until_ready(fn(*args))
  return time.perf_counter() - t


class Whole:
  """The task's program: ``updates`` updates per call."""

  def __init__(self, config, updates: int):
    task = make_task(config, task_context(config))
    inference = task.inference
    opt = optimizer_from_config(config.optimizer, config.num_steps)
    init = make_init_fn(task.init_params, opt, task.init_extra, task.init_data)
    self.state = jax.jit(init)(jax.random.key(0))
    self.step = make_train_step(task.loss_fn, opt, collect=task.collect, update_extra=task.update_extra,
                                steps_per_call=updates)
    self.net, self.opt, self.env = inference.model, opt, inference.data["env"]
    self.run()  # compile

  def run(self) -> float:
    t = time.perf_counter()
    self.state, metrics = self.step(self.state)
    jax.block_until_ready(metrics)
    return time.perf_counter() - t


def _env_part(env, pool_steps: int):
  def run(key):
    actions = jax.random.randint(key, (pool_steps, env.num_envs), 0, env.num_actions)
    return jax.lax.scan(lambda c, a: (c + env.step(a).reward.sum(), None), 0.0, actions)[0]
  return jax.jit(run)


def _act_part(net: QNetwork, num_envs: int, pool_steps: int):
  def run(params, key):
    stacks = jax.random.randint(key, (pool_steps, num_envs, 84, 84, 4), 0, 256).astype(jnp.uint8)
    def one(c, s):
      q, _ = net.apply({"params": params}, s)
      return c + dqn.epsilon_greedy(q, key, 0.01).sum(), None
    return jax.lax.scan(one, 0, stacks)[0]
  return jax.jit(run)


def _update_part(net: QNetwork, opt, updates: int):
  rng = np.random.default_rng(0)
  batch = StackedTransition(obs=jnp.asarray(rng.integers(0, 256, (32, 84, 84, 4)), jnp.uint8),
                            next_obs=jnp.asarray(rng.integers(0, 256, (32, 84, 84, 4)), jnp.uint8),
                            action=jnp.asarray(rng.integers(0, net.num_actions, 32), jnp.int32),
                            reward=jnp.zeros(32), discount=jnp.ones(32), weight=jnp.ones(32))
  q_fn = lambda p, o: net.apply({"params": p}, o)

  def run(params, batch):  # the batch an argument, as the replay's (a constant would be folded)
    def one(carry, _):
      p, s = carry
      grads = jax.grad(lambda p: dqn.td_loss(q_fn, p, params, batch, gamma=0.99)[0])(p)
      u, s = opt.update(grads, s, p)
      return (jax.tree.map(jnp.add, p, u), s), None
    return jax.lax.scan(one, (params, opt.init(params)), None, length=updates)[0]
  jitted = jax.jit(run)
  return lambda params: jitted(params, batch)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--heads", default="dense,softmoe")
  parser.add_argument("--game", default="Pong")
  parser.add_argument("--num_envs", type=int, default=1, help="per run (Dopamine: 1); must divide 4")
  parser.add_argument("--updates", type=int, default=10, help="updates per timed call")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--replay", type=int, default=20_000)
  parser.add_argument("--out", default="")
  args = parser.parse_args()
  results = {"device": f"{jax.device_count()} x {jax.devices()[0].platform}", "cpus": os.cpu_count(),
             "load_average_start": os.getloadavg()[0], "game": args.game, "num_envs": args.num_envs,
             "updates_per_call": args.updates, "rounds": args.rounds, "heads": {}}
  pool_steps = args.updates * 4 // args.num_envs
  frames = args.updates * 4 * 4  # 4 agent steps per update, 4 emulator frames per agent step
  for head in args.heads.split(","):
    config = _config(head, args.num_envs, args.replay, args.game)
    whole = Whole(config, args.updates)
    params = jax.tree.map(jnp.copy, whole.state.params)  # the whole program donates its state
    parts = {"whole": whole.run,
             "env_xla": lambda f=_env_part(whole.env, pool_steps): _timed(f, jax.random.key(1)),
             "act": lambda f=_act_part(whole.net, args.num_envs, pool_steps): _timed(f, params, jax.random.key(2)),
             "update": lambda f=_update_part(whole.net, whole.opt, args.updates): _timed(f, params)}
    callback_env = make_atari(args.game, num_envs=args.num_envs, step_via="callback")
    parts["env_callback"] = lambda f=_env_part(callback_env, pool_steps): _timed(f, jax.random.key(1))
    for fn in parts.values():
      fn()  # compile
    times = {name: [] for name in parts}
    for _ in range(args.rounds):
      for name, fn in parts.items():
        times[name].append(fn())
    med = {name: float(np.median(t)) for name, t in times.items()}
    rest = med["whole"] - med["env_xla"] - med["act"] - med["update"]
    results["heads"][head] = {
        "parameters": int(sum(x.size for x in jax.tree.leaves(params))),
        "frames_per_sec": frames / med["whole"], "agent_steps_per_sec": frames / 4 / med["whole"],
        "ms_per_update": 1000 * med["whole"] / args.updates,
        "ms_per_update_parts": {"env_xla": 1000 * med["env_xla"] / args.updates,
                                "env_callback": 1000 * med["env_callback"] / args.updates,
                                "act": 1000 * med["act"] / args.updates,
                                "update": 1000 * med["update"] / args.updates,
                                "rest": 1000 * rest / args.updates},
        "env_only_frames_per_sec": {"xla": frames / med["env_xla"], "callback": frames / med["env_callback"]},
        "seconds": times}
    print(head, json.dumps({k: v for k, v in results["heads"][head].items() if k != "seconds"}, indent=1), flush=True)
  results["load_average_end"] = os.getloadavg()[0]
  if args.out:
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
