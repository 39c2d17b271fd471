r"""Quickstart: the main job, a suite that runs each jaxlab method through the one train step.

Four experiments, one per method: MoMo (digits MLP), OT-CLIP + MoMo-Adam (digits two-tower),
DQN with a Soft-MoE head (MinAtar Breakout) and DPOT (Navier-Stokes data generated locally).
On CPU, in under 3 minutes on 2 cores with no downloads, compilation and data generation
included. Each entry of ``experiments`` is a complete config (its own file in configs/);
results go to ``workdir/<name>`` and the summary table has one column per experiment.

Run (what ``make demo`` does)::

  python -m jaxlab.main --config=configs/quickstart.py --workdir=runs/quickstart

Small variant (seconds, the two digits experiments only; used by the CLI test)::

  python -m jaxlab.main --config=configs/quickstart.py:tiny --workdir=/tmp/qs_tiny

Override one experiment's key: ``--config.experiments.digits_mlp.num_steps=100``.
"""

import importlib.util
import os

import ml_collections


def _sibling(name: str):
  """configs/<name>.py, loaded by path so this works from any working directory."""
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
  spec = importlib.util.spec_from_file_location(f"jaxlab_configs_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (all four methods, each config's ``:demo`` size where it has one) or
  ``"tiny"`` (a few steps of the two digits experiments, for tests)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"configs/quickstart.py takes no argument or 'tiny', got {arg!r}")
  c = ml_collections.ConfigDict()
  c.name = "quickstart"
  c.experiments = ml_collections.ConfigDict()
  c.experiments.digits_mlp = _sibling("digits_mlp").get_config(arg)    # MoMo on a sharded MLP
  c.experiments.digits_clip = _sibling("digits_clip").get_config(arg)  # OT-CLIP loss + MoMo-Adam
  if arg != "tiny":  # compile-heavy (an on-device RL loop; PDE data made on first use): full quickstart only
    c.experiments.dqn_softmoe = _sibling("dqn_minatar").get_config("demo")  # Soft-MoE DQN on MinAtar
    c.experiments.dpot = _sibling("dpot_pde").get_config("demo")            # DPOT on Navier-Stokes
  return c
