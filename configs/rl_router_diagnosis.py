r"""Why the Soft-MoE router does not learn on MinAtar, and which option makes it learn.

Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024, on
MinAtar with Dopamine's DQN recipe (``configs/dqn_minatar.py``): after 60k frames the Soft MoE's
routing is still uniform (normalised dispatch and combine entropies 0.9987-0.9999), so every output
token is the same mixture of the slots and the flatten -> Q head after the layer sees no position.
This study trains one Soft-MoE DQN per variant, each a config option of the network or the
optimizer that is off in the paper's recipe, on two games, and logs during training what says
whether and why the router learns (``network.router_diagnostics``; ``jaxlab.rl.diagnostics``):
the routing entropies and the combine weights' spread over positions (``moe/...``, from the acting
passes), the router's gradient RMS against Adam's eps and the share of Adam's step eps leaves it
(``router/...``, from Adam's second moments), the Q-values' spread over states and actions on the
replay batch (``q_spread_*``) and the return.

Variants (each the paper's Soft MoE, 8 experts of 128, per-position tokens, but for one setting):

* ``softmoe``: the paper's recipe (Dopamine's MinAtar DQN values);
* ``normalize``: l2-normalised tokens and router with a learned scale (Puigcerver et al., Sec. 2.3;
  vmoe's default, Dopamine's ``normalization=False``);
* ``adam_eps``: Adam's eps 1e-8 (Kingma & Ba's) instead of Dopamine's 3.125e-4;
* ``position_embedding``: a learned position embedding added to the tokens (ViT's, N(0, 0.02^2));
* ``per_patch``: Dopamine's PER_PATCH tokens, 2x2 patches embedded to 64 dims (25 tokens);
* ``gap``: global average pooling over the output tokens instead of the flatten (Sokar & Castro 2025);
* ``dense``: the flatten -> dense 128 baseline, for the return and the Q spread of a head that sees
  positions (it has no router).

Budget (``BUDGET``; the per-frame cost measured with ``--measure`` on this 2-core machine, see
``benchmarks/results/rl/router_diagnosis_cost.json``): 2 games x 7 variants x 3 vmapped seeds x
``FRAMES`` frames per run; epsilon decay and warm-up scaled to the frames as in
``configs/rl_expert_scaling.py``::

  nice -n 10 python benchmarks/rl_router_diagnosis.py --measure         # CPU s per frame of each variant
  nice -n 10 python benchmarks/rl_router_diagnosis.py                   # the study (resumable)
  python benchmarks/rl_router_diagnosis.py --report_only                # table and plot from the JSON
  python benchmarks/rl_router_diagnosis.py --config=configs/rl_router_diagnosis.py:small \
      --config.out_dir=/tmp/router_small --config.workdir=/tmp/router_small_runs   # smoke test
"""

import ml_collections

from jaxlab.config_files import load_config_module

scaled_dqn = load_config_module("rl_expert_scaling").scaled_dqn  # decay and warm-up in proportion to 1M frames

FRAMES = 60_000          # per run; see BUDGET
SEEDS = 3
GAMES = ("breakout", "space_invaders")
#: The routing entropy (normalised, 1 = uniform) at or below which the router counts as having learned.
ENTROPY_TARGET = 0.9
#: What the study costs: the CPU seconds per 1k frames (all 3 seeds of a program) measured by
#: ``--measure`` (router_diagnosis_cost.json), times the frames. Rewritten by whoever re-measures.
#: Measured 2026-12-04 at load 9-14: 2.0 CPU s per 1k frames for every Soft-MoE variant (2.4 per_patch, 0.6
#: dense; the diagnostics cost nothing measurable: 2.006 without them), ~27 s to compile: 84 CPU-minutes.
BUDGET = {"frames_per_run": FRAMES, "seeds": SEEDS, "games": len(GAMES), "variants": 7,
          "cpu_minutes_estimate": 84}


def _cell(what: str, network: dict | None = None, **settings) -> dict:
  return {"what": what, "set": {"network": dict(network or {}), **settings}}


#: variant -> its cell: what it is and the settings over the paper's Soft MoE (configs/dqn_minatar.py).
VARIANTS = {
    "softmoe": _cell("Soft MoE 8x128, the paper's recipe (Dopamine's MinAtar DQN)"),
    "normalize": _cell("+ l2-normalised tokens and router, learned scale (vmoe's default)", {"normalize": True}),
    "adam_eps": _cell("+ Adam eps 1e-8 (Kingma & Ba) instead of 3.125e-4", optimizer={"eps": 1e-8}),
    "position_embedding": _cell("+ learned position embedding on the tokens (ViT's)",
                                {"position_embedding": "learned"}),
    "per_patch": _cell("per-patch tokens: 2x2 patches embedded to 64 (Dopamine's PER_PATCH)",
                       {"tokenizer": "per_patch", "patch_size": (2, 2), "embedding_size": 64}),
    "gap": _cell("+ global average pooling of the output tokens instead of flatten (Mind the GAP)",
                 {"pooling": "gap"}),
    "dense": _cell("flatten -> dense 128 (no router; reference)", {"head": "dense", "width": 128}),
}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: None/"" for the study (``GAMES`` x ``VARIANTS`` x ``SEEDS`` seeds x ``FRAMES`` frames), "small"
  for its smoke test (2 variants, one game, tiny widths, ~1k frames)."""
  if arg not in (None, "", "small"):
    raise ValueError(f"configs/rl_router_diagnosis.py takes no argument or 'small', got {arg!r}")
  small = arg == "small"
  c = ml_collections.ConfigDict()
  c.name = "rl_router_diagnosis"
  c.kind = "router"
  c.games = GAMES[:1] if small else GAMES
  c.seeds = 2 if small else SEEDS
  c.workdir = "runs/rl_router_diagnosis"       # trainer workdirs of the programs (not committed)
  c.out_dir = "benchmarks/results/rl"          # <prefix>.json / .md / .png
  c.prefix = "router_diagnosis"
  c.measure_steps = 100 if small else 1000     # --measure: calls of steps_per_call, all but the first timed
  c.entropy_target = ENTROPY_TARGET
  frames = 1_200 if small else FRAMES
  steps_per_call = 25 if small else 250
  num_steps = frames // 4                      # update_period 4: 1/4 updates per frame
  c.base = ml_collections.ConfigDict({
      "num_steps": num_steps, "steps_per_call": steps_per_call,
      "log_every": steps_per_call, "eval_every": num_steps, "checkpoint_every": 6 * steps_per_call,
      "dqn": {**scaled_dqn(frames), "eval_envs": 8, "eval_steps": 200 if small else 2000},
      "network": {"router_diagnostics": True},
      "compute_dtype": "float32",
  })
  cells = {k: {"what": v["what"], "set": {**v["set"], "network": dict(v["set"]["network"])}}
           for k, v in VARIANTS.items()}
  if small:
    cells = {k: cells[k] for k in ("softmoe", "normalize")}
    for cell in cells.values():
      cell["set"]["network"].update(num_experts=2, expert_hidden=16)
  c.cells = ml_collections.ConfigDict(cells)
  c.order = tuple(cells)  # a ConfigDict iterates its keys sorted
  return c
