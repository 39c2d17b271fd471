"""The RL study configs: every cell is a valid trainer config with the intended runs and network."""

from __future__ import annotations

import jax
import pytest

from configs import rl_expert_scaling, rl_momo_dqn
from configs.rl_expert_scaling import cell_config, run_labels, scaled_dqn
from jaxlab.optim.config import optimizer_from_config
from jaxlab.train.runs import runs_from_config
from jaxlab.train.task import make_task
from jaxlab.train.validate import validate_trainer_config

STUDIES = [(m, arg) for m in (rl_expert_scaling, rl_momo_dqn) for arg in (None, "small")]


@pytest.mark.parametrize("module,arg", STUDIES, ids=lambda v: getattr(v, "__name__", str(v)).split(".")[-1])
def test_every_cell_builds_a_trainer_config(module, arg):
  study = module.get_config(arg)
  assert set(study.order) == set(study.cells)
  params_by_cell = {}
  for name in study.order:
    c = cell_config(study, name)
    validate_trainer_config(c)
    runs = runs_from_config(c)
    labels = run_labels(study)
    assert runs.size == len(labels) == study.seeds * len(study.get("lrs", None) or (None,))
    if study.get("lrs", None):  # sweep outer, seeds inner, as the report assumes
      assert list(runs.hparams["learning_rate"]) == [pytest.approx(l["lr"]) for l in labels]
    assert list(runs.seeds) == [c.seed + l["seed"] for l in labels]
    optimizer_from_config(c.optimizer, c.num_steps, swept=tuple(runs.hparams))
    task = make_task(c)
    shapes = jax.eval_shape(task.init_params, jax.random.key(0))
    params_by_cell[name] = sum(x.size for x in jax.tree.leaves(shapes))
    # Dopamine's settings kept; decay and warm-up scaled with the run length.
    frames = c.num_steps * c.dqn.update_period
    assert c.dqn.target_update_period == 1000 and c.dqn.gamma == 0.99 and c.batch_size == 32
    assert c.dqn.epsilon_decay_frames == scaled_dqn(frames)["epsilon_decay_frames"]
    assert c.dqn.replay_capacity >= frames
    assert c.num_steps % c.steps_per_call == 0 and c.checkpoint_every % c.steps_per_call == 0
  if module is rl_expert_scaling and arg is None:
    assert params_by_cell["dense_x8"] > 7 * params_by_cell["dense"]
    assert params_by_cell["softmoe_8"] > params_by_cell["softmoe_1"]


def test_momo_cells_differ_only_in_the_optimizer():
  study = rl_momo_dqn.get_config()
  configs = {n: cell_config(study, n) for n in study.order}
  assert configs["momo_adam_star"].optimizer.adapt_lower_bound is True
  assert "adapt_lower_bound" not in configs["momo_adam"].optimizer
  for c in configs.values():
    assert c.optimizer.eps == configs["adam"].optimizer.eps
    assert c.network.to_dict() == configs["adam"].network.to_dict()
