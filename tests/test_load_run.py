"""jaxlab.load_run: a trained workdir back as config, params, task, model and inference functions.

Every run here is trained on one device, so the trainer's evaluation and the loaded run's
``evaluate()`` are the same jitted program on the same device and the same test data: their
values are asserted bit-equal to what ``metrics.jsonl`` logged.
"""

import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab.config_files import load_config
from jaxlab.errors import InputError
from jaxlab.train.checkpoint import Checkpointer, abstract_like
from jaxlab.experiment import build_state_init, task_context, train

STEPS = 4


def _train(tmp_path_factory, spec, **overrides):
  config = load_config(spec)
  config.num_steps, config.log_every, config.eval_every, config.checkpoint_every = STEPS, 2, 2, 2
  for key, value in overrides.items():
    config[key] = value
  workdir = str(tmp_path_factory.mktemp(spec.replace(":", "_")))
  train(config, workdir, devices=jax.devices()[:1], progress=False)
  return workdir


def _snapshot(directory):
  """Every path under ``directory`` with its size and modification time."""
  out = {}
  for root, dirs, files in os.walk(directory):
    for name in dirs + files:
      st = os.stat(os.path.join(root, name))
      out[os.path.join(root, name)] = (st.st_size, st.st_mtime_ns)
  return out


@pytest.fixture(scope="module")
def dpot_dir(tmp_path_factory):
  return _train(tmp_path_factory, "dpot_pde:tiny")


def _two_seeds(spec):
  runs = load_config(spec).runs
  runs.seeds = 2
  return runs


@pytest.fixture(scope="module")
def mlp_runs_dir(tmp_path_factory):
  return _train(tmp_path_factory, "digits_mlp:tiny", runs=_two_seeds("digits_mlp:tiny"))


@pytest.fixture(scope="module")
def dqn_runs_dir(tmp_path_factory):
  return _train(tmp_path_factory, "dqn_minatar:tiny", runs=_two_seeds("dqn_minatar:tiny"))


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
  return _train(tmp_path_factory, "digits_clip:tiny")


def _assert_reproduces_log(run):
  evaluated, logged = run.evaluate(), run.logged_metrics()
  assert evaluated and set(evaluated) <= set(logged)
  for key, value in evaluated.items():  # the same program on the same device: bit-equal
    assert type(value) is type(logged[key]), (key, value, logged[key])  # plain numbers, as the log holds them
    np.testing.assert_array_equal(np.asarray(value), np.asarray(logged[key]), err_msg=key)


def test_dpot_run_predicts_rolls_out_and_reproduces_logged_l2re(dpot_dir):
  before = _snapshot(dpot_dir)
  run = jaxlab.load_run(dpot_dir)
  assert (run.step, run.seeds, run.run_axis, type(run.model).__name__) == (STEPS, (0,), False, "DPOT")
  assert run.config.task == "pde_operator" and run.config.t_in == 3 and run.opt_state is None
  _assert_reproduces_log(run)
  assert any(k.startswith("l2re_rollout/") for k in run.evaluate())

  (name, test), = run.data["test"].items()
  n, x, y, t_in, c = test["x"].shape
  assert run.predict(test["x"]).shape == (n, x, y, run.data["t_out"], c)
  steps = test["y"].shape[3]
  frames = run.rollout(test["x"], steps=steps, channel_mask=test["channel_mask"])
  assert frames.shape == test["y"].shape and bool(jnp.all(jnp.isfinite(frames)))
  errors = run.l2re()
  assert set(errors) == {f"l2re_1step/{name}", f"l2re_rollout/{name}"}
  assert all(type(v) is float for v in errors.values()), errors  # plain floats: print as 0.5, not Array(0.5, ...)
  assert errors == {k: v for k, v in run.evaluate().items() if k in errors}
  assert _snapshot(dpot_dir) == before  # nothing in the workdir was written


def test_earlier_step_with_optimizer_state_equals_a_full_restore(dpot_dir):
  run = jaxlab.load_run(dpot_dir, step=2, opt_state=True)
  assert run.step == 2
  _assert_reproduces_log(run)
  # the trainer's own restore of the whole state: a checkpoint read twice is bit-equal
  _, _, _, init, args = build_state_init(run.config, task_context(run.config))
  abstract = jax.eval_shape(init, *args)
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  ckpt = Checkpointer(os.path.join(dpot_dir, "checkpoints"), 2)
  try:
    full, _ = ckpt.restore(abstract_like(abstract, jax.tree.map(lambda _: device, abstract)), step=2)
  finally:
    ckpt.close()
  chex.assert_trees_all_equal(run.params, full.params)
  chex.assert_trees_all_equal(run.opt_state, full.opt_state)


