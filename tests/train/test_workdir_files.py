"""Task files in the workdir: written by a new run, checked by a resumed one."""

import copy
import json

import pytest

from jaxlab.errors import InputError
from jaxlab.train.workdir_files import write_workdir_files


def test_a_new_run_writes_and_a_resumed_run_checks(tmp_path):
  write_workdir_files(str(tmp_path), {"tokenizer.json": "v1"}, resuming=False)
  assert (tmp_path / "tokenizer.json").read_text() == "v1"
  write_workdir_files(str(tmp_path), {"tokenizer.json": "v1"}, resuming=True)  # same data: fine
  with pytest.raises(InputError, match="tokenizer.json differs from the tokenizer.json this run derives"):
    write_workdir_files(str(tmp_path), {"tokenizer.json": "v2"}, resuming=True)
  assert (tmp_path / "tokenizer.json").read_text() == "v1"  # left as it was
  write_workdir_files(str(tmp_path), {"tokenizer.json": "v2"}, resuming=False)  # a new run in the folder: replaced
  assert (tmp_path / "tokenizer.json").read_text() == "v2"
  (tmp_path / "tokenizer.json").unlink()
  write_workdir_files(str(tmp_path), {"tokenizer.json": "v2"}, resuming=True)  # missing on resume: written again
  assert (tmp_path / "tokenizer.json").read_text() == "v2"


def test_names_must_be_plain_file_names(tmp_path):
  with pytest.raises(InputError, match="allowed: a plain file name"):
    write_workdir_files(str(tmp_path), {"../x.json": "v"}, resuming=False)


def test_a_json_file_that_differs_names_its_first_differing_key(tmp_path):
  saved = {"sets": {"ns": {"train": {"size": 1048576, "shape": [4, 8]}}}, "sets_in_order": ["ns"]}
  write_workdir_files(str(tmp_path), {"f.json": json.dumps(saved)}, resuming=False)

  def resume(now):
    with pytest.raises(InputError) as info:
      write_workdir_files(str(tmp_path), {"f.json": json.dumps(now)}, resuming=True)
    return str(info.value)

  grown = copy.deepcopy(saved)
  grown["sets"]["ns"]["train"]["size"] = 2097152
  assert ("f.json differs from the f.json this run derives from its data now "
          "(sets['ns']['train']['size']: 1048576 -> 2097152): the data changed since") in resume(grown)
  added = copy.deepcopy(saved)
  added["sets"]["dr"] = {}
  assert "(sets: added 'dr')" in resume(added)
  assert "(top level: removed 'sets_in_order')" in resume({"sets": saved["sets"]})
  reshaped = copy.deepcopy(saved)
  reshaped["sets"]["ns"]["train"]["shape"] = [4, 9]
  assert "(sets['ns']['train']['shape'][1]: 8 -> 9)" in resume(reshaped)
  many = {f"k{i}": i for i in range(5)}
  assert "(top level: added 'k0', 'k1', 'k2' and 2 more)" in resume(many)
  # the same JSON written otherwise still differs (the text is compared); no key to name: the plain message
  with pytest.raises(InputError, match=r"derives from its data now: the data changed"):
    write_workdir_files(str(tmp_path), {"f.json": json.dumps(saved, indent=2)}, resuming=True)
