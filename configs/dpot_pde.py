r"""DPOT (or FNO) on locally generated PDE data: auto-regressive denoising training and rollout.

Paper: Hao et al., "DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
Pre-Training", ICML 2024 (https://proceedings.mlr.press/v235/hao24d.html). The data are
generated with exponax and cached (``$JAXLAB_DATA_DIR`` or ``~/.cache/jaxlab``); evaluation is the
per-data-set L2RE of the first predicted frame and of the whole auto-regressive rollout.

Run::

  python -m jaxlab.main --config=configs/dpot_pde.py --workdir=runs/dpot_ns      # NS nu=1e-3, CPU size
  python -m jaxlab.main --config=configs/dpot_pde.py:mixture --workdir=runs/dpot_mix   # 5 data sets
  python -m jaxlab.main --config=configs/dpot_pde.py:demo --workdir=/tmp/dpot_demo     # ~30 s (quickstart)
  python -m jaxlab.main --config=configs/dpot_pde.py:tiny --workdir=/tmp/dpot_tiny     # seconds
  python -m jaxlab.main --config=configs/dpot_pde.py:mixture_tiny --workdir=/tmp/dpot_mt  # 1- + 2-channel sets

FNO baseline on the same data and step: ``--config.model.name=fno`` with ``model.modes/width``
(see ``get_config``); no denoising: ``--config.noise_scale=0``; fine-tuning
(docs/guides/checkpoints.md): ``--config.init_from.workdir=runs/dpot_mix``, with regexes over param
paths in ``--config.init_from.reinit='("^out_layer/",)'`` (kept freshly initialised) and
``--config.optimizer.freeze='("^patch_embed/", "^blocks_0/")'`` (not updated); the data must
have the pre-trained model's channel count: ``--config.data.num_channels=2`` pads a 1-channel set.

Keys beyond the trainer's: ``t_in`` / ``t_out`` (input / predicted frames per call),
``noise_scale`` (denoising), ``data.sets`` (entries ``{"family", "trajectories", "seed", "name",
"t_test", <family parameters>}``), ``data.weights`` (mixture weights; () = equal),
``data.mixture_rule``, ``data.channel_padding``, ``data.keep_w0`` (below), ``data.resolution``,
``data.num_channels`` (0 = the widest set's; more pads, see ``data.channel_padding``),
``data.num_test`` (test trajectories per set), ``data.eval_trajectories`` (how many of them the
evaluation rolls out; 0 = all), ``data.rollout_steps`` (0 = each set's ``t_test``, below; > 0:
that many frames for every set), ``data.cache_dir`` ("" = ``$JAXLAB_DATA_DIR``), ``model``
(``name`` "dpot" with a ``size`` preset and overrides, or "fno" with FNO2d's fields).

The protocol is the official code's (thu-ml/DPOT @ dcd2f9a; docs/methods/dpot.md, "Protocol table:
configs/dpot_pde.py vs thu-ml/DPOT", has every hyper-parameter with its file and line). Each
difference from jaxlab's earlier protocol is a switch:

* ``data.mixture_rule``: "size_times_weight" (official, utils/griddataset.py:54: set i is drawn
  with probability ~ training trajectories_i x weight_i) or "weight" (~ weight_i alone).
* ``data.channel_padding``: "ones" (official, griddataset.py:98, 157: missing channels hold ones
  and the loss is taken over them too) or "zeros_masked" (zeros, left out of the loss). These
  configs use "ones": the official data weights were tuned with it (a 1-channel set in a 4-channel
  model has its loss averaged over 4 channels, 3 of them the easy ones), and a model fine-tuned from an
  official checkpoint expects ones there. Evaluation masks padded channels out under both, and
  the rollout puts the padding value back into them after every call.
* ``data.keep_w0``: False (official): an ``ns_fno`` set serves FNO's ``u`` frames t = 1..T, as
  DPOT's data (data_generation/preprocess.py:20-28); True: also w0 as frame 0, which trains on
  the w0 -> t = 1 transition and starts the test rollout at w0.
* ``t_test`` (per set): frames rolled out at evaluation after ``t_in`` = 10: DPOT's 20 / 20 / 10
  for FNO's nu = 1e-3 / 1e-4 / 1e-5 sets (utils/make_master_file.py:44, 30, 17; tests t = 11..30,
  11..30, 11..20), every remaining frame for other sets; a set entry's ``"t_test"`` or
  ``data.rollout_steps`` > 0 overrides it.
* ``optimizer``: the official recipe (below); ``{"name": "adam", ..., "schedule": "cosine"}`` was
  the earlier one.
"""

import ml_collections

from jaxlab.experiment import make_tiny, trainer_config

ARGS = (None, "", "demo", "tiny", "mixture", "mixture_tiny", "fno", "fno_tiny")


