r"""Expert-scaling study: Soft-MoE DQN with 1..8 experts vs dense heads and Top-1 MoE.

Paper: Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024
(Fig. 1/5: returns grow with the number of Soft-MoE experts; widening the dense layer hurts).
Each cell is ``configs/dqn_minatar.py`` with ``base`` and the cell's ``set`` merged in (and, with
``games``, ``env.name`` set to each game), its seeds vmapped in one program (``runs.seeds``);
``benchmarks/rl_study.py`` builds the cells' trainer configs and trains them through
``jaxlab.experiment.train``::

  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --measure  # frames/s
  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py            # resumable
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --report_only
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:small \
      --config.out_dir=/tmp/rlx_small --config.workdir=/tmp/rlx_small_runs                  # smoke test
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:two_games             # both games
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:full                  # the whole design
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:full_smoke \
      --config.out_dir=/tmp/rlx_full_smoke --config.workdir=/tmp/rlx_full_smoke_runs        # its smoke test

``full`` is the whole design as one command: Breakout and SpaceInvaders; dense x1 / x4 /
x8, Soft MoE 1 / 2 / 4 / 8 experts, Top-1 MoE 8 experts; 3 vmapped seeds; 1M frames per run;
every DQN setting Dopamine's MinAtar one as ``configs/dqn_minatar.py`` has it (replay 100k, epsilon
over 250k frames, 1000 random frames, MSE, 1/4 updates per frame, rewards clipped); it writes
``<out_dir>/expert_scaling_full.{json,md,png}``. The Top-1 cell's auxiliary-loss weights are 0
(``network.importance_weight = network.load_balancing_weight = 0``): Dopamine's released
``labs/moes`` configs bind no auxiliary loss (``aux_loss(..., loss_fns=())``,
dopamine/labs/moes/agents/losses.py:215, @ 5873f54), so its Top-1 agent trains on the TD loss
alone; ``--config.cells.top1_8.set.network.importance_weight=1.0`` is Dopamine's weight when the
importance loss is switched on (``MoELossParameters.importance_weight``, agents/types.py:53).
``full_smoke`` runs the same code path (both games, the Top-1 cell with its aux weights) with a
tiny Top-1 network, 2 seeds and 600 frames.

The default (no argument) is a CPU-budget subset: Breakout, 3 vmapped seeds, 30k frames per
seed; ``two_games`` runs the same cells on both games at ``TWO_GAMES_FRAMES``. The epsilon decay
(250k of 1M frames) and the random warm-up (1000 of 1M frames) scale with the frames; every
other DQN setting is Dopamine's MinAtar one. The replay capacity is cut to the frames (100k in
Dopamine): the buffer never holds more transitions, so this changes nothing but checkpoint size.
What each design costs on the 2-core CPU the studies ran on is in docs/methods/soft_moe_rl.md, "Performance".

``tokenize`` is the ablation design of Sokar et al., "Don't flatten, tokenize! Unlocking the key to
SoftMoE's efficacy in deep RL", ICLR 2025 (docs/methods/soft_moe_rl.md, "Ablations of 'Don't flatten,
tokenize!'"), on the CPU-budget study's settings (Breakout, 3 seeds, 30k frames), every cell with
``network.diagnostics`` on (``diag/*``: dormant neurons, feature rank): the flatten -> dense baseline
and its x8 width, the tokenised heads without a router (``token_dense``, ``token_mlp``), Soft MoE
with 1 and 8 experts, one expert scaled to the width of 8 (``scaled_single_expert``), and 8
experts on the flattened features as one token (``tokenizer="flatten"``). ``tokenize_small`` is
its smoke test (3 cells, tiny widths, ~1k frames)::

  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:tokenize
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:tokenize_small \
      --config.out_dir=/tmp/rlx_tok --config.workdir=/tmp/rlx_tok_runs

``router`` is the design re-run with the router option that moved the Soft MoE's router (and its
return) most in ``benchmarks/rl_router_diagnosis.py`` (``ROUTER_FIX``, one of
``configs/rl_router_diagnosis.py``'s variants; none reached the entropy target at 60k frames, see
docs/methods/soft_moe_rl.md) beside the paper's recipe: Breakout and SpaceInvaders; dense x1 / x4 /
x8, Soft MoE 1 / 2 / 4 / 8 experts on the paper's recipe and with the fix; 3 vmapped seeds;
``ROUTER_FRAMES`` frames per run (epsilon decay and warm-up scaled as above). The result files carry the date of the run
(``--config.prefix``); ``router_smoke`` is its code path at toy size::

  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:router --measure
  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:router \
      --config.prefix=expert_scaling_router_$(date +%F)
"""

