r"""CleanRL-style DQN baseline speed on MinAtar: a Python loop over environment steps.

One environment; per step a jitted greedy forward pass (epsilon-greedy on the host), a jitted
gymnax step (jaxlab.rl.envs, N=1), a numpy replay add; every UPDATE_PERIOD=4 steps a numpy
uniform sample of 32 transitions and a jitted TD update (dense MinAtar net, Adam 6.25e-5 / eps
1.5e-4); target sync every 1000 steps (dopamine MinAtar gin). The replay is first filled with
MIN_REPLAY_HISTORY random steps (not timed). Reports environment frames per second, updates
included: the yardstick the fully jitted loop (rl_td_update_speed.py) is compared against.

  nice -n 5 python benchmarks/rl_cleanrl_baseline.py --steps 4000 \
      --out benchmarks/results/rl/cleanrl_baseline.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import rl_dqn_parts as parts
from jaxlab.rl.envs import make_env


class NumpyReplay:
  """Circular numpy buffer of (obs, action, reward, discount, next_obs), bool observations."""

  def __init__(self, capacity: int, obs_shape):
    self.obs = np.zeros((capacity, *obs_shape), np.bool_)
    self.next_obs = np.zeros((capacity, *obs_shape), np.bool_)
    self.action = np.zeros(capacity, np.int32)
    self.reward = np.zeros(capacity, np.float32)
    self.discount = np.zeros(capacity, np.float32)
    self.capacity, self.pos, self.size = capacity, 0, 0

  def add(self, obs, action, reward, discount, next_obs) -> None:
    i = self.pos
    self.obs[i], self.action[i], self.reward[i] = obs, action, reward
    self.discount[i], self.next_obs[i] = discount, next_obs
    self.pos = (i + 1) % self.capacity
    self.size = min(self.size + 1, self.capacity)

  def sample(self, rng: np.random.Generator, batch_size: int) -> parts.Batch:
    idx = rng.integers(0, self.size, batch_size)
    return parts.Batch(self.obs[idx], self.action[idx], self.reward[idx], self.discount[idx],
                       self.next_obs[idx])


def run(env_name: str, steps: int, hidden: int | None, patch_conv: bool, seed: int) -> dict:
  env = make_env(env_name)
  net = parts.MinAtarQNetwork(env.num_actions, hidden=hidden, patch_conv=patch_conv)
  learner = parts.init_learner(net, env.obs_shape, jax.random.key(seed))
  replay = NumpyReplay(parts.REPLAY_CAPACITY, env.obs_shape)
  np_rng = np.random.default_rng(seed)

  q_values = jax.jit(lambda p, o: net.apply(p, o)[0])
  # The step key is folded in inside jit: one dispatch per env step.
  env_step = jax.jit(lambda s, a, key, t: env.step(s, a, jax.random.fold_in(key, t)))
  update = jax.jit(partial(parts.td_update, net), donate_argnums=0)
  env_key = jax.random.key(seed + 1)
  state, obs = env.reset(env_key, 1)
  obs_np = np.asarray(obs)

  def one_step(t: int, state, obs_np, learner, learn: bool):
    eps = float(parts.epsilon(t, np)) if learn else 1.0
    if np_rng.random() < eps:
      action = int(np_rng.integers(env.num_actions))
    else:
      action = int(np.argmax(np.asarray(q_values(learner.params, obs_np))))
    state, next_obs, reward, _, info = env_step(state, np.array([action], np.int32), env_key, t)
    next_obs_np, reward, discount = jax.device_get((next_obs, reward, info["discount"]))
    replay.add(obs_np[0], action, reward[0], discount[0], next_obs_np[0])
    if learn and t % parts.UPDATE_PERIOD == 0:
      learner, _ = update(learner, replay.sample(np_rng, parts.BATCH_SIZE))
      if t % parts.TARGET_UPDATE_PERIOD == 0:
        learner = parts.Learner(learner.params, jax.tree.map(jnp.copy, learner.params),
                                learner.opt_state)
    return state, next_obs_np, learner

  for t in range(parts.MIN_REPLAY_HISTORY):  # fill (random actions), not timed
    state, obs_np, learner = one_step(t, state, obs_np, learner, learn=False)
  for t in range(parts.MIN_REPLAY_HISTORY, parts.MIN_REPLAY_HISTORY + 200):  # compile, warm up
    state, obs_np, learner = one_step(t, state, obs_np, learner, learn=True)
  jax.block_until_ready(learner)
  start, cpu0 = time.perf_counter(), time.process_time()
  t0 = parts.MIN_REPLAY_HISTORY + 200
  for t in range(t0, t0 + steps):
    state, obs_np, learner = one_step(t, state, obs_np, learner, learn=True)
  jax.block_until_ready(learner)
  wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
  return dict(env=env_name, steps=steps, hidden=hidden, patch_conv=patch_conv,
              wall_s=wall, frames_per_s=steps / wall, cpu_s=cpu,
              ms_per_update_period=1e3 * wall / steps * parts.UPDATE_PERIOD)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--env", default="breakout")
  ap.add_argument("--steps", type=int, default=4000)
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--hidden", type=int, default=128, help="0: Dopamine's net (no hidden layer)")
  ap.add_argument("--patch_conv", action="store_true")
  ap.add_argument("--out", type=pathlib.Path)
  args = ap.parse_args()
  runs = []
  for r in range(args.repeats):
    res = run(args.env, args.steps, args.hidden or None, args.patch_conv, seed=r)
    res["loadavg_1m"] = os.getloadavg()[0]
    print(json.dumps(res), flush=True)
    runs.append(res)
  best = max(runs, key=lambda x: x["frames_per_s"])
  summary = dict(benchmark="rl_cleanrl_baseline", runs=runs,
                 best_frames_per_s=best["frames_per_s"],
                 median_frames_per_s=float(np.median([x["frames_per_s"] for x in runs])),
                 jax=jax.__version__, machine=platform.machine(), cpus=os.cpu_count(),
                 xla_flags=os.environ.get("XLA_FLAGS", ""))
  print(f"best {summary['best_frames_per_s']:.0f} frames/s, "
        f"median {summary['median_frames_per_s']:.0f} frames/s")
  if args.out:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
  main()
