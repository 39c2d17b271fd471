r"""MoMo in deep RL: MoMo-Adam, MoMo-Adam* and Adam over a learning-rate grid in DQN.

Schaipp et al., "MoMo: Momentum Models for Adaptive Learning Rates", ICML 2024: MoMo-Adam caps
Adam's step by a Polyak-type step from a model of the loss with lower bound ``lb`` (0 here:
the TD loss is >= 0) and is less sensitive to the learning rate on supervised problems; MoMo-Adam*
(``adapt_lower_bound``) estimates ``lb`` online. Here the loss is DQN's TD loss on MinAtar
Breakout, whose minimum over the parameters is far above 0 and whose targets move. One cell per
optimizer; each cell is one program of ``len(lrs) x seeds`` vmapped runs (``runs.sweep`` over
the learning rate x ``runs.seeds``), trained by ``jaxlab.experiment.train``::

  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_momo_dqn.py --measure
  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_momo_dqn.py      # resumable
  python benchmarks/rl_study.py --config=configs/rl_momo_dqn.py --report_only

Network: a cheaper Soft-MoE than the scaling study's (which is ~5x slower than the dense net on
this CPU): per-patch tokens (3x3 patches of the 10x10x16 conv features -> 9 tokens of
``embedding_size``), ``num_experts`` experts of 128 units. All optimizers use Dopamine's Adam
eps 3.125e-4 and betas (0.9, 0.999). Frames, epsilon decay and warm-up as in
``configs/rl_expert_scaling.py`` (scaled from Dopamine's 1M-frame settings).
"""

import ml_collections

from jaxlab.config_files import load_config_module

scaled_dqn = load_config_module("rl_expert_scaling").scaled_dqn


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: None/"" for the study, "small" for a smoke run (2 lrs, 2 seeds, ~1k frames)."""
  if arg not in (None, "", "small"):
    raise ValueError(f"configs/rl_momo_dqn.py takes no argument or 'small', got {arg!r}")
  small = arg == "small"
  c = ml_collections.ConfigDict()
  c.name = "rl_momo_dqn"
  c.kind = "lr_sweep"
  c.seeds = 2 if small else 3
  c.lrs = (1e-4, 1e-2) if small else (1e-5, 1e-4, 1e-3, 1e-2)
  c.workdir = "runs/rl_momo_dqn"
  c.out_dir = "benchmarks/results/rl"
  c.prefix = "momo_dqn"
  c.measure_steps = 500
  frames = 1_200 if small else 20_000
  steps_per_call = 25 if small else 250
  num_steps = frames // 4
  c.base = ml_collections.ConfigDict({
      "env": {"name": "breakout"},
      "num_steps": num_steps, "steps_per_call": steps_per_call,
      "log_every": steps_per_call, "eval_every": num_steps, "checkpoint_every": 5 * steps_per_call,
      "dqn": {**scaled_dqn(frames), "eval_envs": 8, "eval_steps": 200 if small else 2000},
      "network": {"head": "softmoe", "tokenizer": "per_patch", "patch_size": (3, 3), "embedding_size": 32,
                  "num_experts": 4, "expert_hidden": 16 if small else 128},
      "compute_dtype": "float32",  # --config.base.compute_dtype=bfloat16 for every cell
  })
  eps = 3.125e-4
  cells = {
      "adam": {"what": "Adam", "set": {"optimizer": {"name": "adam", "learning_rate": 1e-3, "eps": eps}}},
      "momo_adam": {"what": "MoMo-Adam (lb = 0)", "set": {"optimizer": {
          "name": "momo_adam", "learning_rate": 1e-3, "eps": eps}}},
      "momo_adam_star": {"what": "MoMo-Adam* (online lb)", "set": {"optimizer": {
          "name": "momo_adam", "learning_rate": 1e-3, "eps": eps, "adapt_lower_bound": True}}},
  }
  c.cells = ml_collections.ConfigDict(cells)
  c.order = tuple(cells)
  return c
