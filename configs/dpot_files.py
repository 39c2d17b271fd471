r"""DPOT pre-training and fine-tuning on the field's files, named by a DPOT-style master table.

Paper: Hao et al., "DPOT: Auto-Regressive Denoising Operator Transformer for Large-Scale PDE
Pre-Training", ICML 2024. The same task and step as ``configs/dpot_pde.py`` (the generated sets
stay the default there); here ``data.source = "files"`` reads the sets of a master table in
DPOT's style (thu-ml/DPOT utils/make_master_file.py: name -> train_path, test_path, train_size,
test_size, t_test, ...; a ``.py`` file in that style, ``.json`` or ``.yaml``) from their HDF5
files: DPOT's own layouts, PDEBench's 2-D CFD and per-sample files, The Well
(``jaxlab.pde.data.files``; docs/methods/dpot.md, "PDE data from the field's files").
Sets on other grids are resampled bilinearly to ``data.resolution`` and scored at their own
points, as DPOT does; a table entry's ``downsample`` then keeps every k-th point (DPOT's order).
Only the entries ``data.names`` selects are checked, so the official table, 3-D sets and all, loads
as it is. Rows are read per process from disk, a batch a function of (seed, step).

Run::

  export JAXLAB_PDE_MASTER=<data dir>/master.py        # or --config.data.master=<data dir>/master.json
  python -m jaxlab.main --config=configs/dpot_files.py --workdir=runs/dpot_files       # every set of the table
  python -m jaxlab.main --config=configs/dpot_files.py --workdir=runs/dpot_files \
      --config.data.names='("ns2d_fno_1e-5", "dr_pdb")' --config.data.weights='(8.0, 20.0)'
  python -m jaxlab.main --config=configs/dpot_files.py:finetune --workdir=runs/dpot_ft \
      --config.data.names='("ns2d_fno_1e-5",)' --config.init_from.workdir=runs/dpot_files

Keys beyond ``configs/dpot_pde.py``'s: ``data.source`` "files", ``data.master`` (the table; "" =
``$JAXLAB_PDE_MASTER``), ``data.root`` (the folder the table's relative paths start from; "" = the
table's folder), ``data.names`` (the table's sets in this run, DPOT's ``train_paths``; () = all,
in table order; ``data.weights`` follow this order), ``data.verify_files`` (read every record once
before training, so a NaN record is reported at the start rather than when first drawn),
``data.allow_external_links`` (False: HDF5 external links, external raw storage and virtual datasets
in a data file are refused, since through them a file could make the loader read any file on the
machine; True follows them, for files you trust). Train
and test trajectories are the table's ``train_size`` / ``test_size`` records; each set's test
horizon is its ``t_test`` (``data.rollout_steps`` > 0 overrides it). ``data.resolution`` is DPOT's
``res`` (128). Fine-tuning (``:finetune``) uses the trainer's keys (``init_from.workdir``,
``init_from.reinit``, ``optimizer.freeze``; docs/guides/checkpoints.md, "Fine-tuning"), the
official fine-tuning noise 0 (its warm-up fraction 40 / 200 is pre-training's 0.2); the pre-trained run's channel count,
padding, t_in and t_out must match (checked before training).
"""

import ml_collections

from jaxlab.config_files import load_config

ARGS = (None, "", "finetune", "tiny", "finetune_tiny")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: None (pre-training: DPOT-Ti at 128^2, the official recipe), "finetune", or "tiny" /
  "finetune_tiny" (seconds, for tests: a tiny DPOT at 16^2)."""
  if arg not in ARGS:
    raise ValueError(f"configs/dpot_files.py takes one of {ARGS[1:]}, got {arg!r}")
  tiny = arg in ("tiny", "finetune_tiny")
  c = load_config("dpot_pde:tiny" if tiny else "dpot_pde")  # the task, optimizer and schedule (by name)
  c.name = "dpot_files"
  c.data = ml_collections.ConfigDict({
      "source": "files", "master": "", "root": "", "names": (), "weights": (),
      "mixture_rule": "size_times_weight", "channel_padding": "ones", "resolution": 128, "num_channels": 0,
      "eval_trajectories": 8, "rollout_steps": 0, "verify_files": False,
      "allow_external_links": False})
  if not tiny:
    c.model = ml_collections.ConfigDict({"name": "dpot", "size": "Ti"})  # the official pre-training Ti
    c.batch_size = 20  # the official Ti's per-GPU batch (configs/pretrain_tiny.yaml)
  if arg in ("finetune", "finetune_tiny"):
    c.name = "dpot_files_finetune"
    c.noise_scale = 0.0  # official fine-tuning (configs/dpot_finetune.yaml tasks.noise_scale); its warm-up
    # 40 / 200 epochs is pre-training's pct_start 0.2
  if tiny:
    c.data.resolution, c.data.eval_trajectories, c.data.verify_files = 16, 2, True
    c.batch_size = 8
  return c