def _ns(viscosity: float, trajectories: int, **kw) -> dict:
  return {"family": "ns_fno", "viscosity": viscosity, "trajectories": trajectories, **kw}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: None (NS nu=1e-3), "demo" (a small NS set at 32^2, the quickstart's; data made in
  seconds), "mixture" (the 5-set pre-training mixture), "fno" (FNO baseline),
  "tiny" / "fno_tiny" / "mixture_tiny" (seconds; the last mixes a 1- and a 2-channel set)."""
  if arg not in ARGS:
    raise ValueError(f"configs/dpot_pde.py takes one of {ARGS[1:]}, got {arg!r}")
  c = trainer_config(batch_size=16, num_steps=3000, log_every=100, eval_every=1000, checkpoint_every=1000)
  c.name = "dpot_pde"
  c.task = "pde_operator"
  c.t_in, c.t_out = 10, 1
  # DPOT's denoising (official 5e-4 in pre-training, 0 in fine-tuning): x + s ||x|| N(0, 1) with the
  # norm over X, Y and the t_in frames per sample and channel, so the noise per grid point is
  # s sqrt(X Y t_in) times the rms of x: ~0.10 rms at 64^2 x 10 frames, ~0.20 rms at the official 128^2.
  # Same s, half the paper's relative noise at 64^2 (s = 1e-3 matches it there).
  c.noise_scale = 5e-4
  c.data = ml_collections.ConfigDict({
      "sets": (_ns(1e-3, 200),), "weights": (), "mixture_rule": "size_times_weight",
      "channel_padding": "ones", "keep_w0": False, "resolution": 64, "num_channels": 0, "num_test": 16,
      "eval_trajectories": 8, "rollout_steps": 0, "cache_dir": ""})
  c.model = ml_collections.ConfigDict({"name": "dpot", "size": "cpu_small"})
  # The official optimizer (train_temporal.py:135, 140, 228; utils/optimizer.py:36-50): Adam with
  # an L2 term 1e-6 * p added to the gradient before the moments (torch Adam weight_decay, not AdamW),
  # betas (0.9, 0.9) of which OneCycleLR's default cycle_momentum=True replaces beta1 by
  # 0.95 -> 0.85 -> 0.95, eps 1e-8; OneCycle lr 1e-7 -> 1e-3 at 20 % (warmup_epochs 200 / epochs 1000)
  # -> 1e-11, cosine; the gradient's global norm clipped at 1e4 (before the L2 term).
  c.optimizer = ml_collections.ConfigDict({
      "name": "adam", "learning_rate": 1e-3, "b2": 0.9, "eps": 1e-8,
      "schedule": "onecycle",
      "schedule_kwargs": {"pct_start": 0.2, "div_factor": 1e4, "final_div_factor": 1e4, "anneal_strategy": "cos"},
      "cycle_momentum": {"base_momentum": 0.85, "max_momentum": 0.95},
      "chain": (("clip_by_global_norm", {"max_norm": 1e4}), ("add_decayed_weights", {"weight_decay": 1e-6}))})
  if arg == "mixture":
    c.name = "dpot_pde_mixture"
    c.data.sets = (_ns(1e-3, 200), _ns(1e-4, 200, seed=1), _ns(1e-5, 200, seed=2),
                   {"family": "kolmogorov", "trajectories": 200, "seed": 3},
                   {"family": "diffusion_reaction", "trajectories": 200, "seed": 4})
  if arg in ("fno", "fno_tiny"):
    c.name = "fno_pde"
    c.model = ml_collections.ConfigDict({"name": "fno", "modes": 12, "width": 20, "n_layers": 4})
    c.noise_scale = 0.0
  if arg == "demo":
    c.batch_size, c.t_in = 16, 4
    c.data.sets = (_ns(1e-3, 24, num_frames=20),)
    c.data.resolution, c.data.num_test, c.data.eval_trajectories = 32, 4, 4
    c.model = ml_collections.ConfigDict({"name": "dpot", "size": "tiny", "patch_size": 4, "modes": 4})
    c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = 400, 100, 400, 400
  if arg in ("tiny", "fno_tiny", "mixture_tiny"):
    c.batch_size, c.t_in = 8, 3
    c.data.sets = (_ns(1e-3, 12, num_frames=8),)
    c.data.resolution, c.data.num_test, c.data.eval_trajectories = 32, 2, 2
    if arg in ("tiny", "mixture_tiny"):
      c.model = ml_collections.ConfigDict({"name": "dpot", "size": "tiny", "patch_size": 4, "modes": 4})
    else:
      c.model.modes, c.model.width = 4, 8
    if arg == "mixture_tiny":
      c.name = "dpot_pde_mixture_tiny"
      c.data.sets += ({"family": "diffusion_reaction", "trajectories": 6, "seed": 4, "num_frames": 8},)
    make_tiny(c)
  return c
