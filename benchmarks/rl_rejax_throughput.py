r"""DQN training throughput of jaxlab's ``dqn_minatar`` beside rejax's jitted DQN, the same network in both.

rejax (PyPI ``rejax`` 0.1.3, ``rejax/algos/dqn.py``) jits a whole DQN agent and vmaps it over
seeds, as we do.
Both sides here train jaxlab's own ``QNetwork`` (``network.*`` of ``configs/dqn_minatar.py``:
``dense`` = conv16 -> Dense 128 -> Q; ``softmoe`` = 8 experts x 128 units over the 100 per-pixel
tokens), plugged into rejax as its agent (:class:`JaxlabAgent`), on Breakout-MinAtar, batch 32,
replay 100k, target sync every 1000 frames, one update per 4 frames, Adam.

The loops differ in how the 4 frames of an update are collected:

* ``jaxlab num_envs=1``: the default config: one environment stepped 4 times per update, so 4
  acting forward passes of batch 1.
* ``jaxlab num_envs=4``: 4 environments stepped once per update (``env.num_envs=4``; the same
  update-to-data ratio): one acting pass of batch 4. This is the like-for-like row.
* ``rejax num_envs=4``: rejax's DQN with ``num_envs=4``, which steps 4 environments and updates
  once per iteration (``train_iteration``), i.e. its only way to one update per 4 frames.

Timing: each row is compiled and run for one warm-up call (rejax's warm-up covers its
``fill_buffer``, ours fills the buffer when its state is made), then timed over ``--frames``
frames per seed, in calls of 1000 frames (250 updates) that carry and donate the whole state.
Compile time is the first call minus one steady call, reported separately. The variants of one
(head, seeds) group are timed in turn, ``--repeats`` times (A B C A B C); the median is reported,
since the machine may be shared. ``floor``: a bare value_and_grad + Adam of the same network
(``jaxlab.rl.dqn.td_loss`` on a replay batch), 250 updates in one scan, per update, and the
fraction of each row's time per update that it is.

Not the same in both (compute they add is small): rejax acts in gymnax's Breakout-MinAtar (3
actions, no sticky actions, 1000-step episodes) while ours acts in Dopamine's setting (6 actions,
sticky actions 0.1, ``jaxlab.rl.envs``); rejax stores ``next_obs`` in its buffer, ours reads it
from the next slot; ours also runs a non-finite guard and logs metrics per update.

  benchmarks/rl_rejax_throughput.sh               # makes .venv-rejax (rejax + jaxlab) and runs this
  python benchmarks/rl_rejax_throughput.py --frames=100000 --out benchmarks/results/rl/rejax_throughput.json

Without rejax installed the rejax rows are skipped (one line says so) and ours still run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from importlib import metadata

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jaxlab.config_files import load_config  # noqa: E402
from jaxlab.optim import optimizer_from_config  # noqa: E402
from jaxlab.tasks.dqn_config import q_network_from_config  # noqa: E402
from jaxlab.train import make_mesh, make_train_step, tree_shardings  # noqa: E402
from jaxlab.train.state import make_init_fn  # noqa: E402
from jaxlab.experiment import task_context  # noqa: E402
from jaxlab.tasks import make_task  # noqa: E402
from rl_profile import save_result  # noqa: E402

UPDATES_PER_CALL = 250  # as the trainer runs dqn_minatar (steps_per_call)
UPDATE_PERIOD = 4       # frames per update in every row


def agent_config(head: str, num_envs: int = 1, config_arg: str = ""):
  """``configs/dqn_minatar.py`` (``config_arg``: its variant) with this head and ``env.num_envs``."""
  c = load_config("dqn_minatar" + (f":{config_arg}" if config_arg else ""))
  c.network.head = head
  c.env.num_envs = num_envs
  return c


def _timed_call(fn) -> float:
  t = time.perf_counter()
  jax.block_until_ready(fn())
  return time.perf_counter() - t


class Ours:
  """The ``dqn_minatar`` task's program, ``UPDATES_PER_CALL`` updates per call, ``seeds`` vmapped runs."""

  def __init__(self, head: str, num_envs: int, seeds: int, config_arg: str = "", updates_per_call: int = UPDATES_PER_CALL):
    c = agent_config(head, num_envs, config_arg)
    self.updates_per_call = updates_per_call
    self.task = task = make_task(c, task_context(c))
    self.opt = opt = optimizer_from_config(c.optimizer, c.num_steps)
    init = make_init_fn(task.init_params, opt, task.init_extra, task.init_data)
    kwargs = dict(collect=task.collect, update_extra=task.update_extra, steps_per_call=updates_per_call)
    if seeds == 1:
      self.state = jax.jit(init)(jax.random.key(0))
      self.step = make_train_step(task.loss_fn, opt, **kwargs)
    else:
      states = jax.jit(jax.vmap(init))(jax.random.split(jax.random.key(0), seeds))
      sharding = tree_shardings(states, make_mesh((("data", 1),), jax.devices()[:1]), run_axis="data")
      self.state = jax.device_put(states, sharding)
      self.step = make_train_step(task.loss_fn, opt, vmap_runs=True, state_sharding=sharding, **kwargs)
    self.seeds = seeds

  def call(self):
    self.state, metrics = self.step(self.state)
    return metrics

  def floor_program(self):
    """A jitted scan of ``updates_per_call`` bare updates (value_and_grad of the TD loss + Adam) on a
    fixed replay batch, over the same vmapped seeds as the agent (the network's own cost)."""
    upc, grad, opt = self.updates_per_call, jax.value_and_grad(self.task.loss_fn, has_aux=True), self.opt

    def update(params, opt_state, target, batch):
      _, g = grad(params, batch, None, target)
      updates, opt_state = opt.update(g, opt_state, params)
      return optax.apply_updates(params, updates), opt_state
    sample = lambda s: self.task.collect(s, jax.random.key(1))[1]
    if self.seeds > 1:
      update, sample = jax.vmap(update), jax.vmap(sample)
    batch = jax.jit(sample)(self.state)
    # the batch as a scanned input, not a constant, so the target pass is not hoisted out of the loop
    batches = jax.tree.map(lambda x: jnp.broadcast_to(x, (upc, *x.shape)), batch)
    target = self.state.extra

    def program(carry, batches):
      return jax.lax.scan(lambda c, b: (update(*c, target, b), None), carry, batches)[0]
    jitted = jax.jit(program, donate_argnums=0)
    carry = [jax.tree.map(jnp.copy, (self.state.params, self.state.opt_state))]

    def call():
      carry[0] = jitted(carry[0], batches)
      return carry[0]
    return call


