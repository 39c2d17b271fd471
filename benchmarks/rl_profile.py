r"""Where one jitted call of the DQN agent (250 updates, 1,000 environment frames) spends its time.

Every part of the ``dqn_minatar`` task's program is timed as its own jitted ``lax.scan`` of the
same length, built from the task's own pieces (``Task.collect``, ``Task.loss_fn``, the trainer's
``make_train_step``), donated like the real one, all in one process, rounds round-robin, minimum
per part (the quietest round). FLOPs are XLA's cost analysis of one update, compiled alone. The
peak is a large fp32 matmul measured in the same run (``matmul_peak``), the number the agent's
update is measured against in ``benchmarks/rl_throughput.py``.

Parts (each a scan of K = 250 iterations; per iteration, i.e. per update):

* ``full``: the whole program as the trainer runs it (collect, update, guard, target sync, metrics).
* ``collect``: ``Task.collect`` only (epsilon-greedy acting, environment steps, replay add, sample).
* ``env``: the environment steps alone (uniformly random actions), ``update_period`` frames.
* ``act``: the acting forward passes alone (``update_period / num_envs`` of them).
* ``replay``: one replay add per environment step and one batch sampled.
* ``update``: the trainer's step on a fixed replay batch (the update, guard, target sync, metrics).
* ``update_bare``: value_and_grad + Adam + apply, nothing else.
* ``fwd_bwd``: value_and_grad alone; ``loss_fwd``: the loss alone (online + target forward).

  nice -n 5 python benchmarks/rl_profile.py --heads=dense,softmoe --out benchmarks/results/rl/profile.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.config_files import load_config
from jaxlab.optim import optimizer_from_config
from jaxlab.rl.replay import TimeStep, make_replay
from jaxlab.train import make_train_step
from jaxlab.train.state import make_init_fn
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task

K = 250  # updates per jitted call, as the trainer runs dqn_minatar (steps_per_call)


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
  """Best fp32 GFLOP/s of an ``n x n @ n x n`` matmul on the default device (2 n^3 FLOP)."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  f = jax.jit(lambda x: x @ x)
  f(a).block_until_ready()
  best = min(_timed(lambda: f(a).block_until_ready()) for _ in range(repeats))
  return 2 * n**3 / best / 1e9


def _timed(fn: Callable[[], Any]) -> float:
  t = time.perf_counter()
  fn()
  return time.perf_counter() - t


def compiled_flops(fn: Callable, *args) -> float:
  """XLA's cost-analysis FLOP count of ``jax.jit(fn)(*args)`` (0 if the backend reports none)."""
  cost = jax.jit(fn).lower(*args).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float((cost or {}).get("flops", 0.0))


def agent_config(head: str, num_envs: int = 1, batch_size: int = 32):
  c = load_config("dqn_minatar")
  c.network.head = head
  c.env.num_envs = num_envs
  c.batch_size = batch_size
  return c


