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

Timing: each row is compiled and warmed up (rejax's warm-up covers its ``fill_buffer``, ours fills
the buffer when its state is made and compiles both of its programs), then timed over ``--frames``
frames per seed (``--frames_all_seeds``: of all seeds together), in calls of 1000 frames per seed
(250 updates) that carry and donate the whole state. Ours asks for metrics only on the calls where
the trainer logs them (``log_every=2500`` of ``steps_per_call=250``: one call in ten; the others run
the step without its metrics, :class:`jaxlab.train.step.TrainStep`), as the training loop does on a
run with at least 100 unlogged calls (any real run). Compile time is the warm-up
minus its calls at the steady rate, reported separately. The variants of one (head, seeds) group
take turns every ``--chunk`` calls (A B C floor A B C floor ...), ``--repeats`` times; the median
over repeats is reported, in wall and in CPU time (user + system, all threads), since the machine
may be shared. ``floor``: a bare value_and_grad + Adam of the same network
(``jaxlab.rl.dqn.td_loss`` on a replay batch), 250 updates in one scan, one call per turn, per
update, and the fraction of each row's time per update that it is.

Not the same in both (compute they add is small): rejax acts in gymnax's Breakout-MinAtar (3
actions, no sticky actions, 1000-step episodes) while ours acts in Dopamine's setting (6 actions,
sticky actions 0.1, ``jaxlab.rl.envs``); rejax stores ``next_obs`` in its buffer, ours reads it
from the next slot; ours also runs a non-finite guard and, on the calls it logs, computes metrics per update.

  benchmarks/rl_rejax_throughput.sh               # makes .venv-rejax (rejax + jaxlab) and runs this
  benchmarks/rl_rejax_throughput.sh --frames=100000 --frames_all_seeds --repeats=3 \
      --out=benchmarks/results/rl/rejax_throughput.json   # every row >= 100k frames (~80 min, quiet 2 cores, estimated)

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
CHUNK_CALLS = 10        # calls per turn when the loops alternate (dqn_minatar logs once per 10 calls)


def agent_config(head: str, num_envs: int = 1, config_arg: str = ""):
  """``configs/dqn_minatar.py`` (``config_arg``: its variant) with this head and ``env.num_envs``."""
  c = load_config("dqn_minatar" + (f":{config_arg}" if config_arg else ""))
  c.network.head = head
  c.env.num_envs = num_envs
  return c


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
    self.log_every, self.steps_done = c.log_every, 0

  def call(self):
    """One call, with metrics only where the trainer would log them (once per ``log_every`` steps)."""
    start, self.steps_done = self.steps_done, self.steps_done + self.updates_per_call
    log = start // self.log_every != self.steps_done // self.log_every
    self.state, metrics = self.step(self.state, metrics=log)
    return self.state if metrics is None else metrics

  def warm_up(self) -> int:
    """Compiles both programs (a call without metrics and one with); returns the calls made."""
    self.state = self.step(self.state, metrics=False)[0]
    self.state, metrics = self.step(self.state, metrics=True)
    jax.block_until_ready(metrics)
    self.steps_done += 2 * self.updates_per_call
    return 2

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

  def warm_up(self) -> int:
    """Compiles and runs one call (with rejax's buffer fill); returns the calls made."""
    jax.block_until_ready(self.call())
    return 1


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