def test_several_seeds_load_all_or_one(mlp_runs_dir):
  every = jaxlab.load_run(mlp_runs_dir)
  assert every.run_axis and every.seeds == (0, 1) and every.labels == ("seed=0", "seed=1")
  _assert_reproduces_log(every)  # the trainer's vmapped evaluation, again on one device
  images = every.data["x_test"][:5]
  assert every.predict(images).shape == (2, 5, 10)  # vmapped over the runs

  one = jaxlab.load_run(mlp_runs_dir, seed_index=1)
  assert not one.run_axis and one.seeds == (1,) and one.predict(images).shape == (5, 10)
  chex.assert_trees_all_equal(one.params, jax.tree.map(lambda x: x[1], every.params))  # the same checkpoint
  assert one.logged_metrics()["test_accuracy"] == every.logged_metrics()["test_accuracy"][1]
  # one seed of several is evaluated by the program without the run axis: the log to float32 rounding
  for key, value in one.evaluate().items():
    assert type(value) in (float, int), (key, value)
    np.testing.assert_allclose(value, every.logged_metrics()[key][1], rtol=1e-5, err_msg=key)


@pytest.mark.slow  # two DQN seeds: ~45 s on 2 busy cores, mostly compiling the environments
def test_dqn_greedy_policy_and_play(dqn_runs_dir):
  every = jaxlab.load_run(dqn_runs_dir)
  _assert_reproduces_log(every)  # eval_return of both seeds, the trainer's keys and program
  obs = jnp.zeros((3, *every.data["obs_shape"]), jnp.bool_)
  assert every.greedy_policy(obs).shape == (2, 3)

  run = jaxlab.load_run(dqn_runs_dir, seed_index=1)
  actions = run.greedy_policy(obs)
  assert actions.shape == (3,) and actions.dtype == jnp.int32
  np.testing.assert_array_equal(actions, jnp.argmax(run.q_values(obs), axis=-1))  # argmax of the same values
  result = run.play(jax.random.key(0), num_envs=2, max_steps=run.config.dqn.eval_steps)
  assert int(result["eval_episodes"]) + int(result["eval_capped"]) >= 1
  assert run.logged_metrics()["eval_return"] == every.logged_metrics()["eval_return"][1]


def test_two_tower_embeddings_and_zero_shot(clip_dir):
  run = jaxlab.load_run(clip_dir)
  _assert_reproduces_log(run)
  images = run.data["x_test"][:16]
  emb, classes = run.embed_images(images), run.class_embeddings()
  assert emb.shape == (16, run.config.model.embed_dim) and classes.shape == (10, run.config.model.embed_dim)
  from jaxlab.ot_clip import digits_pairs
  tokens = digits_pairs.tokenize("a drawing of a three", run.data["vocab"])[None]
  assert run.embed_texts(tokens).shape == (1, run.config.model.embed_dim)
  for method in ("argmax", "ot"):
    labels = run.zero_shot(images, method=method)
    assert labels.shape == (16,) and bool(jnp.all((labels >= 0) & (labels < 10)))
  with pytest.raises(InputError, match="method='nearest'; allowed: 'argmax'"):
    run.zero_shot(images, method="nearest")
  with pytest.raises(AttributeError, match="no 'rollout'; its inference functions: class_embeddings"):
    run.rollout


@pytest.mark.parametrize("case,match", [
    ("missing", r"workdir='.*missing' does not exist"),
    ("empty", r"workdir='.*' holds no checkpoint \(no checkpoints/<step>/ in it\)"),
    ("suite", r"holds no checkpoint .* it holds a suite, load one of its experiments: .*dpot_pde_tiny"),
    ("step", r"step=3 has no checkpoint in .*; allowed: 2, 4 \(or None for the newest\)"),
    ("seed_single", r"seed_index=1 is out of range; .* holds a single run \(seed=0\); allowed: an int in \[0, 0\]"),
    ("seed_runs", r"seed_index=2 is out of range; .* holds 2 vmapped runs \(seed=0, seed=1\); allowed: an int in \[0, 1\]"),
    ("seed_bool", r"seed_index=True is out of range"),
    ("step_str", r"step='4' is a str; allowed: an int step \(2, 4\), e.g. step=4, or None for the newest"),
    ("mesh_str", r"mesh='data=8' is a str; allowed: a jax.sharding.Mesh \(e.g. jaxlab.train.make_mesh"),
    ("mesh_runs", r"mesh \{'data': 8\} has a 'data' axis of size 8, which the run axis of the 2 vmapped runs in "
                  r".* is sharded over; allowed: a mesh whose 'data' size divides 2 \(1, 2\), or seed_index in \[0, 1\]"),
])
def test_bad_input_is_one_line_and_changes_nothing(tmp_path, dpot_dir, mlp_runs_dir, case, match):
  (tmp_path / "empty").mkdir()
  suite = os.path.dirname(dpot_dir)  # pytest's base temp holds every module fixture's workdir
  args = {"missing": (str(tmp_path / "missing"), {}), "empty": (str(tmp_path / "empty"), {}),
          "suite": (suite, {}), "step": (dpot_dir, {"step": 3}), "seed_single": (dpot_dir, {"seed_index": 1}),
          "seed_runs": (mlp_runs_dir, {"seed_index": 2}), "seed_bool": (mlp_runs_dir, {"seed_index": True}),
          "step_str": (dpot_dir, {"step": "4"}), "mesh_str": (mlp_runs_dir, {"mesh": "data=8"}),
          "mesh_runs": (mlp_runs_dir, {"mesh": jaxlab.train.make_mesh((("data", 8),))})}[case]
  workdir, kwargs = args
  before = _snapshot(workdir) if os.path.isdir(workdir) else None
  with pytest.raises(InputError, match=match) as e:
    jaxlab.load_run(workdir, **kwargs)
  assert "\n" not in str(e.value)
  assert (_snapshot(workdir) if os.path.isdir(workdir) else None) == before


