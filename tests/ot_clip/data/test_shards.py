"""Pairs from TarWriter shards: the split, batches as a function of (seed, step), per-process reading, resume."""

import json

import numpy as np
import pytest
from PIL import Image

from configs.clip_files import get_config
from jaxlab.errors import InputError
from jaxlab.ot_clip.data.batches import ShardedBatches
from jaxlab.ot_clip.data.shards import load_shard_pairs
from jaxlab.data_fingerprint import FINGERPRINT_FILE
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.train.workdir_files import write_workdir_files
from tests.support.clip_data import data_config
from tests.support.clip_shards import sample_image, write_shards

PATTERN = "shards/{00000..00003}.tar"


def _pairs(tmp_path, **data):
  return load_shard_pairs(data_config(dir=str(tmp_path), **data))


@pytest.fixture
def shards(tmp_path):
  return write_shards(tmp_path / "shards", num_shards=4, per_shard=10)


def test_a_seeded_fraction_is_held_out_and_the_rest_trains(tmp_path, shards):
  pairs = _pairs(tmp_path, train_shards=PATTERN)
  assert pairs.kind == "images" and pairs.classes == () and pairs.class_texts is None
  assert len(pairs.train) == 32 and pairs.test["image"].shape == (8, 16, 16, 3)
  assert pairs.test["tokens"].shape == (8, 8)
  assert "32 train / 8 test image-caption pairs from 4 webdataset shards" in pairs.description
  assert "0 samples skipped" in pairs.description
  fingerprint = json.loads(pairs.files[FINGERPRINT_FILE])
  assert [s["name"] for s in fingerprint["train_shards"]] == [f"shards/{i:05d}.tar" for i in range(4)]
  assert fingerprint["pairs"] == {"train_shards": 40}
  # Train and test together are every sample once: the test images are none of the training ones.
  train_images = {pairs.train[i]["image"].tobytes() for i in range(len(pairs.train))}
  assert not train_images & {image.tobytes() for image in pairs.test["image"]}
  assert len(train_images) == 32


def test_eval_shards_are_held_out_whole(tmp_path, shards):
  write_shards(tmp_path / "held", num_shards=1, per_shard=6, first=7)
  pairs = _pairs(tmp_path, train_shards=PATTERN, eval_shards="held/00007.tar", test_fraction=0.5)
  assert len(pairs.train) == 40 and len(pairs.test["image"]) == 6  # data.test_fraction is not used
  resized = Image.fromarray(sample_image(7 * 6)).resize((16, 16), Image.Resampling.BILINEAR)  # its first
  np.testing.assert_array_equal(np.round(pairs.test["image"][0] * 255), np.asarray(resized))
  assert json.loads(pairs.files[FINGERPRINT_FILE])["pairs"] == {"train_shards": 40, "eval_shards": 6}


def test_a_batch_is_a_function_of_seed_and_step_and_a_resume_reads_the_same(tmp_path, shards):
  first = ShardedBatches(_pairs(tmp_path, train_shards=PATTERN).train, 8, 1)
  seen = {s: first(s, np.arange(8), 3) for s in range(6)}
  resumed = ShardedBatches(_pairs(tmp_path, train_shards=PATTERN).train, 8, 1)  # indexed again, no state
  for s in (5, 2, 0):
    for name in ("image", "tokens"):
      np.testing.assert_array_equal(resumed(s, np.arange(8), 3)[name], seen[s][name])
  assert not np.array_equal(seen[0]["image"], seen[1]["image"])  # another step, another batch
  assert not np.array_equal(first(0, np.arange(8), 4)["image"], seen[0]["image"])  # another seed
  keys = [first.record_keys(s, np.arange(8), 3) for s in range(4)]  # 32 records: an epoch is 4 steps
  assert sorted(np.concatenate(keys).tolist()) == list(range(32))


@pytest.mark.parametrize("processes", [2, 4])
def test_each_process_reads_a_disjoint_share_and_together_the_global_batch(tmp_path, shards, processes):
  records = _pairs(tmp_path, train_shards=PATTERN).train
  batch, local = 8, 8 // processes
  whole = ShardedBatches(records, batch, processes)
  epoch = []
  for step in range(32 // batch):
    shares = [ShardedBatches(records, batch, processes).record_keys(step, np.arange(p * local, (p + 1) * local), 5)
              for p in range(processes)]
    assert np.array_equal(np.concatenate(shares), whole.record_keys(step, np.arange(batch), 5))
    for p, keys in enumerate(shares):  # process p owns records [p * 32 / processes, (p + 1) * 32 / processes)
      own = 32 // processes
      assert np.all((keys >= p * own) & (keys < (p + 1) * own)), (step, p, keys)
    epoch.extend(np.concatenate(shares).tolist())
  assert sorted(epoch) == list(range(32))  # disjoint and covering: an epoch is every record once
  share = ShardedBatches(records, batch, processes)(1, np.arange(local, 2 * local), 5)
  np.testing.assert_array_equal(share["image"], whole(1, np.arange(batch), 5)["image"][local:2 * local])


def test_a_resume_on_other_shards_is_refused(tmp_path, shards):
  config = get_config("tiny")
  config.data.update(dir=str(tmp_path), train_shards=PATTERN)
  workdir = tmp_path / "run"
  workdir.mkdir()
  write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=False)
  write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)  # the same shards: fine
  write_shards(tmp_path / "shards", num_shards=1, per_shard=10, first=2, ext="jpg")  # shard 2 rewritten
  with pytest.raises(InputError, match=r"data_fingerprint.json differs .*\(train_shards\[2\]\['s"):
    write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)
  config.data.train_shards = "shards/{00000..00002}.tar"  # one shard fewer
  with pytest.raises(InputError, match=r"data_fingerprint.json differs"):
    write_workdir_files(str(workdir), make_task(config, task_context(config)).workdir_files, resuming=True)
