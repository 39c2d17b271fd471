"""The config layer: an experiment config turned into the trainer's objects, checked once.

``train(config, workdir)`` and ``run_experiments(config, workdir)`` are what ``python -m jaxlab.main``
runs; ``make_train_setup(config)`` builds everything but trains nothing. The config's schema is
:func:`trainer_config` (every trainer key at its default) plus what each task reads
(``jaxlab.tasks``); the objects are the task (``make_task``), its context (:func:`task_context`),
the optimizer and the run options (``jaxlab.train.options.RunOptions``), which the loop
(``jaxlab.train.loop``) takes without reading the config again.

The schema is imported with the package (a config file's ``from jaxlab.experiment import
trainer_config`` loads no trainer); the rest on first use.
"""

import importlib as _importlib

from jaxlab.experiment.config import add_fine_tune_keys, make_tiny, trainer_config

# name -> the module that defines it, imported on first use (the trainer, JAX, orbax).
_LAZY = {"Experiments": "trainer", "build_state_init": "trainer", "check_experiments": "trainer",
         "make_train_setup": "trainer", "run_checked": "trainer", "run_experiments": "trainer", "train": "trainer",
         "runs_from_config": "context", "task_context": "context",
         "check_stop_after": "validate", "validate_trainer_config": "validate"}
_ELSEWHERE = {"make_task": "jaxlab.tasks", "TrainResult": "jaxlab.train.loop", "TrainSetup": "jaxlab.train.loop"}

__all__ = ["add_fine_tune_keys", "make_tiny", "trainer_config", *sorted(_LAZY), *sorted(_ELSEWHERE)]


def __getattr__(name: str) -> object:
  if name in _LAZY:
    return getattr(_importlib.import_module(f"jaxlab.experiment.{_LAZY[name]}"), name)
  if name in _ELSEWHERE:
    return getattr(_importlib.import_module(_ELSEWHERE[name]), name)
  raise AttributeError(f"module 'jaxlab.experiment' has no attribute {name!r}")


def __dir__() -> list[str]:  # the public names, the lazy ones included; no helper names
  return sorted(__all__)
