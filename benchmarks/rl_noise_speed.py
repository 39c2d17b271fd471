r"""What Dopamine's noise costs a DER TD update on XLA:CPU: batch-shared vs per-row noise, side by side.

One jitted TD update (loss, gradients, Adam; C51, 10-step returns, prioritised weights, Double DQN,
batch 32, 84x84x4 Pong frames) of the ``configs/dqn_atari.py:der`` network, dense and Soft-MoE
heads, in three noise settings:

  head      only the dueling head is noisy, one draw per batch (the network before Dopamine's
            noisy hidden layer and experts were added)
  shared    head, dense hidden layer and experts noisy (``noisy_hidden``, ``noisy_experts``), one
            draw per batch for the online pass
  per_row   the same layers, one draw per batch row for the online pass (``noise_per_row``: the
            network vmapped over rows, Dopamine's MoE agents), the der preset

Each variant is compiled once, then timed in rounds that visit every variant in turn (so background
load hits them alike); the figure is CPU seconds (``time.process_time``, all threads) per update,
the median over rounds, and its ratio to ``shared`` of the same head.

  nice -n 5 python benchmarks/rl_noise_speed.py --out benchmarks/results/rl/noise_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

VARIANTS = {"head": dict(noisy_hidden=False, noisy_experts=False, noise_per_row=False),
            "shared": dict(noisy_hidden=True, noisy_experts=True, noise_per_row=False),
            "per_row": dict(noisy_hidden=True, noisy_experts=True, noise_per_row=True)}


def make_update(head: str, variant: str, batch: int):
  """(jitted update, state, batch) for one head and noise variant of the der preset's network."""
  from configs import dqn_atari  # noqa: PLC0415
  from jaxlab.rl.agent_loss import AgentNetwork, make_loss_fn  # noqa: PLC0415
  from jaxlab.tasks.dqn_config import c51_support_from_config, q_network_from_config  # noqa: PLC0415
  from jaxlab.rl.replay_frames import StackedTransition  # noqa: PLC0415

  c = dqn_atari.get_config("der")
  c.network.head = head
  c.network.update(VARIANTS[variant])
  net, aux = q_network_from_config(c.network, 6, rainbow=True, diagnostics=True)
  agent = AgentNetwork(net, c51_support_from_config(c.network, c.dqn), lambda params, obs: obs)
  loss_fn = make_loss_fn(agent, gamma=c.dqn.gamma, horizon=c.dqn.update_horizon, double_dqn=True, loss="mse",
                         aux_weights=aux, per_sample=True)
  opt = optax.adam(c.optimizer.learning_rate, eps=c.optimizer.eps)
  k = jax.random.split(jax.random.key(0), 4)
  obs = jax.random.randint(k[0], (batch, 84, 84, 4), 0, 256).astype(jnp.uint8)
  data = StackedTransition(obs=obs, action=jax.random.randint(k[1], (batch,), 0, 6), reward=jnp.ones((batch,)),
                           discount=jnp.full((batch,), 0.99 ** 10), next_obs=obs[::-1], weight=jnp.ones((batch,)),
                           importance=jnp.ones((batch,)), index=jnp.arange(batch))
  params = agent.init(k[2], obs[:1])
  state = (params, opt.init(params), jax.tree.map(jnp.copy, params), k[3])

  @jax.jit
  def update(state, data):
    params, opt_state, target, rng = state
    rng, k_loss = jax.random.split(rng)
    grads, _ = jax.grad(lambda p: loss_fn(p, data, k_loss, target), has_aux=True)(params)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, target, rng

  return update, state, data


def main(argv: list[str] | None = None) -> dict:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--heads", default="dense,softmoe")
  p.add_argument("--rounds", type=int, default=5)
  p.add_argument("--updates", type=int, default=3, help="updates per variant per round")
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--out", default="")
  args = p.parse_args(argv)
  cases = {(h, v): make_update(h, v, args.batch) for h in args.heads.split(",") for v in VARIANTS}
  compile_s = {}
  for key, (update, state, data) in cases.items():
    t = time.process_time()
    cases[key] = (update, jax.block_until_ready(update(state, data)), data)
    compile_s[key] = time.process_time() - t
  times = {key: [] for key in cases}
  for _ in range(args.rounds):
    for key, (update, state, data) in cases.items():
      t = time.process_time()
      for _ in range(args.updates):
        state = update(state, data)
      jax.block_until_ready(state)
      times[key].append((time.process_time() - t) / args.updates)
      cases[key] = (update, state, data)
  rows = []
  for (head, variant), ts in times.items():
    med = float(np.median(ts))
    rows.append({"head": head, "noise": variant, "cpu_s_per_update_median": med, "cpu_s_per_update_min": float(min(ts)),
                 "cpu_s_per_update_rounds": ts, "ratio_to_shared": med / float(np.median(times[(head, "shared")])),
                 "first_call_cpu_s_incl_compile": compile_s[(head, variant)]})
    print(json.dumps({k: v for k, v in rows[-1].items() if k != "cpu_s_per_update_rounds"}), flush=True)
  record = {"what": "CPU s per DER TD update (configs/dqn_atari.py:der network, batch 32): noise on the head only, "
                    "on head + hidden + experts shared by the batch, or drawn per row",
            "command": "python benchmarks/rl_noise_speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}",
            "load_average_end": os.getloadavg()[0], "jax": jax.__version__, "rounds": args.rounds,
            "updates_per_round": args.updates, "rows": rows}
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(record, f, indent=1)
  return record


if __name__ == "__main__":
  main()