def _copy_with_config(src, dst, edit):
  """``src`` copied to ``dst``, the config saved beside each checkpoint edited by ``edit(dict)``."""
  import json
  import shutil
  shutil.copytree(src, dst)
  for step in os.listdir(os.path.join(dst, "checkpoints")):
    path = os.path.join(dst, "checkpoints", step, "config", "metadata")
    if os.path.isfile(path):
      saved = json.load(open(path))
      edit(saved)
      json.dump(saved, open(path, "w"))
  return str(dst)


def test_a_checkpoint_of_another_run_is_refused_in_one_line(tmp_path, mlp_runs_dir):
  from jaxlab.errors import CheckpointError
  # The config says 16 hidden units; the checkpoint holds the state of the trained width.
  other = _copy_with_config(mlp_runs_dir, tmp_path / "other", lambda c: c["model"].update(hidden=[16]))
  with pytest.raises(CheckpointError) as e:
    jaxlab.load_run(other)
  message = str(e.value)
  assert "\n" not in message and f"{other}/checkpoints/{STEPS}" in message, message
  assert "does not hold the state its saved config builds" in message and "params/Dense_0/kernel" in message
  with pytest.raises(CheckpointError, match="params/Dense_0/kernel"):  # one run of several alike
    jaxlab.load_run(other, seed_index=1)


def test_a_task_a_config_file_registers_is_named_with_what_to_load(tmp_path, mlp_runs_dir):
  # A task registered beside a config file's get_config is unknown until that file is loaded.
  other = _copy_with_config(mlp_runs_dir, tmp_path / "own_task", lambda c: c.update(task="my_line_fit"))
  with pytest.raises(InputError) as e:
    jaxlab.load_run(other)
  message = str(e.value)
  assert "\n" not in message and f"{other!r} was trained on task 'my_line_fit', which is not registered" in message
  assert "jaxlab.config_files.load_config('<that config>.py')" in message and "digits_classification" in message


def test_one_run_of_several_loads_onto_a_mesh_its_data_axis_need_not_divide(mlp_runs_dir):
  run = jaxlab.load_run(mlp_runs_dir, seed_index=1, mesh=jaxlab.train.make_mesh((("data", 4), ("model", 2))))
  assert not run.run_axis and run.seeds == (1,)


def test_a_resume_told_to_stop_at_its_checkpoint_trains_nothing_and_is_refused(tmp_path, mlp_runs_dir):
  import shutil
  config = load_config("digits_mlp:tiny")
  config.num_steps, config.log_every, config.eval_every, config.checkpoint_every = 2 * STEPS, 2, 2, 2
  config.runs = _two_seeds("digits_mlp:tiny")
  workdir = str(tmp_path / "resumed")
  shutil.copytree(mlp_runs_dir, workdir)  # its checkpoint at STEPS; num_steps raised, as a resume may
  before = _snapshot(workdir)
  for stop_after in (STEPS - 1, STEPS):
    with pytest.raises(InputError, match=rf"--stop_after={stop_after} \(stop_after\) is at or before the workdir's "
                                         rf"checkpoint at step {STEPS}: nothing to train; allowed: a step in "
                                         rf"\[{STEPS + 1}, {2 * STEPS}\]"):
      train(config, workdir, devices=jax.devices()[:1], stop_after=stop_after, progress=False)
  assert _snapshot(workdir) == before