import ml_collections

from jaxlab.rl.networks import scaled_single_expert

_DOPAMINE_FRAMES = 1_000_000  # configs/dqn_minatar.py's run length, to which decay/warm-up refer


def _cell(what: str, **network) -> dict:
  return {"what": what, "set": {"network": network}}


def scaled_dqn(frames: int) -> dict:
  """DQN settings of a ``frames``-frame run: epsilon decay and warm-up in proportion to 1M frames."""
  scale = frames / _DOPAMINE_FRAMES
  return {"epsilon_decay_frames": int(250_000 * scale), "min_replay_history": max(64, int(1000 * scale)),
          "replay_capacity": frames + 1000}


ARGS = (None, "", "small", "two_games", "full", "full_smoke", "tokenize", "tokenize_small", "router", "router_smoke")
TWO_GAMES_FRAMES = 60_000  # both games within the ~90-minute CPU budget of a study
#: The router option of the ``router`` design: a variant of configs/rl_router_diagnosis.py (the one that moved the
#: routing entropy and the return most: normalize; benchmarks/results/rl/router_diagnosis.json).
ROUTER_FIX = "normalize"
ROUTER_FRAMES = 200_000  # per run: the smallest budget the issue asks for; ~3x the 60k-frame study


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: None/"" for the CPU-budget study (Breakout, 30k frames), "two_games" for the same 7 cells
  on Breakout and SpaceInvaders at ``TWO_GAMES_FRAMES`` frames, "small" for a smoke run (2 cells,
  ~1k frames), "full" for the whole design (2 games x 8 cells x 3 seeds x 1M frames),
  "full_smoke" for a one-minute run of the full design's code path, "tokenize" / "tokenize_small"
  for the ablations of "Don't flatten, tokenize!" (see the module doc)."""
  if arg not in ARGS:
    raise ValueError(f"configs/rl_expert_scaling.py takes no argument or one of {ARGS[2:]}, got {arg!r}")
  if arg in ("full", "full_smoke"):
    return _full(smoke=arg == "full_smoke")
  if arg in ("router", "router_smoke"):
    return _router(smoke=arg == "router_smoke")
  small, two_games = arg in ("small", "tokenize_small"), arg == "two_games"
  c = ml_collections.ConfigDict()
  tokenize = arg in ("tokenize", "tokenize_small")
  c.name = "rl_expert_scaling" + ("_two_games" if two_games else "") + ("_tokenize" if tokenize else "")
  c.kind = "scaling"
  c.seeds = 2 if small else 3
  c.workdir = "runs/" + c.name                   # trainer workdirs of the cells (not committed)
  c.out_dir = "benchmarks/results/rl"            # <prefix>.json / .md / .png
  c.prefix = "expert_scaling" + ("_two_games" if two_games else "") + ("_tokenize" if tokenize else "")
  c.measure_steps = 500                          # --measure: 2 calls of 250 updates, the 2nd timed
  if two_games:
    c.games = ("breakout", "space_invaders")
  frames = 1_200 if small else TWO_GAMES_FRAMES if two_games else 30_000
  steps_per_call = 25 if small else 250
  num_steps = frames // 4                        # update_period 4 (frames of all envs per update)
  c.base = ml_collections.ConfigDict({
      "env": {"name": "breakout"},
      "num_steps": num_steps, "steps_per_call": steps_per_call,
      "log_every": steps_per_call, "eval_every": num_steps, "checkpoint_every": 6 * steps_per_call,
      "dqn": {**scaled_dqn(frames), "eval_envs": 8, "eval_steps": 200 if small else 2000},
      "compute_dtype": "float32",  # --config.base.compute_dtype=bfloat16 for every cell
  })
  # Run in this order (most informative first; the budget may end the study before the last).
  cells = {
      "dense": _cell("dense 128 (baseline)", head="dense", width=128, width_multiplier=1),
      "softmoe_1": _cell("Soft-MoE, 1 expert", head="softmoe", num_experts=1, expert_hidden=128),
      "softmoe_8": _cell("Soft-MoE, 8 experts", head="softmoe", num_experts=8, expert_hidden=128),
      "dense_x8": _cell("dense 128 x 8 = 1024", head="dense", width=128, width_multiplier=8),
      "softmoe_4": _cell("Soft-MoE, 4 experts", head="softmoe", num_experts=4, expert_hidden=128),
      "top1_8": _cell("Top-1 MoE, 8 experts", head="top1", num_experts=8, expert_hidden=128),
      "softmoe_2": _cell("Soft-MoE, 2 experts", head="softmoe", num_experts=2, expert_hidden=128),
  }
  if tokenize:
    c.base.network = {"diagnostics": True}
    cells = tokenize_cells(expert_hidden=16 if small else 128, num_experts=8)
    if small:
      cells = {k: cells[k] for k in ("dense", "token_mlp", "softmoe_1_scaled")}
  elif small:
    cells = {k: cells[k] for k in ("dense", "softmoe_2")}
    for cell in cells.values():
      cell["set"]["network"].update(expert_hidden=16, width=16)
  c.cells = ml_collections.ConfigDict(cells)
  c.order = tuple(cells)  # a ConfigDict iterates its keys sorted
  return c


def tokenize_cells(expert_hidden: int, num_experts: int) -> dict:
  """The cells of the ``tokenize`` design at hidden width ``expert_hidden`` (also the dense width) and
  ``num_experts`` experts (the width the scaled single expert takes), MinAtar's per-position tokens."""
  h, n = expert_hidden, num_experts
  return {
      "dense": _cell(f"flatten -> dense {h} (baseline)", head="dense", width=h, width_multiplier=1),
      "token_mlp": _cell(f"tokens -> one expert MLP {h} per token, no router", head="token_mlp", expert_hidden=h),
      "softmoe_1_scaled": _cell(f"Soft-MoE, 1 expert scaled to {n} x {h}", head="softmoe",
                                **scaled_single_expert(n, h)),
      f"softmoe_{n}": _cell(f"Soft-MoE, {n} experts", head="softmoe", num_experts=n, expert_hidden=h),
      "token_dense": _cell(f"tokens -> dense {h} per token (tokenised baseline)", head="token_dense", width=h,
                           width_multiplier=1),
      "softmoe_1": _cell("Soft-MoE, 1 expert", head="softmoe", num_experts=1, expert_hidden=h),
      f"softmoe_{n}_flatten": _cell(f"Soft-MoE, {n} experts on one flattened token", head="softmoe",
                                    tokenizer="flatten", num_experts=n, expert_hidden=h),
      f"dense_x{n}": _cell(f"flatten -> dense {h} x {n}", head="dense", width=h, width_multiplier=n),
  }


