r"""DPOT study on CPU: DPOT vs FNO-2D, denoising on/off, multi-data-set pre-training + fine-tuning.

Paper: Hao et al., "DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
Pre-Training", ICML 2024. Every cell is one trainer config (``configs/dpot_pde.py`` with
``base`` and the cell's ``set`` merged in) trained by ``jaxlab.experiment.train``::

  nice -n 5 python benchmarks/dpot_study.py --config=configs/dpot_study.py          # resumable
  python benchmarks/dpot_study.py --config=configs/dpot_study.py --report_only      # table + plot
  python benchmarks/dpot_study.py --config=configs/dpot_study.py:small \
      --config.out_dir=/tmp/dpot_small --config.workdir=/tmp/dpot_small_runs          # smoke test

Cells (``group``): (a) NS nu=1e-3 (and 1e-4), 64^2, 10 input frames: DPOT vs FNO-2D, same
steps, batch and optimizer; (b) DPOT without denoising noise; (c) DPOT pre-trained on the
5-set mixture, fine-tuned on a small NS target set of a viscosity that is not in the mixture
(nu=5e-4), vs the same model trained from scratch on that set for the same steps.

Protocol: the official one of ``configs/dpot_pde.py`` (thu-ml/DPOT @ dcd2f9a): NS sets serve FNO's
``u`` frames t = 1..T without w0, 10 input frames, test horizons 20 / 20 / 10 frames for nu = 1e-3
/ 1e-4 / 1e-5 (every remaining frame for the other sets: 31 Kolmogorov, 91 diffusion-reaction, 20
for the nu = 5e-4 target), mixture draws ~ training trajectories x weight, channels padded with
ones, Adam + L2 1e-6 + OneCycle + clipping. The earlier table (the 90.5-minute run, in CHANGELOG.md)
predates this protocol; its settings were ``data.keep_w0=True`` with every remaining frame as the
horizon (``"t_test": 41`` / ``21`` / ``11`` in the NS entries), ``data.mixture_rule="weight"``,
``data.channel_padding="zeros_masked"`` and the optimizer ``{"name": "adam", "learning_rate": 1e-3,
"b1": 0.9, "b2": 0.9, "schedule": "cosine"}``.
"""

import ml_collections
from ml_collections.config_dict import placeholder

# Data sets (cached under $JAXLAB_DATA_DIR). NS sets are FNO's (stored frames 0..T, T = 50 / 30 / 20;
# frame 0 = w0 is not served: data.keep_w0=False, as DPOT's data).
NS3 = {"family": "ns_fno", "viscosity": 1e-3, "trajectories": 220, "seed": 0}
NS4 = {"family": "ns_fno", "viscosity": 1e-4, "trajectories": 220, "seed": 1}
NS5 = {"family": "ns_fno", "viscosity": 1e-5, "trajectories": 100, "seed": 2}
KOLMOGOROV = {"family": "kolmogorov", "trajectories": 100, "seed": 3}
DIFF_REACT = {"family": "diffusion_reaction", "trajectories": 100, "seed": 4}
# Fine-tuning target: a viscosity between the mixture's 1e-3 and 1e-4, 30 frames, dt as for 1e-4.
TARGET = {"family": "ns_fno", "viscosity": 5e-4, "trajectories": 40, "seed": 5, "num_frames": 30, "dt": 1 / 64,
          "name": "ns_fno_nu5e-04"}

DPOT = {"name": "dpot", "size": "cpu_small"}
FNO = {"name": "fno", "modes": 12, "width": 20, "n_layers": 4}


