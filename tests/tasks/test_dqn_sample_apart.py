"""One environment step per update (env.num_envs == dqn.update_period): the replay sample sits behind a
conditional, so the trainer's program writes the replay in place, and the batches are the same."""

from __future__ import annotations

import re

import jax
import numpy as np
from configs import dqn_minatar
from jaxlab.optim import optimizer_from_config
from jaxlab.tasks import dqn_minatar as task_module
from jaxlab.train import make_train_step
from jaxlab.train.state import make_init_fn
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from tests.support.xla import AS_USERS_COMPILE


def _program(monkeypatch, apart: bool, seeds: int = 1):
  """(HLO text of the trainer's step as XLA compiles it for a user, the state after 2 donated calls of that
  compiled step, 2 updates each) of the tiny agent, 4 envs x 1 step."""
  if not apart:  # the plain sample, as before the conditional
    monkeypatch.setattr(task_module, "_sample_apart",
                        lambda replay, state, rng, gamma: replay.sample_transitions(state, rng, gamma))
  c = dqn_minatar.get_config("tiny")
  c.env.num_envs = 4
  task = make_task(c, task_context(c))
  opt = optimizer_from_config(c.optimizer, c.num_steps)
  init = make_init_fn(task.init_params, opt, task.init_extra, task.init_data)
  keys = jax.random.split(jax.random.key(0), seeds)
  state = jax.jit(jax.vmap(init) if seeds > 1 else init)(keys if seeds > 1 else keys[0])
  step = make_train_step(task.loss_fn, opt, collect=task.collect, update_extra=task.update_extra, steps_per_call=2,
                         vmap_runs=seeds > 1)
  compiled = step.jitted.lower(state, None).compile(AS_USERS_COMPILE)
  for _ in range(2):
    state, _ = compiled(state, None)
  monkeypatch.undo()
  return compiled.as_text(), state


def _buffer_copies(hlo: str) -> int:
  """Copies of the observation buffer (tiny: pred[4, 128, 10, 10, 4]) in the compiled program."""
  return len(re.findall(r"= pred\[4,128,10,10,4\]\{[^}]*\} copy\(", hlo))


def test_the_replay_is_written_in_place_and_the_run_is_unchanged(monkeypatch):
  hlo_plain, plain = _program(monkeypatch, apart=False)
  hlo_apart, apart = _program(monkeypatch, apart=True)
  assert _buffer_copies(hlo_plain) >= 1  # what the conditional removes (XLA:CPU's fusion + copy insertion)
  assert _buffer_copies(hlo_apart) == 0
  for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(apart), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
