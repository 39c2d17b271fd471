"""``python -m jaxlab.main ARGS`` that sends itself SIGINT at one named start-up point (argv[1]).

Run by test_preemption.py: a deterministic Ctrl-C while the config loads (``config``), while JAX
is up and the task builds (``setup``), or while the first step compiles and runs (``step``).
"""

import os
import runpy
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
point, sys.argv = sys.argv[1], ["jaxlab.main", *sys.argv[2:]]


def _interrupting(module, name):
  """Replaces ``module.name`` by a call that sends SIGINT first, once (handled before it returns)."""
  original, sent = getattr(module, name), []

  def call(*args, **kwargs):
    if not sent:
      sent.append(True)
      os.kill(os.getpid(), signal.SIGINT)
    return original(*args, **kwargs)
  setattr(module, name, call)


if point == "config":
  import jaxlab.config_files
  _interrupting(jaxlab.config_files, "load_config")
elif point == "setup":
  import jaxlab.experiment.trainer
  _interrupting(jaxlab.experiment.trainer, "_setup")
elif point == "step":
  import jaxlab.train.loop
  _interrupting(jaxlab.train.loop._Programs, "__call__")
runpy.run_module("jaxlab.main", run_name="__main__", alter_sys=True)