def _cell(group: str, what: str, seeds: int | None = None, after: str = "", **settings) -> dict:
  """``settings`` are merged into the trainer config (nested dicts merge key by key). ``seeds`` None: the
  study's ``seeds`` (a typed placeholder, so that ``--config.cells.<cell>.seeds=2`` can set it)."""
  return {"group": group, "what": what, "seeds": placeholder(int) if seeds is None else seeds, "after": after,
          "set": settings}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: None/"" for the study, "small" for a smoke run (tiny sets and steps, 1 seed; a minute or two)."""
  if arg not in (None, "", "small"):
    raise ValueError(f"configs/dpot_study.py takes no argument or 'small', got {arg!r}")
  small = arg == "small"
  c = ml_collections.ConfigDict()
  c.name = "dpot_study"
  c.seeds = 1 if small else 3
  # Seeds as vmapped runs in one program (runs.seeds) or one run after another. Measured with
  # `benchmarks/dpot_study.py --vmap_check` (results/dpot/seeds_vmap.json): on this 2-core CPU 3 vmapped
  # seeds train at 100 (DPOT) / 55 (FNO) samples/s in all, one after another at 157 / 64; so sequential.
  c.vmap_seeds = False
  c.workdir = "runs/dpot_study"          # checkpoints of every cell (not committed)
  c.out_dir = "benchmarks/results/dpot"  # study.json, study_table.md, rollout_*.png
  c.plot_cells = ("a_dpot_nu1e-3", "a_fno_nu1e-3")
  c.plot_trajectory = 0                  # index among the test trajectories of NS nu=1e-3
  steps = 40 if small else 2000
  c.base = ml_collections.ConfigDict({
      "batch_size": 16, "num_steps": steps, "t_in": 10, "t_out": 1,
      "log_every": max(1, steps // 10), "eval_every": steps, "checkpoint_every": steps,
      # the optimizer is configs/dpot_pde.py's: the official Adam + L2 + OneCycle + clipping recipe
      "data": {"resolution": 64, "num_test": 20, "eval_trajectories": 0, "rollout_steps": 0},
      "compute_dtype": "float32",  # --config.base.compute_dtype=bfloat16 for every cell
  })
  ns3, ns4 = dict(NS3, trajectories=24) if small else NS3, dict(NS4, trajectories=24) if small else NS4
  mixture = (ns3, ns4, NS5, KOLMOGOROV, DIFF_REACT)
  target = TARGET
  if small:
    c.base.data.num_test = 4
    mixture = tuple(dict(s, trajectories=12) for s in mixture)
    target = dict(TARGET, trajectories=12)
  finetune_steps = 20 if small else 1000
  pretrain_steps = 60 if small else 4000
  cells = {
      "a_dpot_nu1e-3": _cell("a", "DPOT, NS 1e-3", model=DPOT, noise_scale=5e-4, data={"sets": (ns3,)}),
      "a_fno_nu1e-3": _cell("a", "FNO-2D, NS 1e-3", seeds=1, model=FNO, noise_scale=0.0, data={"sets": (ns3,)}),
      "b_dpot_nonoise_nu1e-3": _cell("b", "DPOT without denoising, NS 1e-3", seeds=1, model=DPOT, noise_scale=0.0,
                                     data={"sets": (ns3,)}),
      "c_pretrain_mixture": _cell(
          "c", "DPOT pre-trained on the 5-set mixture", seeds=1, model=DPOT, noise_scale=5e-4,
          num_steps=pretrain_steps, log_every=pretrain_steps // 10, eval_every=pretrain_steps,
          checkpoint_every=pretrain_steps,
          data={"sets": mixture, "num_test": 10 if not small else 4, "eval_trajectories": 10 if not small else 2}),
      "c_finetune_nu5e-4": _cell(
          "c", "DPOT fine-tuned from the mixture, NS 5e-4 target", seeds=1, after="c_pretrain_mixture", model=DPOT,
          noise_scale=5e-4, num_steps=finetune_steps, log_every=finetune_steps // 10, eval_every=finetune_steps,
          checkpoint_every=finetune_steps, data={"sets": (target,), "num_channels": 2, "num_test": 10 if not small else 4}),
      "c_scratch_nu5e-4": _cell(
          "c", "DPOT from scratch, NS 5e-4 target", seeds=1, model=DPOT, noise_scale=5e-4, num_steps=finetune_steps,
          log_every=finetune_steps // 10, eval_every=finetune_steps, checkpoint_every=finetune_steps,
          data={"sets": (target,), "num_channels": 2, "num_test": 10 if not small else 4}),
      # nu=1e-4: the optional second viscosity (last; run with --cells when there is budget)
      "a_dpot_nu1e-4": _cell("a", "DPOT, NS 1e-4", seeds=1, model=DPOT, noise_scale=5e-4, data={"sets": (ns4,)}),
      "a_fno_nu1e-4": _cell("a", "FNO-2D, NS 1e-4", seeds=1, model=FNO, noise_scale=0.0, data={"sets": (ns4,)}),
  }
  if small:
    cells = {k: v for k, v in cells.items() if not k.endswith("nu1e-4")}
  c.cells = ml_collections.ConfigDict(cells)
  c.order = tuple(cells)  # run in this order (a ConfigDict iterates its keys sorted)
  return c
