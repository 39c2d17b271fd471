"""The RL study configs: every cell is a valid trainer config with the intended runs and network."""

from __future__ import annotations

import jax
import pytest

from configs import rl_expert_scaling, rl_momo_dqn, rl_router_diagnosis
from benchmarks.rl_study_cells import cell_config, run_labels, units
from configs.rl_expert_scaling import scaled_dqn
from jaxlab.config_files import load_config
from jaxlab.optim.config import optimizer_from_config
from jaxlab.experiment import runs_from_config
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.experiment.validate import validate_trainer_config

STUDIES = [(m, arg) for m in (rl_expert_scaling, rl_momo_dqn) for arg in (None, "small")] + [
    (rl_expert_scaling, "two_games"), (rl_expert_scaling, "full"), (rl_expert_scaling, "full_smoke"),
    (rl_expert_scaling, "tokenize"), (rl_expert_scaling, "tokenize_small"),
    (rl_router_diagnosis, None), (rl_router_diagnosis, "small"), (rl_expert_scaling, "router"),
    (rl_expert_scaling, "router_smoke")]


@pytest.mark.parametrize("module,arg", STUDIES, ids=lambda v: getattr(v, "__name__", str(v)).split(".")[-1])
def test_every_cell_builds_a_trainer_config(module, arg):
  study = module.get_config(arg)
  assert set(study.order) == set(study.cells)
  params_by_cell = {}
  for key, name, game in units(study):
    c = cell_config(study, name, game)
    validate_trainer_config(c)
    runs = runs_from_config(c)
    labels = run_labels(study)
    assert runs.size == len(labels) == study.seeds * len(study.get("lrs", None) or (None,))
    if study.get("lrs", None):  # sweep outer, seeds inner, as the report assumes
      assert list(runs.hparams["learning_rate"]) == [pytest.approx(l["lr"]) for l in labels]
    assert list(runs.seeds) == [c.seed + l["seed"] for l in labels]
    optimizer_from_config(c.optimizer, c.num_steps, swept=tuple(runs.hparams))
    task = make_task(c, task_context(c))
    shapes = jax.eval_shape(task.init_params, jax.random.key(0))
    params_by_cell[key] = sum(x.size for x in jax.tree.leaves(shapes))
    # Dopamine's settings kept; decay and warm-up scaled with the run length.
    frames = c.num_steps * c.dqn.update_period
    assert c.dqn.target_update_period == 1000 and c.dqn.gamma == 0.99 and c.batch_size == 32
    assert c.dqn.epsilon_decay_frames == scaled_dqn(frames)["epsilon_decay_frames"]
    if arg == "full":  # Dopamine's replay; shorter runs cut it to what they can fill
      assert c.dqn.replay_capacity == 100_000
    else:
      assert c.dqn.replay_capacity >= frames
    assert c.num_steps % c.steps_per_call == 0 and c.checkpoint_every % c.steps_per_call == 0
  if module is rl_expert_scaling and arg == "two_games":  # the 60k-frame run: both games, the 7 cells
    assert tuple(study.games) == ("breakout", "space_invaders") and len(units(study)) == 14
    assert frames == rl_expert_scaling.TWO_GAMES_FRAMES and study.prefix == "expert_scaling_two_games"
  if module is rl_expert_scaling and arg is None:
    assert params_by_cell["dense_x8"] > 7 * params_by_cell["dense"]
    assert params_by_cell["softmoe_8"] > params_by_cell["softmoe_1"]


def test_full_expert_scaling_is_the_issues_design_with_dopamines_recipe():
  study = rl_expert_scaling.get_config("full")
  assert tuple(study.games) == ("breakout", "space_invaders") and study.seeds >= 3
  assert set(study.order) == {"dense", "dense_x4", "dense_x8", "softmoe_1", "softmoe_2", "softmoe_4", "softmoe_8",
                              "top1_8"}
  assert len(units(study)) == 16
  recipe = load_config("dqn_minatar").dqn.to_dict()
  for key, name, game in units(study):
    c = cell_config(study, name, game)
    assert c.env.name == game and c.num_steps * c.dqn.update_period == 1_000_000
    # Every DQN setting is configs/dqn_minatar.py's (Dopamine's), except how evaluation is sampled.
    assert {k: v for k, v in c.dqn.to_dict().items() if not k.startswith("eval")} == \
        {k: v for k, v in recipe.items() if not k.startswith("eval")}
    if name == "top1_8":  # the documented aux weights: Dopamine's released configs bind no aux loss
      assert c.network.importance_weight == 0.0 and c.network.load_balancing_weight == 0.0
  widths = {n: cell_config(study, n, "breakout").network.width_multiplier for n in ("dense", "dense_x4", "dense_x8")}
  assert widths == {"dense": 1, "dense_x4": 4, "dense_x8": 8}
  experts = {n: cell_config(study, n, "breakout").network.num_experts for n in study.order if "moe" in n or "top1" in n}
  assert experts == {"softmoe_1": 1, "softmoe_2": 2, "softmoe_4": 4, "softmoe_8": 8, "top1_8": 8}


def test_momo_cells_differ_only_in_the_optimizer():
  study = rl_momo_dqn.get_config()
  configs = {n: cell_config(study, n) for n in study.order}
  assert configs["momo_adam_star"].optimizer.adapt_lower_bound is True
  assert "adapt_lower_bound" not in configs["momo_adam"].optimizer
  for c in configs.values():
    assert c.optimizer.eps == configs["adam"].optimizer.eps
    assert c.network.to_dict() == configs["adam"].network.to_dict()


@pytest.mark.parametrize("arg", ["tokenize", "tokenize_small"])
def test_tokenize_cells_differ_only_in_the_network_and_log_diagnostics(arg):
  study = rl_expert_scaling.get_config(arg)
  configs = {name: cell_config(study, name) for name in study.order}
  heads = {name: c.network.head for name, c in configs.items()}
  assert {"dense", "token_mlp", "softmoe_1_scaled"} <= set(heads)
  if arg == "tokenize":
    assert set(heads.values()) == {"dense", "token_dense", "token_mlp", "softmoe"}
    assert configs["softmoe_8_flatten"].network.tokenizer == "flatten"
  first = next(iter(configs.values()))
  for c in configs.values():
    assert c.network.diagnostics is True
    assert {k: v for k, v in c.items() if k not in ("network", "name")} == \
        {k: v for k, v in first.items() if k not in ("network", "name")}


def test_the_router_design_puts_the_fix_beside_the_papers_recipe_at_200k_frames():
  study = rl_expert_scaling.get_config("router")
  fix = rl_expert_scaling.ROUTER_FIX
  assert tuple(study.games) == ("breakout", "space_invaders") and study.seeds == 3
  assert set(study.order) == {"dense", "dense_x4", "dense_x8"} | {f"softmoe_{n}{s}" for n in (1, 2, 4, 8)
                                                                 for s in ("", f"_{fix}")}
  settings = rl_router_diagnosis.VARIANTS[fix]["set"]
  for n in (1, 2, 4, 8):
    paper, fixed = (cell_config(study, name, "breakout") for name in (f"softmoe_{n}", f"softmoe_{n}_{fix}"))
    assert paper.num_steps * paper.dqn.update_period == rl_expert_scaling.ROUTER_FRAMES >= 200_000
    assert paper.network.num_experts == fixed.network.num_experts == n
    for key, value in settings.get("network", {}).items():
      assert fixed.network[key] == value and paper.network[key] != value
    for block in set(settings) - {"network"}:
      assert fixed[block].to_dict() == {**paper[block].to_dict(), **settings[block]} != paper[block].to_dict()