def _rejax_available() -> bool:
  try:
    import rejax  # noqa: F401
  except ImportError:
    return False
  return True


def make_jaxlab_agent(network_config, num_actions: int):
  """A rejax DQN agent (``__call__``, ``act``, ``take``, as rejax's ``EpsilonGreedyPolicy``) whose
  Q-network is jaxlab's ``QNetwork`` built from ``network_config`` (``configs/dqn_minatar.py``'s)."""
  import distrax
  import flax.linen as nn

  net = q_network_from_config(network_config, num_actions, rainbow=True)[0]

  class JaxlabAgent(nn.Module):
    """jaxlab's QNetwork (its Q-values; routing stats dropped) with rejax's acting methods."""

    @nn.compact
    def __call__(self, obs):
      return net.clone(parent=self, name="q")(obs.astype(jnp.float32))[0]

    def act(self, obs, rng, epsilon=0.05):
      return distrax.EpsilonGreedy(self(obs), epsilon=epsilon).sample(seed=rng)

    def take(self, obs, action):
      return jnp.take_along_axis(self(obs), action[:, None], axis=1).squeeze(1)

  return JaxlabAgent()


class Rejax:
  """rejax's DQN with jaxlab's network, 1000 frames (250 updates) per call, ``seeds`` vmapped runs."""

  def __init__(self, head: str, seeds: int, config_arg: str = "", updates_per_call: int = UPDATES_PER_CALL):
    from rejax import DQN
    c = agent_config(head, 4, config_arg)
    d = c.dqn
    frames_per_call = updates_per_call * UPDATE_PERIOD
    algo = DQN.create(env="Breakout-MinAtar", num_envs=UPDATE_PERIOD, batch_size=c.batch_size,
                      buffer_size=d.replay_capacity, fill_buffer=min(d.min_replay_history, frames_per_call - 4),
                      target_update_freq=d.target_update_period, polyak=0.0, ddqn=d.double_dqn,
                      learning_rate=c.optimizer.learning_rate, gamma=d.gamma, eps_end=d.epsilon_end,
                      total_timesteps=frames_per_call, eval_freq=frames_per_call, skip_initial_evaluation=True)
    num_actions = algo.env.action_space(algo.env_params).n
    # no evaluation inside the timed calls (rejax's default plays 128 episodes every eval_freq)
    algo = algo.replace(agent=make_jaxlab_agent(c.network, num_actions),
                        eval_callback=lambda algo, ts, rng: jnp.zeros(()))
    self.algo = algo
    train = lambda ts: algo.train(train_state=ts)[0]
    if seeds == 1:
      self.state = jax.jit(algo.init_state)(jax.random.key(0))
      self.step = jax.jit(train, donate_argnums=0)
    else:
      self.state = jax.jit(jax.vmap(algo.init_state))(jax.random.split(jax.random.key(0), seeds))
      self.step = jax.jit(jax.vmap(train), donate_argnums=0)

  def call(self):
    self.state = self.step(self.state)
    return self.state


