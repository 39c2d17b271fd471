"""The master table: DPOT's make_master_file.py style (parsed, never run), JSON and YAML, one entry type."""

import os

from jaxlab.pde.data.files import DPOT_FIELDS, load_master, load_table
from jaxlab.pde.data.files.master import resolve

# DPOT's style (utils/make_master_file.py): a name variable, the entry dict, then one field per line;
# the official file ends with a pandas call that writes a CSV when run.
PYTHON_TABLE = """
import os
import pandas as pd

DATASET_DICT = {}
DATASET_LIST = []
ROOT = './data/large'

name = 'ns2d_fno_1e-5'
DATASET_DICT[name] = {'train_path': './data/large/ns2d_1e-5_train.hdf5', 'test_path': './data/large/ns2d_1e-5_test.hdf5'}
DATASET_DICT[name]['train_size'] = 1000
DATASET_DICT[name]['test_size'] = 200
DATASET_DICT[name]['scatter_storage']= False
DATASET_DICT[name]['t_test'] = 10   ## predict 10 timesteps for testing
DATASET_DICT[name]['t_in'] = 10     ## use 10 as prefix steps, not necessary used
DATASET_DICT[name]['t_total'] = 20
DATASET_DICT[name]['in_size'] = (64, 64)
DATASET_DICT[name]['n_channels'] = 1
DATASET_DICT[name]['downsample'] = (1, 1)

name = 'cfdbench'
DATASET_DICT[name] = {'train_path': ROOT, 'test_path': ROOT}
DATASET_DICT[name]['train_size'] = 9000
DATASET_DICT[name]['test_size'] = 1000
DATASET_DICT[name]['scatter_storage'] = False
DATASET_DICT[name]['t_test'] = 20
DATASET_DICT[name]['n_channels'] = 3
DATASET_DICT[name]['pred_channels'] = 2

pd.DataFrame(DATASET_DICT).to_csv('dataset_config.csv')
"""

YAML_TABLE = """
ns2d_fno_1e-5:
  train_path: ./data/large/ns2d_1e-5_train.hdf5
  test_path: ./data/large/ns2d_1e-5_test.hdf5
  train_size: 1000
  test_size: 200
  scatter_storage: false
  t_test: 10
  t_in: 10
  t_total: 20
  in_size: [64, 64]
  n_channels: 1
  downsample: [1, 1]
"""


def test_python_table_is_read_without_running_it(tmp_path):
  path = tmp_path / "make_master_file.py"
  path.write_text(PYTHON_TABLE)
  cwd = os.getcwd()
  os.chdir(tmp_path)
  try:
    table = load_master(str(path))
  finally:
    os.chdir(cwd)
  assert not (tmp_path / "dataset_config.csv").exists()  # the pandas line was not executed
  assert list(table) == ["ns2d_fno_1e-5", "cfdbench"]
  ns = table["ns2d_fno_1e-5"]
  assert (ns.train_size, ns.test_size, ns.t_test, ns.t_total, ns.in_size, ns.downsample) == (1000, 200, 10, 20,
                                                                                              (64, 64), (1, 1))
  assert ns.format == "dpot" and not ns.scatter_storage and ns.pred_channels is None
  assert table["cfdbench"].train_path == "./data/large" and table["cfdbench"].pred_channels == 2
  assert set(load_table(str(path))["ns2d_fno_1e-5"]) <= set(DPOT_FIELDS)


def test_yaml_and_json_give_the_same_entry(tmp_path):
  import json
  (tmp_path / "master.yaml").write_text(YAML_TABLE)
  raw = load_table(str(tmp_path / "master.yaml"))
  (tmp_path / "master.json").write_text(json.dumps(raw))
  (tmp_path / "master.py").write_text(PYTHON_TABLE)
  from_py = load_master(str(tmp_path / "master.py"))["ns2d_fno_1e-5"]
  assert load_master(str(tmp_path / "master.yaml"))["ns2d_fno_1e-5"] == from_py
  assert load_master(str(tmp_path / "master.json"))["ns2d_fno_1e-5"] == from_py


def test_relative_paths_start_at_the_root():
  assert resolve("./data/a.hdf5", os.path.join(os.sep, "r")) == os.path.join(os.sep, "r", "data", "a.hdf5")
  assert resolve(os.path.join(os.sep, "abs", "a.hdf5"), "ignored") == os.path.join(os.sep, "abs", "a.hdf5")
  assert resolve(os.path.join("~", "a.hdf5"), "ignored") == os.path.expanduser(os.path.join("~", "a.hdf5"))


def test_statements_that_leave_the_table_alone_are_accepted(tmp_path):
  # a loop, a condition and a function (not called) that do not touch DATASET_DICT or the names its entries use
  path = tmp_path / "master.py"
  path.write_text(PYTHON_TABLE + "for i in range(2):\n    print(i)\nif False:\n    other = 1\n"
                  "def add(n):\n    DATASET_DICT[n] = {}\n")
  assert list(load_master(str(path))) == ["ns2d_fno_1e-5", "cfdbench"]