def calls_per_row(frames: int, seeds: int, updates_per_call: int = UPDATES_PER_CALL, all_seeds: bool = False) -> int:
  """Timed calls per row and repeat: ``frames`` per seed, or (``all_seeds``) of all seeds together,
  rounded up to whole calls."""
  per_call = updates_per_call * UPDATE_PERIOD * (seeds if all_seeds else 1)
  return -(-frames // per_call)


def _timed_call(fn) -> tuple[float, float]:
  """(wall, CPU) seconds of one call; CPU is the process's user + system time, all threads."""
  t, c = time.perf_counter(), time.process_time()
  jax.block_until_ready(fn())
  return time.perf_counter() - t, time.process_time() - c


def run_group(head: str, seeds: int, frames: int, repeats: int, loops: list[str], config_arg: str,
              updates_per_call: int = UPDATES_PER_CALL, floor: bool = True, chunk: int = CHUNK_CALLS,
              all_seeds: bool = False) -> list[dict]:
  """The rows of one (head, seeds) group (``loops``: keys of :data:`LOOPS`); medians over ``repeats``.

  In each repeat the loops take turns every ``chunk`` calls (A B C floor A B C floor ...), so that a
  change of the machine's load falls on every loop alike; the floor (on the first of our loops'
  state) runs one call per turn. ``frames``: see :func:`calls_per_row`.
  """
  u = updates_per_call
  calls = calls_per_row(frames, seeds, u, all_seeds)
  makers = {"ours1": lambda: Ours(head, 1, seeds, config_arg, u), "ours4": lambda: Ours(head, 4, seeds, config_arg, u),
            "rejax": lambda: Rejax(head, seeds, config_arg, u)}
  variants = {LOOPS[k]: makers[k] for k in loops}
  built, first = {}, {}
  for name, make in variants.items():
    built[name] = make()
    t = time.perf_counter()
    first[name] = (built[name].warm_up(), time.perf_counter() - t)  # compile + calls (rejax: its buffer fill)
  timed = dict(built)
  if floor:
    timed["floor"] = next(a for a in built.values() if isinstance(a, Ours)).floor_program()
    floor_first = _timed_call(timed["floor"])[0]
  wall = {name: [] for name in timed}
  cpu = {name: [] for name in timed}
  for _ in range(repeats):
    spent = {name: np.zeros(3) for name in timed}  # wall, CPU, calls
    for begin in range(0, calls, chunk):
      for name, fn in timed.items():
        for _ in range(1 if name == "floor" else min(chunk, calls - begin)):
          spent[name] += (*_timed_call(fn if name == "floor" else fn.call), 1)
    for name, (w, c, n) in spent.items():
      wall[name].append(w / n)
      cpu[name].append(c / n)
  med = {name: float(np.median(t)) for name, t in wall.items()}
  med_cpu = {name: float(np.median(t)) for name, t in cpu.items()}
  rows = []
  for name in variants:
    per_call = med[name]
    row = {"head": head, "seeds": seeds, "loop": name, "frames_per_seed": calls * u * UPDATE_PERIOD,
           "frames_per_sec": u * UPDATE_PERIOD * seeds / per_call,
           "ms_per_update_all_seeds": 1e3 * per_call / u,
           "cpu_ms_per_update_all_seeds": 1e3 * med_cpu[name] / u,
           "compile_s": max(first[name][1] - first[name][0] * per_call, 0.0),
           "repeats_frames_per_sec": [u * UPDATE_PERIOD * seeds / t for t in wall[name]],
           # the bare update of the same seeds' networks, as a share of this loop's time (wall; CPU)
           "floor_fraction": med["floor"] / per_call if floor else None,
           "floor_fraction_cpu": med_cpu["floor"] / med_cpu[name] if floor else None}
    rows.append(row)
  if floor:
    rows.append({"head": head, "seeds": seeds, "loop": "floor: bare value_and_grad + Adam",
                 "ms_per_update_all_seeds": 1e3 * med["floor"] / u,
                 "cpu_ms_per_update_all_seeds": 1e3 * med_cpu["floor"] / u,
                 "compile_s": max(floor_first - med["floor"], 0.0)})
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
                  "ours_over_rejax": r["frames_per_sec"] / ref[0]["frames_per_sec"],
                  "ours_over_rejax_cpu": ref[0]["cpu_ms_per_update_all_seeds"] / r["cpu_ms_per_update_all_seeds"]})
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
      g["floor_cpu_ms_per_update"] = r.get("cpu_ms_per_update_all_seeds")
      continue
    k = short[r["loop"]]
    g[f"{k}_frames_per_sec"] = r["frames_per_sec"]
    g[f"{k}_ms_per_update"] = r["ms_per_update_all_seeds"]
    g[f"{k}_cpu_ms_per_update"] = r.get("cpu_ms_per_update_all_seeds")
    g[f"{k}_compile_s"] = r["compile_s"]
    if r.get("floor_fraction") is not None:
      g[f"{k}_floor_fraction"] = r["floor_fraction"]
      g[f"{k}_floor_fraction_cpu"] = r.get("floor_fraction_cpu")
  for g in out.values():
    if g.get("rejax_floor_fraction"):  # no loop is faster than its own update: the most ours / rejax can be
      g["max_ours_over_rejax"] = 1 / g["rejax_floor_fraction"]
    for k in ("ours1", "ours4"):
      if "rejax_frames_per_sec" in g and f"{k}_frames_per_sec" in g:
        g[f"{k}_over_rejax"] = g[f"{k}_frames_per_sec"] / g["rejax_frames_per_sec"]
        if g.get("rejax_cpu_ms_per_update") and g.get(f"{k}_cpu_ms_per_update"):
          g[f"{k}_over_rejax_cpu"] = g["rejax_cpu_ms_per_update"] / g[f"{k}_cpu_ms_per_update"]
  return out


def main(argv: list[str] | None = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--frames", type=int, default=100_000, help="timed frames per seed per row and repeat "
                      "(a multiple of 4 x --updates_per_call, the frames of one call)")
  parser.add_argument("--frames_all_seeds", action="store_true", help="--frames counts the frames of all vmapped "
                      "seeds together (each of S seeds runs --frames / S, rounded up to whole calls)")
  parser.add_argument("--chunk", type=int, default=CHUNK_CALLS, help="calls per turn when the loops alternate")
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
  if args.chunk < 1:
    parser.error(f"--chunk={args.chunk}; must be >= 1 (calls per turn)")
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
            "method": (f"each (head, seeds) group: its loops and the floor take turns every {args.chunk} calls "
                       "(A B C floor A B C floor ...) within each of --repeats repeats, median per row over the "
                       "repeats, because the machine may be shared; calls of 250 updates (1000 frames per seed) "
                       "after a warm-up that compiles every program; ours asks for metrics only on the calls the "
                       "trainer logs (dqn_minatar: one in ten); wall and CPU (user + system, all threads) time; "
                       "compile_s = warm-up minus its calls at the steady rate"),
            "like_for_like": "jaxlab num_envs=4 vs rejax num_envs=4 (4 environments, one acting pass per update)",
            "rows": []}
  for head in args.heads.split(","):
    for seeds in (int(s) for s in args.seeds.split(",")):
      rows = run_group(head, seeds, args.frames, args.repeats, loops, args.config_arg, args.updates_per_call,
                       not args.no_floor, args.chunk, args.frames_all_seeds)
      result["rows"] += rows
      for r in rows:
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                          if k != "repeats_frames_per_sec"}), flush=True)
      result["ratios"], result["summary"] = ratios(result["rows"]), summary(result["rows"])
      save_result(args.out, result)  # after every group, so a cut-short run keeps what it measured
  result["ratios"], result["summary"] = ratios(result["rows"]), summary(result["rows"])
  for r in result["ratios"]:
    print(r["head"], r["seeds"], r["loop"], "ours/rejax", round(r["ours_over_rejax"], 2), "(CPU time:",
          f"{r['ours_over_rejax_cpu']:.2f})", flush=True)
  result["machine"]["load_avg_end"] = os.getloadavg()[0]
  result["wall_s"] = time.time() - started
  save_result(args.out, result)
  return result


if __name__ == "__main__":
  main()
