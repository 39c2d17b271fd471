"""A run's config is checked once, at the edge, and its objects are built once (counted).

``jaxlab.experiment`` checks the trainer keys (``validate_trainer_config``) and ``--stop_after``
(``check_stop_after``) once per experiment, then builds the context and the task once; the loop and
the checkpointer trust them. Counted on ``train(config)``, on a suite (``run_experiments``) and on the
command line (``python -m jaxlab.main``, in a subprocess).
"""

from __future__ import annotations

import collections
import inspect
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.experiment import run_experiments, train, trainer_config
from jaxlab.experiment import trainer as experiment_trainer
from jaxlab.experiment import validate
from jaxlab.train import TASKS, Task

BUILT: list = []  # (config, ctx) of each task build


@TASKS.register("test_counted_line")
def counted_line(config, ctx) -> Task:
  BUILT.append((config, ctx))

  def host_batch(step, rows, seed):
    x = np.random.default_rng([seed, step]).normal(size=(config.batch_size, 1)).astype(np.float32)[rows]
    return {"x": x, "y": 2 * x}

  def loss_fn(params, batch, rng, extra):
    return jnp.mean((batch["x"] * params["w"] - batch["y"]) ** 2), {}
  return Task(init_params=lambda rng: {"w": jnp.zeros(1)}, loss_fn=loss_fn, host_batch=host_batch)


def _config(**overrides):
  c = trainer_config(num_steps=2, batch_size=8, log_every=1, eval_every=2, checkpoint_every=2, **overrides)
  c.task = "test_counted_line"
  c.optimizer = {"name": "sgd", "learning_rate": 0.1}
  return c


def counting(seen, set_attribute, module, name):
  """Replaces ``module.name`` (with ``set_attribute``) by a call that counts itself in ``seen[name]``."""
  original = getattr(module, name)

  def call(*args, **kwargs):
    seen[name] += 1
    return original(*args, **kwargs)
  set_attribute(module, name, call)


@pytest.fixture
def counts(monkeypatch):
  """Counts calls of the checks and of the builders the config layer uses."""
  seen = collections.Counter()
  for module, name in ((validate, "validate_trainer_config"), (validate, "check_stop_after"),
                       (experiment_trainer, "task_context")):
    counting(seen, monkeypatch.setattr, module, name)
  BUILT.clear()
  return seen


def test_train_checks_the_config_once_and_builds_its_objects_once(counts, tmp_path):
  result = train(_config(), str(tmp_path), stop_after=2, progress=False)
  assert result.summary["steps"] == 2
  assert counts == {"validate_trainer_config": 1, "check_stop_after": 1, "task_context": 1}
  assert len(BUILT) == 1


def test_a_suite_checks_each_experiment_once_before_the_first_trains(counts, tmp_path):
  suite = _config()
  suite.experiments = {"a": _config(), "b": _config(seed=1)}
  summaries = run_experiments(suite, str(tmp_path), progress=False)
  assert list(summaries) == ["a", "b"]
  assert counts == {"validate_trainer_config": 2, "check_stop_after": 1, "task_context": 2}
  assert len(BUILT) == 2


# Runs the command line with the checks counted (``counting`` above); prints the counts at exit.
COUNTING_MAIN = inspect.getsource(counting) + """
import atexit, collections, runpy, sys
from jaxlab.experiment import trainer, validate
seen = collections.Counter()
for module, name in ((validate, "validate_trainer_config"), (validate, "check_stop_after"), (trainer, "task_context")):
  counting(seen, setattr, module, name)
atexit.register(lambda: print("COUNTS", dict(sorted(seen.items()))))
sys.argv = ["jaxlab.main", *sys.argv[1:]]
runpy.run_module("jaxlab.main", run_name="__main__", alter_sys=True)
"""


def test_the_command_line_checks_the_config_once(tmp_path, cli):
  config = tmp_path / "counted_line.py"
  config.write_text(textwrap.dedent("""\
      import jax.numpy as jnp, numpy as np
      from jaxlab.experiment import trainer_config
      from jaxlab.train import TASKS, Task

      @TASKS.register("cli_counted_line")
      def line(config, ctx):
        def host_batch(step, rows, seed):
          x = np.random.default_rng([seed, step]).normal(size=(config.batch_size, 1)).astype(np.float32)[rows]
          return {"x": x, "y": 2 * x}
        loss_fn = lambda params, batch, rng, extra: (jnp.mean((batch["x"] * params["w"] - batch["y"]) ** 2), {})
        return Task(init_params=lambda rng: {"w": jnp.zeros(1)}, loss_fn=loss_fn, host_batch=host_batch)

      def get_config(arg=None):
        c = trainer_config(num_steps=2, batch_size=8, log_every=1, eval_every=2, checkpoint_every=2)
        c.task, c.optimizer = "cli_counted_line", {"name": "sgd", "learning_rate": 0.1}
        return c
      """))
  out = cli.run([sys.executable, "-c", COUNTING_MAIN, f"--config={config}", f"--workdir={tmp_path / 'run'}",
                 "--stop_after=2"])
  assert out.returncode == 0, out.stderr[-3000:]
  assert "COUNTS {'check_stop_after': 1, 'task_context': 1, 'validate_trainer_config': 1}" in out.stdout, out.stdout
