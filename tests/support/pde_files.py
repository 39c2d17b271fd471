"""A files run and its resume without training: a master table of DPOT one-file sets, the run's workdir files
written as a new run and checked again as its resume would check them, and the two data changes a resume must
refuse (``tests/pde/data/files/test_fingerprint.py``, ``test_bad_input_files.py``)."""

import numpy as np

from jaxlab.config_files import load_config
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.train.workdir_files import write_workdir_files
from tests.support import pde_file_layouts as layouts


def fields(n, seed=0):
  """``n`` random (X, Y, T) = (8, 8, 8) records, DPOT's 4-D one-channel layout."""
  return np.random.default_rng(seed).normal(size=(n, 8, 8, 8)).astype(np.float32)  # (N, X, Y, T)


def write_table(root, names=("ns",), seed=0) -> str:
  """A master table of DPOT one-file sets (10 train / 2 test records each) in ``root``; its path."""
  table = {}
  for name in names:
    layouts.dpot_file(root / f"{name}_train.hdf5", fields(10, seed))
    layouts.dpot_file(root / f"{name}_test.hdf5", fields(2, seed + 1))
    table[name] = layouts.entry(f"{name}_train.hdf5", f"{name}_test.hdf5", 10, 2, 4)
  return layouts.master_json(root / "master.json", table)


def config_of(master: str):
  """``dpot_files:tiny`` on ``master`` (files not verified at start)."""
  config = load_config("dpot_files:tiny")
  config.data.master = master
  config.data.verify_files = False
  return config


def start_then_resume(config, workdir):
  """Writes the run's workdir files as a new run; returns a call that checks them as its resume would."""
  workdir.mkdir(exist_ok=True)
  write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=False)
  return lambda: write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)


def set_added(tmp_path):
  """``data.names=()``: a set added to the master table after the run started."""
  master = write_table(tmp_path)
  resume = start_then_resume(config_of(master), tmp_path / "run")
  write_table(tmp_path, names=("ns", "dr"))
  return resume


def file_replaced(tmp_path):
  """A training file replaced by other data of the same shape and dtype."""
  master = write_table(tmp_path)
  resume = start_then_resume(config_of(master), tmp_path / "run")
  layouts.dpot_file(tmp_path / "ns_train.hdf5", fields(10, seed=7))
  return resume
