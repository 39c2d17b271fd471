"""DPOT's own master table, as make_master_file.py ships it, read unchanged: its 3-D sets stay in the file.

The table below has the official file's shape (thu-ml/DPOT @ dcd2f9a, utils/make_master_file.py): imports it
never needs here, ``DATASET_DICT = {}`` and ``DATASET_LIST = []``, ``name = '...'`` before each entry, the
entry dict of its two paths, then one field per line with the official comments, a commented-out path and a
commented-out block, the 3-D PDEBench sets (in_size and downsample of three axes) and the closing pandas call.
The 2-D sets a run names point at tiny files; the 3-D ones keep the official values and are never opened.
"""

import json
import math
import os

import numpy as np
import pytest

from jaxlab.config_files import load_config
from jaxlab.errors import InputError
from jaxlab.pde.data.files import load_master
from jaxlab.tasks.pde_config import check_config
from tests.support import pde_file_layouts as layouts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

OFFICIAL_SHAPED_TABLE = """### script for writing meta information of datasets into master.csv
### for node property prediction datasets.
import os
import h5py
import pandas as pd


DATASET_DICT = {}
DATASET_LIST = []

### classic benchmark
name = 'ns2d_fno_1e-5'
DATASET_DICT[name] = {'train_path': './data/large/ns2d_1e-5_train.hdf5', 'test_path': './data/large/ns2d_1e-5_test.hdf5'}
DATASET_DICT[name]['train_size'] = 10
DATASET_DICT[name]['test_size'] = 2
DATASET_DICT[name]['scatter_storage']= False
DATASET_DICT[name]['t_test'] = 4   ## predict 10 timesteps for testing
DATASET_DICT[name]['t_in'] = 10     ## use 10 as prefix steps, not necessary used
DATASET_DICT[name]['t_total'] = 8
DATASET_DICT[name]['in_size'] = (8, 8)
DATASET_DICT[name]['n_channels'] = 1
DATASET_DICT[name]['downsample'] = (1, 1)


name = 'ns2d_pdb_M1_eta1e-1_zeta1e-1'
# DATASET_DICT[name] = {'train_path': './data/large/ns2d_pdb_M1_eta1e-2_zeta1e-2_train.hdf5', 'test_path': './data/large/ns2d_pdb_M1_eta1e-2_zeta1e-2_test.hdf5'}
DATASET_DICT[name] = {'train_path': './data/large/pdebench/ns2d_pdb_M1_eta1e-1_zeta1e-1/train', 'test_path': './data/large/pdebench/ns2d_pdb_M1_eta1e-1_zeta1e-1/test'}
DATASET_DICT[name]['train_size'] = 6
DATASET_DICT[name]['test_size'] = 2       ### default 200, maximum 1000
DATASET_DICT[name]['scatter_storage'] = True
DATASET_DICT[name]['t_test'] = 5   ## predict 10 timesteps for testing
DATASET_DICT[name]['t_in'] = 10     ## use 10 as prefix steps, not necessary used
DATASET_DICT[name]['t_total'] = 8
DATASET_DICT[name]['in_size'] = (16, 16)
DATASET_DICT[name]['n_channels'] = 4
DATASET_DICT[name]['downsample'] = (1, 1)

# # Superbench
# SUPER_BENCH_PATH = 'data/large/superbench'
# datasets = os.listdir(SUPER_BENCH_PATH)
# for dataset in datasets:
#     DATASET_DICT[name]['t_test'] = 40

name = 'ns3d_pdb_M1_rand'
DATASET_DICT[name] = {'train_path': './data/large/pdebench/ns3d_pdb_M1_rand/train', 'test_path': './data/large/pdebench/ns3d_pdb_M1_rand/test'}
DATASET_DICT[name]['train_size'] = 90
DATASET_DICT[name]['test_size'] = 10       ### default 200, maximum 1000
DATASET_DICT[name]['scatter_storage'] = True
DATASET_DICT[name]['t_test'] = 11   ## predict 10 timesteps for testing
DATASET_DICT[name]['t_in'] = 10     ## use 10 as prefix steps, not necessary used
DATASET_DICT[name]['t_total'] = 21
DATASET_DICT[name]['in_size'] = (128, 128, 128)
DATASET_DICT[name]['n_channels'] = 5
DATASET_DICT[name]['downsample'] = (1, 1, 1)


name = 'ns3d_pdb_M1_turb'
DATASET_DICT[name] = {'train_path': './data/large/pdebench/ns3d_pdb_M1_turb/train', 'test_path': './data/large/pdebench/ns3d_pdb_M1_turb/test'}
DATASET_DICT[name]['train_size'] = 540
DATASET_DICT[name]['test_size'] = 60       ### default 200, maximum 1000
DATASET_DICT[name]['scatter_storage'] = True
DATASET_DICT[name]['t_test'] = 11   ## predict 10 timesteps for testing
DATASET_DICT[name]['t_in'] = 10     ## use 10 as prefix steps, not necessary used
DATASET_DICT[name]['t_total'] = 21
DATASET_DICT[name]['in_size'] = (64, 64, 64)
DATASET_DICT[name]['n_channels'] = 5
DATASET_DICT[name]['downsample'] = (1, 1, 1)


name = 'cfdbench'
DATASET_DICT[name] = {'train_path': './data/large/cfdbench/ns2d_cdb_train.hdf5', 'test_path': './data/large/cfdbench/ns2d_cdb_test.hdf5'}
DATASET_DICT[name]['train_size'] = 9000
DATASET_DICT[name]['test_size'] = 1000       ### default 200, maximum 1000
DATASET_DICT[name]['scatter_storage'] = False
DATASET_DICT[name]['t_test'] = 20   ## predict 10 timesteps for testing
DATASET_DICT[name]['t_in'] = 10     ## use 10 as prefix steps, not necessary used
DATASET_DICT[name]['t_total'] = 20
DATASET_DICT[name]['in_size'] = (64, 64)
DATASET_DICT[name]['n_channels'] = 3
DATASET_DICT[name]['pred_channels'] = 2
DATASET_DICT[name]['downsample'] = (1, 1)



pd.DataFrame(DATASET_DICT).to_csv('dataset_config.csv')
"""