class Parts:
  """The agent's program cut into parts, each a jitted scan of K iterations over its own carry."""

  def __init__(self, head: str, num_envs: int = 1, batch_size: int = 32, only: tuple[str, ...] = ()):
    c = agent_config(head, num_envs, batch_size)
    self.only = only
    self.task = task = make_task(c, task_context(c))
    inference = task.inference
    self.net, self.env = inference.model, inference.data["env"]
    # the task's replay, rebuilt from the same config keys (the task keeps it in a closure)
    self.replay = make_replay(c.dqn.replay_capacity, num_envs, c.batch_size, min_size=c.dqn.min_replay_history)
    self.opt = opt = optimizer_from_config(c.optimizer, c.num_steps)
    self.state = jax.jit(make_init_fn(task.init_params, opt, task.init_extra, task.init_data))(jax.random.key(0))
    self.batch = jax.jit(lambda s: task.collect(s, jax.random.key(1))[1])(self.state)
    self.update_period, self.num_envs = c.dqn.update_period, num_envs
    self.programs: dict[str, tuple[Callable, Any]] = {}
    self._build()

  def _scan(self, body: Callable[..., Any], with_batch: bool = False) -> Callable:
    """``carry -> carry`` after K iterations of ``body(carry, key[, batch])``, jitted and donated.

    A batch comes in as a scanned input (the same replay batch K times), never as a constant:
    XLA would hoist the loop-invariant part of the loss (the target network's forward pass on a
    constant batch) out of the loop and time a cheaper update than the agent runs.
    """
    batches = jax.tree.map(lambda x: jnp.broadcast_to(x, (K, *x.shape)), self.batch)

    def program(carry, batches):
      keys = jax.random.split(jax.random.key(2), K)
      xs = (keys, batches) if with_batch else keys
      step = (lambda c, x: (body(c, *x), None)) if with_batch else (lambda c, k: (body(c, k), None))
      return jax.lax.scan(step, carry, xs)[0]
    jitted = jax.jit(program, donate_argnums=0)
    return lambda carry: jitted(carry, batches)

  def _build(self) -> None:
    task, opt, batch = self.task, self.opt, self.batch
    full = make_train_step(task.loss_fn, opt, collect=task.collect, update_extra=task.update_extra,
                           steps_per_call=K)
    self.programs["full"] = (lambda s: full.jitted(s, None)[0], self.state)
    self.programs["collect"] = (self._scan(lambda s, k: task.collect(s, k)[0]), self.state)
    update = make_train_step(task.loss_fn, opt, update_extra=task.update_extra, steps_per_call=K)
    batches = jax.tree.map(lambda x: jnp.broadcast_to(x, (K, *x.shape)), batch)
    self.programs["update"] = (lambda s: update.jitted(s, batches)[0], self.state)
    for name, kwargs in {"update_no_guard": dict(skip_nonfinite=False, update_extra=task.update_extra),
                         "update_no_sync": dict(update_extra=None)}.items():
      variant = make_train_step(task.loss_fn, opt, steps_per_call=K, **kwargs)
      self.programs[name] = (lambda s, v=variant: v.jitted(s, batches)[0], self.state)

    grad = jax.value_and_grad(task.loss_fn, has_aux=True)

    def bare(learner, key, batch):
      params, opt_state, target = learner
      (_, _), g = grad(params, batch, key, target)
      updates, opt_state = opt.update(g, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, target
    learner = (self.state.params, self.state.opt_state, self.state.extra)
    self.programs["update_bare"] = (self._scan(bare, with_batch=True), learner)

    def fwd_bwd(carry, key, batch):
      params, acc = carry
      (loss, _), g = grad(params, batch, key, self.state.extra)
      # a tiny step, so that the pass depends on the carry and is not hoisted out of the loop
      return jax.tree.map(lambda p, d: p - 1e-9 * d, params, g), acc + loss
    self.programs["fwd_bwd"] = (self._scan(fwd_bwd, with_batch=True), (self.state.params, jnp.zeros(())))

    def loss_fwd(carry, key, batch):
      params, acc = carry
      loss = task.loss_fn(params, batch, key, self.state.extra)[0]
      return jax.tree.map(lambda p: p * (1 + 1e-9 * loss), params), acc + loss
    self.programs["loss_fwd"] = (self._scan(loss_fwd, with_batch=True), (self.state.params, jnp.zeros(())))

    env, data = self.env, self.state.data_state
    steps = self.update_period // self.num_envs
    n, num_actions = self.num_envs, env.num_actions

    def env_only(carry, key):
      env_state, obs = carry
      k_a, k_e = jax.random.split(key)
      actions = jax.random.randint(k_a, (n,), 0, num_actions).astype(jnp.int32)
      env_state, obs, *_ = env.step(env_state, actions, k_e)
      return env_state, obs
    self.programs["env"] = (self._scan(_inner_scan(env_only, steps)), (data.env, data.obs))

    q_fn = lambda p, o: self.net.apply({"params": p}, o.astype(jnp.float32))[0]

    def act_only(carry, key):
      params, obs, acc = carry
      q = q_fn(params, obs)
      return params, obs ^ (jnp.argmax(q, -1) == 0)[:, None, None, None], acc + jnp.sum(q)
    self.programs["act"] = (self._scan(_inner_scan(act_only, steps)), (self.state.params, data.obs, jnp.zeros(())))

    replay = self.replay

    def replay_only(carry, key):
      rstate, obs, acc = carry
      for _ in range(steps):
        rstate = replay.add(rstate, TimeStep(obs, jnp.zeros((n,), jnp.int32), jnp.zeros((n,)), jnp.ones((n,))))
      b = replay.sample(rstate, key)
      return rstate, obs, acc + jnp.sum(b.reward) + jnp.sum(b.next_obs)
    self.programs["replay"] = (self._scan(replay_only), (data.replay, data.obs, jnp.zeros(())))

  def time_all(self, rounds: int) -> dict[str, float]:
    """Minimum over rounds of ms per iteration (per update) of every part."""
    if self.only:
      self.programs = {k: v for k, v in self.programs.items() if k in self.only}
    carries = {name: _fresh(carry) for name, (_, carry) in self.programs.items()}
    for name, (fn, _) in self.programs.items():  # compile
      carries[name] = jax.block_until_ready(fn(carries[name]))
    best = {name: float("inf") for name in self.programs}
    for _ in range(rounds):
      for name, (fn, _) in self.programs.items():
        t = time.perf_counter()
        carries[name] = jax.block_until_ready(fn(carries[name]))
        best[name] = min(best[name], (time.perf_counter() - t) / K * 1e3)
    return best

  def update_flops(self) -> float:
    """FLOPs of one bare update (value_and_grad + Adam), XLA cost analysis."""
    grad = jax.value_and_grad(self.task.loss_fn, has_aux=True)

    def one(params, opt_state, target, batch):
      (_, _), g = grad(params, batch, jax.random.key(0), target)
      updates, opt_state = self.opt.update(g, opt_state, params)
      return optax.apply_updates(params, updates), opt_state
    s = self.state
    return compiled_flops(one, s.params, s.opt_state, s.extra, self.batch)


def _inner_scan(body: Callable, steps: int) -> Callable:
  """``body`` run ``steps`` times in an inner ``lax.scan`` (one env step per loop body, as collect)."""
  def outer(carry, key):
    return jax.lax.scan(lambda c, k: (body(c, k), None), carry, jax.random.split(key, steps))[0]
  return outer


def _fresh(tree: Any) -> Any:
  """An own copy of every leaf (each program donates its carry)."""
  return jax.tree.map(lambda x: jnp.copy(x) if isinstance(x, jax.Array) else x, tree)


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--heads", default="dense,softmoe")
  parser.add_argument("--num_envs", default="1", help="comma-separated env.num_envs values")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--batch_sweep", default="32,128,512",
                      help="replay batch sizes at which the bare update is timed (its FLOP efficiency vs shape)")
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__, "K": K,
            "load_avg_start": os.getloadavg()[0], "matmul_gflops": matmul_peak(), "agents": {}}
  print("matmul peak GFLOP/s", round(result["matmul_gflops"], 1), flush=True)
  for head in args.heads.split(","):
    for n in map(int, args.num_envs.split(",")):
      parts = Parts(head, n)
      ms = parts.time_all(args.rounds)
      flops = parts.update_flops()
      row = {"ms_per_update": ms, "update_mflop": flops / 1e6,
             "update_gflops_in_full": flops / (ms["full"] * 1e-3) / 1e9,
             "roofline_fraction": flops / (ms["full"] * 1e-3) / 1e9 / result["matmul_gflops"],
             "update_bare_fraction": flops / (ms["update_bare"] * 1e-3) / 1e9 / result["matmul_gflops"]}
      result["agents"][f"{head}/num_envs={n}"] = row
      print(head, n, json.dumps({k: round(v, 3) for k, v in ms.items()}),
            f"{row['update_mflop']:.1f} MFLOP, full {row['roofline_fraction']:.1%}, bare {row['update_bare_fraction']:.1%}",
            flush=True)
  # The same update at larger replay batches: how much of the peak XLA:CPU reaches on the
  # update's own layers once the matmuls are no longer 32 rows tall.
  result["batch_sweep"] = {}
  for head in args.heads.split(","):
    for b in map(int, filter(None, args.batch_sweep.split(","))):
      parts = Parts(head, 1, b, only=("update_bare",))
      ms = parts.time_all(args.rounds)["update_bare"]
      flops = parts.update_flops()
      row = {"ms_per_update": ms, "update_mflop": flops / 1e6,
             "fraction": flops / (ms * 1e-3) / 1e9 / result["matmul_gflops"]}
      result["batch_sweep"][f"{head}/batch={b}"] = row
      print(head, "batch", b, f"{ms:.3f} ms, {row['update_mflop']:.0f} MFLOP, {row['fraction']:.1%} of the peak",
            flush=True)
  result["load_avg_end"] = os.getloadavg()[0]
  save_result(args.out, result)


def save_result(path: str | None, result: dict) -> None:
  """Writes a benchmark's result dict as indented JSON (nothing if ``path`` is None)."""
  if path:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
      json.dump(result, f, indent=1)


if __name__ == "__main__":
  main()
