r"""Expert-scaling study (issue 9) on a CPU budget: Soft-MoE DQN with 1..8 experts vs dense heads.

Paper: Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024
(Fig. 1/5: returns grow with the number of Soft-MoE experts; widening the dense layer hurts).
Every cell is ``configs/dqn_minatar.py`` with ``base`` and the cell's ``set`` merged in, its seeds
vmapped in one program (``runs.seeds``), trained by ``jaxlab.train.trainer.train``::

  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --measure  # frames/s
  nice -n 10 python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py            # resumable
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py --report_only
  python benchmarks/rl_study.py --config=configs/rl_expert_scaling.py:small \
      --config.out_dir=/tmp/rlx_small --config.workdir=/tmp/rlx_small_runs                  # smoke test

The issue asks Breakout and SpaceInvaders, >= 3 seeds and >= 1M frames per cell (~7 h on this
2-core CPU). This config is the subset that fits ~40 min (arithmetic in NOTES_rlstudy.md):
Breakout, 3 vmapped seeds, ``frames`` frames per seed; the epsilon decay (250k of 1M frames) and
the random warm-up (1000 of 1M frames) scale with ``frames``; every other DQN setting is
Dopamine's MinAtar one. The replay capacity is cut to ``frames`` (100k in Dopamine): the buffer
never holds more than ``frames`` transitions, so this changes nothing but checkpoint size.
"""

import copy
from typing import Any

import ml_collections

from jaxlab.config_files import load_config

_DOPAMINE_FRAMES = 1_000_000  # configs/dqn_minatar.py's run length, to which decay/warm-up refer


def _cell(what: str, **network) -> dict:
  return {"what": what, "set": {"network": network}}


def scaled_dqn(frames: int) -> dict:
  """DQN settings of a ``frames``-frame run: epsilon decay and warm-up in proportion to 1M frames."""
  scale = frames / _DOPAMINE_FRAMES
  return {"epsilon_decay_frames": int(250_000 * scale), "min_replay_history": max(64, int(1000 * scale)),
          "replay_capacity": frames + 1000}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: None/"" for the study, "small" for a smoke run (2 cells, ~1k frames, 1 minute)."""
  if arg not in (None, "", "small"):
    raise ValueError(f"configs/rl_expert_scaling.py takes no argument or 'small', got {arg!r}")
  small = arg == "small"
  c = ml_collections.ConfigDict()
  c.name = "rl_expert_scaling"
  c.kind = "scaling"
  c.seeds = 2 if small else 3
  c.workdir = "runs/rl_expert_scaling"          # trainer workdirs of the cells (not committed)
  c.out_dir = "benchmarks/results/rl"            # expert_scaling.json / .md / .png
  c.prefix = "expert_scaling"
  c.measure_steps = 500                          # --measure: 2 calls of 250 updates, the 2nd timed
  frames = 1_200 if small else 30_000
  steps_per_call = 25 if small else 250
  num_steps = frames // 4                        # update_period 4, one environment
  c.base = ml_collections.ConfigDict({
      "env": {"name": "breakout"},
      "num_steps": num_steps, "steps_per_call": steps_per_call,
      "log_every": steps_per_call, "eval_every": num_steps, "checkpoint_every": 6 * steps_per_call,
      "dqn": {**scaled_dqn(frames), "eval_envs": 8, "eval_steps": 200 if small else 2000},
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
  if small:
    cells = {k: cells[k] for k in ("dense", "softmoe_2")}
    for cell in cells.values():
      cell["set"]["network"].update(expert_hidden=16, width=16)
  c.cells = ml_collections.ConfigDict(cells)
  c.order = tuple(cells)  # a ConfigDict iterates its keys sorted
  return c


def _merge(config: ml_collections.ConfigDict, settings: Any) -> None:
  """Sets ``settings`` into ``config``; nested dicts merge key by key, anything else replaces."""
  for key, value in dict(settings).items():
    if isinstance(value, (dict, ml_collections.ConfigDict)) and key in config and \
        isinstance(config[key], ml_collections.ConfigDict):
      _merge(config[key], value)
    else:
      with config.unlocked():
        config[key] = value.to_dict() if isinstance(value, ml_collections.ConfigDict) else copy.deepcopy(value)


def cell_config(study: Any, name: str) -> ml_collections.ConfigDict:
  """The trainer config of a study's cell: dqn_minatar + ``study.base`` + the cell's ``set``, with
  ``study.seeds`` vmapped seeds (and ``study.lrs`` as a vmapped learning-rate sweep, if set)."""
  c = load_config("dqn_minatar")
  _merge(c, study.base)
  _merge(c, study.cells[name].set)
  c.name = f"{study.name}/{name}"
  c.runs.seeds = study.seeds
  if study.get("lrs", None):
    c.runs.sweep = (("learning_rate", tuple(study.lrs)),)
  return c


def run_labels(study: Any) -> list[dict[str, Any]]:
  """One ``{"lr", "seed"}`` per run of a cell, in the trainer's order (sweep outer, seeds inner)."""
  lrs = tuple(study.get("lrs", None) or (None,))
  return [{"lr": lr, "seed": s} for lr in lrs for s in range(study.seeds)]
