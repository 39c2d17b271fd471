"""digits_mlp:tiny with host batches that take ``batch_delay`` seconds, for test_preemption's Ctrl-C
tests: a signal lands while the run is still going (and a second one while the trainer waits for
a batch). A config file that registers its own task."""

import dataclasses
import time

from jaxlab.config_files import load_config
from jaxlab.train import TASKS


@TASKS.register("slow_digits_classification")
def slow_digits_classification(config, ctx):
  task = TASKS.get("digits_classification")(config, ctx)

  def host_batch(step, rows, seed):
    time.sleep(config.batch_delay)
    return task.host_batch(step, rows, seed)

  return dataclasses.replace(task, host_batch=host_batch)


def get_config(arg=None):
  del arg
  c = load_config("digits_mlp:tiny")
  c.task = "slow_digits_classification"
  c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = 1000, 2, 1000, 1000
  c.batch_delay = 0.3
  return c