def versions() -> dict:
  out = {"python": platform.python_version()}
  for name in ("jax", "jaxlib", "flax", "optax", "distrax", "gymnax", "rejax", "flashbax"):
    try:
      out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      out[name] = None
  return out


#: The loops a run can time (``--loops``), by short name.
LOOPS = {"ours1": "jaxlab num_envs=1", "ours4": "jaxlab num_envs=4", "rejax": "rejax num_envs=4"}


def run_group(head: str, seeds: int, frames: int, repeats: int, loops: list[str], config_arg: str,
              updates_per_call: int = UPDATES_PER_CALL, floor: bool = True) -> list[dict]:
  """The rows of one (head, seeds) group (``loops``: keys of :data:`LOOPS`), timed in turn
  ``repeats`` times; medians. The floor row (``floor``) is measured on the first of our loops' state."""
  u = updates_per_call
  calls = frames // (u * UPDATE_PERIOD)
  makers = {"ours1": lambda: Ours(head, 1, seeds, config_arg, u), "ours4": lambda: Ours(head, 4, seeds, config_arg, u),
            "rejax": lambda: Rejax(head, seeds, config_arg, u)}
  variants = {LOOPS[k]: makers[k] for k in loops}
  built, first = {}, {}
  for name, make in variants.items():
    built[name] = make()
    first[name] = _timed_call(built[name].call)  # compile + one call (rejax: its buffer fill)
  if floor:
    floor_call = next(a for a in built.values() if isinstance(a, Ours)).floor_program()
    floor_first = _timed_call(floor_call)
  times = {name: [] for name in [*variants, *(["floor"] if floor else [])]}
  for _ in range(repeats):
    for name, agent in built.items():
      times[name].append(sum(_timed_call(agent.call) for _ in range(calls)) / calls)
    if floor:
      times["floor"].append(_timed_call(floor_call))
  med = {name: float(np.median(t)) for name, t in times.items()}
  rows = []
  for name in variants:
    per_call = med[name]
    row = {"head": head, "seeds": seeds, "loop": name, "frames_per_seed": calls * u * UPDATE_PERIOD,
           "frames_per_sec": u * UPDATE_PERIOD * seeds / per_call,
           "ms_per_update_all_seeds": 1e3 * per_call / u,
           "compile_s": max(first[name] - per_call, 0.0),
           "repeats_frames_per_sec": [u * UPDATE_PERIOD * seeds / t for t in times[name]],
           # the bare update of the same seeds' networks, as a share of this loop's time
           "floor_fraction": med["floor"] / per_call if floor else None}
    rows.append(row)
  if floor:
    rows.append({"head": head, "seeds": seeds, "loop": "floor: bare value_and_grad + Adam",
                 "ms_per_update_all_seeds": 1e3 * med["floor"] / u, "compile_s": max(floor_first - med["floor"], 0.0)})
  return rows


def ratios(rows: list[dict]) -> list[dict]:
  """ours / rejax frames per second, per (head, seeds) and jaxlab loop."""
  out = []
  for r in rows:
    if not r["loop"].startswith("jaxlab"):
      continue
    ref = [x for x in rows if x["loop"].startswith("rejax") and (x["head"], x["seeds"]) == (r["head"], r["seeds"])]
    if ref:
      out.append({"head": r["head"], "seeds": r["seeds"], "loop": r["loop"],
                  "like_for_like": r["loop"] == "jaxlab num_envs=4",
                  "ours_over_rejax": r["frames_per_sec"] / ref[0]["frames_per_sec"]})
  return out