TWO_D = ("ns2d_fno_1e-5", "ns2d_pdb_M1_eta1e-1_zeta1e-1")


def _fields(n, frames, grid, channels, seed):
  """(n, X, Y, T, C) smooth decaying fields, DPOT's sample order."""
  rng = np.random.default_rng(seed)
  x = np.linspace(0, 2 * np.pi, grid, endpoint=False)
  phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1, channels))
  field = np.sin(x[None, :, None, None] + phase) * np.cos(x[None, None, :, None] + 0.5 * phase)
  return (field[:, :, :, None, :] * 0.9 ** np.arange(frames)[:, None]).astype(np.float32)


@pytest.fixture
def official_table(tmp_path):
  """The table as ``make_master_file.py`` in ``tmp_path``, with the files of its two 2-D sets under ./data/large."""
  large = tmp_path / "data" / "large"
  large.mkdir(parents=True)
  ns = _fields(12, 8, 8, 1, 0)[..., 0]                              # (N, X, Y, T): one channel, 4-D
  layouts.dpot_file(large / "ns2d_1e-5_train.hdf5", ns[:10])
  layouts.dpot_file(large / "ns2d_1e-5_test.hdf5", ns[10:])
  pdb = large / "pdebench" / "ns2d_pdb_M1_eta1e-1_zeta1e-1"
  samples = list(_fields(8, 8, 16, 4, 1))                           # data_{i}.hdf5: (X, Y, T, C)
  layouts.dpot_scatter(pdb / "train", samples[:6])
  layouts.dpot_scatter(pdb / "test", samples[6:])
  path = tmp_path / "make_master_file.py"
  path.write_text(OFFICIAL_SHAPED_TABLE)
  return path


def test_the_official_table_loads_and_its_3d_sets_are_one_line_when_named(official_table):
  table = load_master(str(official_table), TWO_D)                   # only the named entries are checked
  assert list(table) == list(TWO_D) and table[TWO_D[1]].scatter_storage and table[TWO_D[1]].n_channels == 4
  with pytest.raises(InputError, match=r"entry 'ns3d_pdb_M1_turb' is a 3-D set \(in_size=\(64, 64, 64\)\)"):
    load_master(str(official_table), ("ns3d_pdb_M1_turb",))
  with pytest.raises(InputError, match=r"has no entry 'ns2d'; it has: ns2d_fno_1e-5, ns2d_pdb_M1_eta1e-1_zeta1e-1, "):
    load_master(str(official_table), ("ns2d",))
  config = load_config("dpot_files:tiny")
  config.data.master, config.data.names = str(official_table), (*TWO_D, "ns3d_pdb_M1_rand")
  with pytest.raises(InputError, match=r"^master table .*make_master_file.py: entry 'ns3d_pdb_M1_rand' is a 3-D "
                                       r"set \(in_size=\(128, 128, 128\)\); jaxlab's DPOT is 2-D") as info:
    check_config(config)
  assert "\n" not in str(info.value)
  config.data.names = ()                                            # every entry: the 3-D ones too
  with pytest.raises(InputError, match=r"\(data.names=\(\) uses every entry\): entry 'ns3d_pdb_M1_rand' is a 3-D"):
    check_config(config)


def test_pretraining_through_the_cli_on_the_official_table_names_its_2d_sets(cli, official_table, tmp_path):
  workdir = tmp_path / "run"
  p = cli.main("--config=configs/dpot_files.py:tiny", f"--workdir={workdir}", f"--config.data.master={official_table}",
               f"--config.data.names={TWO_D!r}")
  assert p.returncode == 0, p.stderr[-3000:]
  assert not os.path.exists(os.path.join(REPO, "dataset_config.csv"))  # the table was parsed, not run
  assert f"dpot on {'+'.join(TWO_D)}" in p.stdout
  last = [json.loads(line) for line in open(workdir / "metrics.jsonl")][-1]
  for name in TWO_D:
    assert math.isfinite(last[f"l2re_rollout/{name}"]), last
  fingerprint = json.loads((workdir / "data_fingerprint.json").read_text())
  assert fingerprint["sets_in_order"] == list(TWO_D)                # the 3-D and cfdbench entries are not used