def _full(smoke: bool) -> ml_collections.ConfigDict:
  """The whole design (see the module doc); ``smoke``: its code path at toy size."""
  c = ml_collections.ConfigDict()
  c.name = "rl_expert_scaling_full"
  c.kind = "scaling"
  c.games = ("breakout", "space_invaders")
  c.seeds = 2 if smoke else 3
  c.workdir = "runs/rl_expert_scaling_full"
  c.out_dir = "benchmarks/results/rl"
  c.prefix = "expert_scaling_full"
  c.measure_steps = 500
  frames = 600 if smoke else _DOPAMINE_FRAMES
  steps_per_call = 25 if smoke else 250
  num_steps = frames // 4                        # update_period 4: 1/4 updates per frame
  dqn = {"eval_envs": 32, "eval_steps": 27_000}  # one whole episode per eval env; the rest: dqn_minatar's
  if smoke:  # decay and warm-up scaled as in the CPU-budget study; a short evaluation cap
    dqn.update(**scaled_dqn(frames), eval_envs=4, eval_steps=50)
  c.base = ml_collections.ConfigDict({
      "num_steps": num_steps, "steps_per_call": steps_per_call,
      "log_every": steps_per_call if smoke else 10 * steps_per_call,
      "eval_every": num_steps, "checkpoint_every": (4 if smoke else 100) * steps_per_call,
      "dqn": dqn,
      "compute_dtype": "float32",  # --config.base.compute_dtype=bfloat16 for every cell
  })
  top1_aux = {"importance_weight": 0.0, "load_balancing_weight": 0.0}  # Dopamine's released configs
  cells = {
      "dense": _cell("dense 128 (baseline)", head="dense", width=128, width_multiplier=1),
      "softmoe_1": _cell("Soft-MoE, 1 expert", head="softmoe", num_experts=1, expert_hidden=128),
      "softmoe_8": _cell("Soft-MoE, 8 experts", head="softmoe", num_experts=8, expert_hidden=128),
      "dense_x8": _cell("dense 128 x 8 = 1024", head="dense", width=128, width_multiplier=8),
      "top1_8": _cell("Top-1 MoE, 8 experts (aux weights 0)", head="top1", num_experts=8, expert_hidden=128,
                      **top1_aux),
      "softmoe_4": _cell("Soft-MoE, 4 experts", head="softmoe", num_experts=4, expert_hidden=128),
      "dense_x4": _cell("dense 128 x 4 = 512", head="dense", width=128, width_multiplier=4),
      "softmoe_2": _cell("Soft-MoE, 2 experts", head="softmoe", num_experts=2, expert_hidden=128),
  }
  if smoke:
    cells = {"top1_8": cells["top1_8"]}  # two programs (one per game), mostly compilation
    cells["top1_8"]["set"]["network"].update(expert_hidden=16)
  c.cells = ml_collections.ConfigDict(cells)
  c.order = tuple(cells)
  return c