def summary(rows: list[dict]) -> dict:
  """The rows by ``"{head}_{seeds}"`` with short keys (what the docs quote): frames/s of each loop,
  ours / rejax, the floor (ms per update, all seeds), the share of each loop's time it is, and
  ``max_ours_over_rejax`` = 1 / rejax's share (our loop at its bare update)."""
  short = {v: k for k, v in LOOPS.items()}
  out: dict = {}
  for r in rows:
    g = out.setdefault(f"{r['head']}_{r['seeds']}", {})
    if r["loop"].startswith("floor"):
      g["floor_ms_per_update"] = r["ms_per_update_all_seeds"]
      continue
    k = short[r["loop"]]
    g[f"{k}_frames_per_sec"] = r["frames_per_sec"]
    g[f"{k}_ms_per_update"] = r["ms_per_update_all_seeds"]
    g[f"{k}_compile_s"] = r["compile_s"]
    if r.get("floor_fraction") is not None:
      g[f"{k}_floor_fraction"] = r["floor_fraction"]
  for g in out.values():
    if g.get("rejax_floor_fraction"):  # no loop is faster than its own update: the most ours / rejax can be
      g["max_ours_over_rejax"] = 1 / g["rejax_floor_fraction"]
    for k in ("ours1", "ours4"):
      if "rejax_frames_per_sec" in g and f"{k}_frames_per_sec" in g:
        g[f"{k}_over_rejax"] = g[f"{k}_frames_per_sec"] / g["rejax_frames_per_sec"]
  return out


def main(argv: list[str] | None = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--frames", type=int, default=100_000, help="timed frames per seed per row and repeat "
                      "(a multiple of 4 x --updates_per_call, the frames of one call)")
  parser.add_argument("--heads", default="dense,softmoe")
  parser.add_argument("--seeds", default="1,8", help="vmapped seeds, comma-separated")
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--updates_per_call", type=int, default=UPDATES_PER_CALL,
                      help="updates per jitted call (the trainer's steps_per_call for dqn_minatar: 250)")
  parser.add_argument("--config_arg", default="", help="configs/dqn_minatar.py's variant ('tiny' for tests)")
  parser.add_argument("--loops", default="ours1,ours4,rejax", help=f"comma-separated, of {list(LOOPS)}")
  parser.add_argument("--no_floor", action="store_true", help="skip the bare-update floor rows")
  parser.add_argument("--out", default=None)
  args = parser.parse_args(argv)
  if args.updates_per_call < 1:
    parser.error(f"--updates_per_call={args.updates_per_call}; must be >= 1")
  per_call = args.updates_per_call * UPDATE_PERIOD
  if args.frames < per_call or args.frames % per_call:
    parser.error(f"--frames={args.frames}; must be a positive multiple of {per_call} (the frames of one call)")
  loops = args.loops.split(",")
  if not set(loops) <= set(LOOPS) or not any(k.startswith("ours") for k in loops):
    parser.error(f"--loops={args.loops}; choose from {list(LOOPS)}, at least one of ours")
  if "rejax" in loops and not _rejax_available():
    print("rejax is not installed: rejax rows skipped (benchmarks/rl_rejax_throughput.sh makes a venv with it)")
    loops.remove("rejax")
  started = time.time()
  result = {"command": " ".join(["python benchmarks/rl_rejax_throughput.py", *(argv if argv is not None else sys.argv[1:])]),
            "date": datetime.date.today().isoformat(), "machine": {
                "device": jax.devices()[0].device_kind, "cpu_count": os.cpu_count(), "platform": platform.platform(),
                "load_avg_start": os.getloadavg()[0]},
            "versions": versions(),
            "method": ("each (head, seeds) group: its loops timed in turn, --repeats times (A B C A B C), median "
                       "per row, because the machine may be shared; calls of 1000 frames (250 updates) per seed "
                       "after one warm-up call; compile_s = first call minus one steady call"),
            "like_for_like": "jaxlab num_envs=4 vs rejax num_envs=4 (4 environments, one acting pass per update)",
            "rows": []}
  for head in args.heads.split(","):
    for seeds in (int(s) for s in args.seeds.split(",")):
      rows = run_group(head, seeds, args.frames, args.repeats, loops, args.config_arg, args.updates_per_call,
                       not args.no_floor)
      result["rows"] += rows
      for r in rows:
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                          if k != "repeats_frames_per_sec"}), flush=True)
      result["ratios"], result["summary"] = ratios(result["rows"]), summary(result["rows"])
      save_result(args.out, result)  # after every group, so a cut-short run keeps what it measured
  result["ratios"], result["summary"] = ratios(result["rows"]), summary(result["rows"])
  for r in result["ratios"]:
    print(r["head"], r["seeds"], r["loop"], "ours/rejax", round(r["ours_over_rejax"], 2), flush=True)
  result["machine"]["load_avg_end"] = os.getloadavg()[0]
  result["wall_s"] = time.time() - started
  save_result(args.out, result)
  return result


if __name__ == "__main__":
  main()
