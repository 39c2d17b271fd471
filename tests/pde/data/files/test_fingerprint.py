"""A files run's data fingerprint: a resume on changed data is refused, naming what changed.

The task is built twice (as a run and its resume would build it) and its ``workdir_files`` are
written and then checked as the trainer does; nothing is trained.
"""

import json

import pytest

from jaxlab.errors import InputError
from jaxlab.pde.data import make_dataset
from jaxlab.pde.data.files import DPOTFile, Split, data_fingerprint, file_sets
from jaxlab.data_fingerprint import FINGERPRINT_FILE, fingerprint_text
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.train.workdir_files import write_workdir_files
from tests.support import pde_file_layouts as layouts
from tests.support.pde_files import config_of, fields, file_replaced, set_added, start_then_resume, write_table


def test_a_resume_on_the_same_files_passes(tmp_path):
  workdir = tmp_path / "run"
  resume = start_then_resume(config_of(write_table(tmp_path)), workdir)
  resume()
  saved = json.loads((workdir / FINGERPRINT_FILE).read_text())
  assert saved["sets_in_order"] == ["ns"]
  train = saved["sets"]["ns"]["train"]
  assert train["file"]["size"] == (tmp_path / "ns_train.hdf5").stat().st_size
  assert train["records"] == [0, 10] and train["shape"] == [10, 8, 8, 8, 1] and train["format"] == "DPOTFile"


def test_a_set_added_to_the_table_is_named(tmp_path):
  with pytest.raises(InputError, match=r"data_fingerprint.json differs from the data_fingerprint.json this run "
                                       r"derives from its data now \(sets: added 'dr'\): the data changed"):
    set_added(tmp_path)()


def test_a_file_replaced_by_other_data_of_the_same_shape_is_refused(tmp_path):
  with pytest.raises(InputError, match=r"\(sets\['ns'\]\['train'\]\['file'\]\['sha256_ends'\]: '[0-9a-f]{8}"):
    file_replaced(tmp_path)()


def test_the_fingerprint_reads_the_ends_of_a_file_once_and_is_deterministic(tmp_path):
  layouts.dpot_file(tmp_path / "one.hdf5", fields(12))
  master = layouts.master_json(tmp_path / "master.json", {"s": layouts.entry("one.hdf5", "one.hdf5", 10, 2, 4)})
  sets = [s.dataset for s in file_sets(config_of(master))]
  first = data_fingerprint(sets)
  assert first == data_fingerprint(sets)
  s = first["sets"]["s"]
  assert s["train"]["file"] == s["test"]["file"] and s["test"]["records"] == [10, 2]



def test_a_run_fingerprinted_with_downsample_before_the_resize_is_not_resumed(tmp_path):
  # jaxlab once read a set's downsample as a stride of the stored grid, before resampling; DPOT strides
  # after it. A run fingerprinted then must not resume on the other grid points: the fingerprint says so.
  layouts.dpot_file(tmp_path / "train.hdf5", fields(10))
  layouts.dpot_file(tmp_path / "test.hdf5", fields(2, 1))
  master = layouts.master_json(tmp_path / "master.json", {"ns": layouts.entry(
      "train.hdf5", "test.hdf5", 10, 2, 4, downsample=[2, 2])})
  config = config_of(master)
  config.data.resolution = 8  # 8^2 stored, resized to 8^2, then every 2nd point: DPOT's 4^2 (patch 4 fits)
  config.model.patch_size = 4
  workdir = tmp_path / "run"
  workdir.mkdir()
  task = make_task(config, task_context(config))
  now = json.loads(task.workdir_files[FINGERPRINT_FILE])
  assert now["sets"]["ns"]["downsample_after_resize"] == [2, 2] and now["sets"]["ns"]["train"]["stride"] == [1, 1]
  # what the earlier order wrote for this table, the train and test records strided at read time
  parts = {"train": ("train.hdf5", 10), "test": ("test.hdf5", 2)}
  earlier = make_dataset("ns", Split("ns", [(DPOTFile("ns", str(tmp_path / p), (2, 2)), 0, n)
                                            for p, n in parts.values()]), num_test=2, verify_finite=False)
  saved = data_fingerprint([earlier])
  assert "downsample_after_resize" not in saved["sets"]["ns"] and saved["sets"]["ns"]["train"]["stride"] == [2, 2]
  (workdir / FINGERPRINT_FILE).write_text(fingerprint_text(saved))
  with pytest.raises(InputError, match=r"\(sets\['ns'\]: added 'downsample_after_resize'\): the data changed"):
    write_workdir_files(str(workdir), task.workdir_files, resuming=True)
