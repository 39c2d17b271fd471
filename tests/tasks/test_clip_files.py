"""The clip_files task end to end: the command line on an image-caption folder, the trainer on embeddings."""

import json
import math
import os
import shutil

import jax
import numpy as np
import pytest

import jaxlab

from configs.clip_files import get_config
from jaxlab.errors import InputError
from jaxlab.ot_clip.data import tokenizer as tokenizer_lib
from jaxlab.data_fingerprint import FINGERPRINT_FILE
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.experiment import train
from jaxlab.train.workdir_files import write_workdir_files
from tests.support.clip_data import embedding_arrays, write_image_folder

ZERO_SHOT = ("zero_shot_accuracy", "ot_zero_shot_accuracy", "aurc_plan", "selective_risk_plan",
             "selective_risk_partial_ot", "lt_zero_shot_accuracy", "lt_ot_uniform_accuracy", "lt_ot_prior_accuracy")
RETRIEVAL = ("i2t_recall_at_1", "t2i_recall_at_1")


def test_tiny_config_trains_on_an_image_folder_through_the_command_line(cli, tmp_path):
  data, workdir = tmp_path / "pairs", tmp_path / "run"
  write_image_folder(data, num_images=40)
  p = cli.main("--config=configs/clip_files.py:tiny", f"--config.data.dir={data}", f"--workdir={workdir}")
  assert p.returncode == 0, p.stderr[-3000:]
  assert "32 train / 8 test image-caption pairs" in p.stdout and "4 classes" in p.stdout
  rows = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [2, 4, 6, 8]
  last = rows[-1]
  for key in ("loss", "pairs_per_sec") + ZERO_SHOT + RETRIEVAL:
    assert math.isfinite(last[key]), (key, last)
  for key in ZERO_SHOT[:2] + RETRIEVAL:
    assert 0.0 <= last[key] <= 1.0
  # The tokenizer the captions were encoded with is in the workdir and reads back.
  tokenizer = tokenizer_lib.load_tokenizer(str(workdir / "tokenizer.json"))
  assert tokenizer_lib.known_token_count(tokenizer, "a yellow bar") == 3


def test_trainer_on_paired_embeddings_without_labels(tmp_path):
  arrays = embedding_arrays(n=40)
  folder = tmp_path / "emb"
  folder.mkdir()
  for name in ("image", "text"):  # no labels: retrieval only
    np.save(folder / f"{name}.npy", arrays[name])
  config = get_config("tiny")
  config.data.dir, config.data.embeddings = str(tmp_path), "emb"
  config.num_steps, config.log_every, config.eval_every = 4, 2, 4
  result = train(config, str(tmp_path / "run"), devices=jax.devices()[:2], progress=False)
  summary = result.summary
  assert summary["steps"] == 4 and "32 train / 8 test embedding pairs" in summary["task"]
  for key in ("final_loss",) + RETRIEVAL:
    assert math.isfinite(summary[key]), (key, summary)
  assert not any(key in summary for key in ZERO_SHOT)
  params = result.state.params
  assert params["text_encoder"]["Dense_0"]["kernel"].shape == (5, config.model.hidden)  # an MLP over text embeddings
  assert not os.path.exists(tmp_path / "run" / "tokenizer.json")
  run = jaxlab.load_run(str(tmp_path / "run"))  # the run back in hand, its towers bound to the params
  assert set(run.fns) == {"embed_images", "embed_texts"} and run.data["classes"] == ()
  text = run.embed_texts(run.data["test"]["text"])
  assert text.shape == (8, config.model.embed_dim) and np.all(np.isfinite(text))


def test_a_resume_checks_the_data_fingerprint(tmp_path):
  """Built as a run and its resume build the task, nothing trained: the same files pass, an edited captions file
  is refused by name (``data_fingerprint.json``: captions sha256, pairs, images' count and size)."""
  captions = write_image_folder(tmp_path / "pairs", num_images=20)
  config = get_config("tiny")
  config.data.dir = str(tmp_path / "pairs")
  workdir = tmp_path / "run"
  workdir.mkdir()
  write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=False)
  fingerprint = json.loads((workdir / FINGERPRINT_FILE).read_text())
  assert fingerprint["pairs"] == 20 and fingerprint["images"]["count"] == 20
  write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)  # unchanged: fine
  moved = shutil.copytree(tmp_path / "pairs", tmp_path / "moved")  # the same data elsewhere: what it is counts
  config.data.dir = str(moved)
  write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)
  config.data.dir = str(tmp_path / "pairs")
  with open(captions, "a") as f:
    f.write("img_00.png,a red square on white,red\n")
  with pytest.raises(InputError, match=r"data_fingerprint.json differs from the data_fingerprint.json this run "
                                       r"derives from its data now \(captions\['sha256'\]: '"):
    write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)
