"""configs/dpot_files.py through the command line on files written in the official layouts.

Pre-training on a master table (DPOT's Python style) of an 8^2 DPOT set and a 16^2 PDEBench
diffusion-reaction set, mixed at 16^2; then fine-tuning on one of them from that run (and the
channel check that refuses the other one without padding).
"""

import json
import math
import os

import numpy as np
import pytest

from jaxlab.config_files import load_config
from jaxlab.errors import InputError
from jaxlab.tasks.pde_config import check_config
from jaxlab.train.workdir import saved_config
from tests.support import pde_file_layouts as layouts

MASTER = """
DATASET_DICT = {}
name = 'ns'
DATASET_DICT[name] = {'train_path': './ns_train.hdf5', 'test_path': './ns_test.hdf5'}
DATASET_DICT[name]['train_size'] = 10
DATASET_DICT[name]['test_size'] = 2
DATASET_DICT[name]['scatter_storage'] = False
DATASET_DICT[name]['t_test'] = 4
DATASET_DICT[name]['t_in'] = 3
DATASET_DICT[name]['t_total'] = 8
DATASET_DICT[name]['in_size'] = (8, 8)
DATASET_DICT[name]['n_channels'] = 1
DATASET_DICT[name]['downsample'] = (1, 1)

name = 'dr'
DATASET_DICT[name] = {'train_path': 'pdebench/2D_diff-react_NA_NA.h5', 'test_path': 'pdebench/2D_diff-react_NA_NA.h5'}
DATASET_DICT[name]['train_size'] = 6
DATASET_DICT[name]['test_size'] = 2
DATASET_DICT[name]['t_test'] = 5
DATASET_DICT[name]['in_size'] = (16, 16)
DATASET_DICT[name]['n_channels'] = 2
DATASET_DICT[name]['format'] = 'pdebench_groups'
"""


def _smooth(n, frames, grid, channels, seed):
  """(n, X, Y, T, C) decaying smooth fields: learnable and finite."""
  rng = np.random.default_rng(seed)
  x = np.linspace(0, 2 * np.pi, grid, endpoint=False)
  phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1, channels))
  field = np.sin(x[None, :, None, None] + phase) * np.cos(x[None, None, :, None] + 0.5 * phase)  # (n, X, Y, C)
  return (field[:, :, :, None, :] * 0.9 ** np.arange(frames)[:, None]).astype(np.float32)


def test_pretrain_on_a_master_table_then_fine_tune_on_one_set(cli, tmp_path):
  ns = _smooth(12, 8, 8, 1, 0)                                   # (N, X, Y, T, C), DPOT's order
  layouts.dpot_file(tmp_path / "ns_train.hdf5", ns[:10, ..., 0])  # 4-D: one channel
  layouts.dpot_file(tmp_path / "ns_test.hdf5", ns[10:, ..., 0])
  (tmp_path / "pdebench").mkdir()
  dr = np.moveaxis(_smooth(8, 8, 16, 2, 1), 3, 1)                 # PDEBench's (N, T, X, Y, C)
  layouts.pdebench_groups(tmp_path / "pdebench" / "2D_diff-react_NA_NA.h5", dr)
  master = tmp_path / "master.py"
  master.write_text(MASTER)

  pre = str(tmp_path / "pre")
  p = cli.main("--config=configs/dpot_files.py:tiny", f"--workdir={pre}", env={"JAXLAB_PDE_MASTER": str(master)})
  assert p.returncode == 0, p.stderr[-3000:]
  assert "dpot on ns+dr" in p.stdout
  last = [json.loads(line) for line in open(os.path.join(pre, "metrics.jsonl"))][-1]
  for key in ("l2re_1step/ns", "l2re_rollout/ns", "l2re_1step/dr", "l2re_rollout/dr"):
    assert math.isfinite(last[key]), (key, last)

  # A 1-channel set cannot start from the 2-channel run unless padded to 2: refused before anything compiles
  # (the run found its table through $JAXLAB_PDE_MASTER, this one through data.master).
  config = load_config("dpot_files:finetune_tiny")
  config.data.master, config.data.names, config.init_from.workdir = str(master), ("ns",), pre
  with pytest.raises(InputError, match=r"was trained with 2 channels, this run's data have 1; set "
                                       r"data.num_channels=2 \(missing channels are padded"):
    check_config(config, saved_config(pre))  # the saved config as the task reads it

  tuned = str(tmp_path / "tuned")
  # the fine-tuning finds the programs it shares with pre-training in the suite's compilation cache
  p = cli.main("--config=configs/dpot_files.py:finetune_tiny", f"--workdir={tuned}", f"--config.data.master={master}",
               "--config.data.names=('dr',)", f"--config.init_from.workdir={pre}")
  assert p.returncode == 0, p.stderr[-3000:]
  assert f"fine-tuning from {pre} (step 20)" in p.stderr and "dpot on dr" in p.stdout
  last = [json.loads(line) for line in open(os.path.join(tuned, "metrics.jsonl"))][-1]
  assert math.isfinite(last["l2re_rollout/dr"]) and "l2re_rollout/ns" not in last