def _router(smoke: bool) -> ml_collections.ConfigDict:
  """The design with ``ROUTER_FIX`` beside the paper's recipe (see the module doc); ``smoke``: its code path."""
  from jaxlab.config_files import load_config_module  # noqa: PLC0415 - a config reusing another's variants
  fix = load_config_module("rl_router_diagnosis").VARIANTS[ROUTER_FIX]
  c = ml_collections.ConfigDict()
  c.name = "rl_expert_scaling_router"
  c.kind = "scaling"
  c.games = ("breakout",) if smoke else ("breakout", "space_invaders")
  c.seeds = 2 if smoke else 3
  c.workdir = "runs/rl_expert_scaling_router"
  c.out_dir = "benchmarks/results/rl"
  c.prefix = "expert_scaling_router"  # the command adds the date: --config.prefix=expert_scaling_router_<date>
  c.measure_steps = 500
  frames = 1_200 if smoke else ROUTER_FRAMES
  steps_per_call = 25 if smoke else 250
  num_steps = frames // 4
  c.base = ml_collections.ConfigDict({
      "num_steps": num_steps, "steps_per_call": steps_per_call,
      "log_every": steps_per_call if smoke else 4 * steps_per_call, "eval_every": num_steps,
      "checkpoint_every": 6 * steps_per_call if smoke else 40 * steps_per_call,
      "dqn": {**scaled_dqn(frames), "eval_envs": 8, "eval_steps": 200 if smoke else 2000},
      "network": {"router_diagnostics": True},  # moe/combine_spread, router/*, q_spread_* in every run's metrics
      "compute_dtype": "float32",
  })
  h = 16 if smoke else 128
  cells = {
      "dense": _cell(f"dense {h} (baseline)", head="dense", width=h, width_multiplier=1),
      "dense_x4": _cell(f"dense {h} x 4", head="dense", width=h, width_multiplier=4),
      "dense_x8": _cell(f"dense {h} x 8", head="dense", width=h, width_multiplier=8),
  }
  for n in (1, 2, 4, 8):
    cells[f"softmoe_{n}"] = _cell(f"Soft-MoE, {n} experts (the paper's recipe)", head="softmoe", num_experts=n,
                                  expert_hidden=h)
    fixed = _cell(f"Soft-MoE, {n} experts, {ROUTER_FIX}", head="softmoe", num_experts=n, expert_hidden=h)
    fixed["set"]["network"].update(fix["set"].get("network", {}))
    fixed["set"].update({k: dict(v) for k, v in fix["set"].items() if k != "network"})
    cells[f"softmoe_{n}_{ROUTER_FIX}"] = fixed
  if smoke:
    cells = {k: cells[k] for k in ("dense", "softmoe_2", f"softmoe_2_{ROUTER_FIX}")}
  c.cells = ml_collections.ConfigDict(cells)
  c.order = tuple(cells)
  return c
