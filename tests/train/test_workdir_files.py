"""Task files in the workdir: written by a new run, checked by a resumed one."""

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
