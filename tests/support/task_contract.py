"""The task contract's table: each registered task and the config that trains it at tiny size
(``tests/train/test_task_contract.py`` holds every task to the contract; ``tests/benchmarks/test_task_scaling.py``
compiles the same configs on 1 and 8 devices). Covering a new task is one line of ``CONTRACT``."""

from __future__ import annotations

import os
from typing import Callable

from jaxlab.config_files import load_config
from tests.support.clip_data import write_image_folder

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "configs", "examples", "robust_regression.py")


def _clip_files(data_dir: str):
  config = load_config("clip_files:tiny")
  config.data.dir = os.path.join(data_dir, "pairs")
  write_image_folder(config.data.dir, num_images=40)
  return config


def _pde(data_dir: str):
  config = load_config("dpot_pde:tiny")
  config.data.cache_dir = data_dir  # generated PDE data, never in a user's cache
  return config


#: task -> (data_dir -> its tiny config, roundings per parameter and step for the vmapped-vs-single
#: comparison (``tests.support.tolerances.steps_tol``)).
CONTRACT: dict[str, tuple[Callable[[str], object], int]] = {
    "digits_classification": (lambda _: load_config("digits_mlp:tiny"), 150),
    "digits_two_tower": (lambda _: load_config("digits_clip:tiny"), 400),
    "clip_files": (_clip_files, 400),
    "dqn_minatar": (lambda _: load_config("dqn_minatar:tiny"), 2000),
    "dqn_atari": (lambda _: load_config("dqn_atari:tiny"), 2000),
    "pde_operator": (_pde, 2000),
    "huber_regression": (lambda _: load_config(f"{EXAMPLE}:tiny"), 60),  # a user's own task, from its config file
}
