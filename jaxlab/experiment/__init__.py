"""The config layer: an experiment config turned into the trainer's objects, checked once.

``train(config, workdir)`` and ``run_experiments(config, workdir)`` are what ``python -m jaxlab.main``
runs; ``make_train_setup(config)`` builds everything but trains nothing. The config's schema is
:func:`trainer_config` (every trainer key at its default) plus what each task reads
(``jaxlab.tasks``); the objects are the task (``make_task``), its context (:func:`task_context`),
the optimizer and the run options (``jaxlab.train.options.RunOptions``), which the loop
(``jaxlab.train.loop``) takes without reading the config again.
"""

from jaxlab.experiment.config import add_fine_tune_keys, make_tiny, trainer_config
from jaxlab.experiment.context import runs_from_config, task_context
from jaxlab.experiment.trainer import (Experiments, build_state_init, check_experiments, make_train_setup,
                                       run_checked, run_experiments, train)
from jaxlab.experiment.validate import check_stop_after, validate_trainer_config
from jaxlab.tasks import make_task
from jaxlab.train.loop import TrainResult, TrainSetup
