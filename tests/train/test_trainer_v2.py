"""The trainer of Foundation v2: device data, runs, steps per call, evaluation schedule, summaries."""

import json
import sys

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs import digits_mlp
from jaxlab.errors import InputError
from jaxlab.train import TASKS, Task
from jaxlab.experiment import trainer_config
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train
from tests.support.tolerances import ops_rtol, steps_tol

# digits_mlp:tiny, per parameter and step: dot products over 64 pixels and 32 hidden units, a mean
# over a batch of 32, Adam: ~150 rounded operations. Two programs running the same steps (vmapped,
# scanned, sharded over a mesh, with a traced rate) agree to the rounding of each step, carried on.
MLP_STEP_OPS = 150



def _mlp(**overrides):
  c = digits_mlp.get_config("tiny")
  c.batch_size = 64
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 1e-2})
  c.model.hidden = (32, 16)
  for k, v in overrides.items():
    c[k] = v
  return c


def _params(result):
  return jax.device_get(result.state.params)


# --- a task whose data is made on the device -------------------------------------------------

@TASKS.register("test_on_device_regression")
def on_device_regression(config, ctx):
  """y = sin(x . w*) on fresh Gaussian x drawn on the device each step; a counter in data_state."""
  d = 4
  w_true = jnp.linspace(-1.0, 1.0, d)

  def init_params(rng):
    return {"w": 0.1 * jax.random.normal(rng, (d, 8)), "v": jnp.zeros((8,))}

  def init_data(params, rng):
    del params
    return {"key": jax.random.key_data(rng), "seen": jnp.zeros((), jnp.int32)}

  def collect(state, rng):
    del rng  # the data stream has its own key in data_state, advanced every step
    key, sub = jax.random.split(jax.random.wrap_key_data(state.data_state["key"]))
    x = jax.random.normal(sub, (config.batch_size, d))
    batch = {"x": x, "y": jnp.sin(x @ w_true)}
    data_state = {"key": jax.random.key_data(key), "seen": state.data_state["seen"] + config.batch_size}
    return state.replace(data_state=data_state), batch, {"samples_seen": data_state["seen"]}

  def loss_fn(params, batch, rng, extra):
    pred = jnp.tanh(batch["x"] @ params["w"]) @ params["v"]
    return jnp.mean((pred - batch["y"]) ** 2), {}

  def evaluate(state, rng):
    x = jax.random.normal(rng, (256, d))
    pred = jnp.tanh(x @ state.params["w"]) @ state.params["v"]
    return {"eval_mse": jnp.mean((pred - jnp.sin(x @ w_true)) ** 2)}

  return Task(init_params=init_params, loss_fn=loss_fn, collect=collect, init_data=init_data,
              evaluate=evaluate, throughput={"samples": config.batch_size}, description="on-device regression")


def _device_config(**overrides):
  c = trainer_config(num_steps=24, batch_size=32, log_every=6, eval_every=12, checkpoint_every=12)
  c.task = "test_on_device_regression"
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 3e-2})
  for k, v in overrides.items():
    c[k] = v
  return c


def test_device_data_task_trains_and_resumes_bit_identically(tmp_path):
  full = train(_device_config(), str(tmp_path / "full"), progress=False)
  killed = str(tmp_path / "killed")
  train(_device_config(), killed, stop_after=18, progress=False)  # checkpoint at 12, dies at 18
  resumed = train(_device_config(), killed, progress=False)
  # Bit-equal by construction: the same compiled steps on this machine, from the restored state.
  chex.assert_trees_all_equal(jax.device_get(full.state), jax.device_get(resumed.state))
  assert int(resumed.state.data_state["seen"]) == 24 * 32
  rows = read_metrics(killed)
  assert [r["step"] for r in rows] == [6, 12, 18, 24]
  assert rows[-1]["samples_seen"] == 24 * 32 and "samples_per_sec" in rows[-1] and "eval_mse" in rows[-1]
  assert full.summary["eval_mse"] < 0.5


def test_eval_offset_evaluates_after_shifted_steps_at_call_ends(tmp_path):
  """eval_offset=5, eval_every=8: evaluations after the steps s with (s + 5) % 8 == 0 (3, 11, 19) and the
  last (24); calls of 4 after a first of 3 end there. The training is the run's without the offset."""
  shifted = train(_device_config(steps_per_call=4, eval_every=8, eval_offset=5), str(tmp_path / "shifted"),
                  progress=False)
  rows = read_metrics(str(tmp_path / "shifted"))
  assert [r["step"] for r in rows if "eval_mse" in r] == [3, 11, 19, 24]
  plain = train(_device_config(steps_per_call=4, eval_every=8), str(tmp_path / "plain"), progress=False)
  assert [r["step"] for r in read_metrics(str(tmp_path / "plain")) if "eval_mse" in r] == [8, 16, 24]
  # the same steps; calls of other lengths are other programs, so equal to each step's rounding
  chex.assert_trees_all_close(jax.device_get(shifted.state.params), jax.device_get(plain.state.params),
                              **steps_tol(24, 60))
  with pytest.raises(InputError, match="eval_every=8 is not a multiple of steps_per_call=3; with eval_offset=5"):
    train(_device_config(steps_per_call=3, eval_every=8, eval_offset=5), str(tmp_path / "bad"), progress=False)


def test_device_data_runs_vmapped_and_scanned_equal_single_runs(tmp_path):
  config = _device_config(steps_per_call=6)
  config.runs.seeds = 8
  many = train(config, str(tmp_path / "many"), progress=False)
  assert many.summary["runs"] == 8 and many.state.params["w"].shape == (8, 4, 8)
  assert many.state.params["w"].sharding.spec[0] == "data"
  for seed in (0, 5):
    one = train(_device_config(seed=seed), str(tmp_path / f"one{seed}"), devices=jax.devices()[:1], progress=False)
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[seed], jax.device_get(many.state.params)),
                                jax.device_get(one.state.params), **steps_tol(config.num_steps, 60))
  rows = read_metrics(str(tmp_path / "many"))
  assert len(rows[-1]["loss"]) == 8


# --- host data: runs, sweeps, steps per call ---------------------------------------------------

def test_host_data_runs_equal_single_runs_with_their_seeds(tmp_path):
  config = _mlp(mesh=(("data", 2), ("model", 4)))
  config.runs.seeds = 2
  many = train(config, str(tmp_path / "many"), progress=False)
  kernel = many.state.params["Dense_0"]["kernel"]
  assert kernel.shape == (2, 64, 32) and kernel.sharding.spec == jax.sharding.PartitionSpec("data", None, "model")
  for seed in (0, 1):
    one = train(_mlp(seed=seed), str(tmp_path / f"one{seed}"), devices=jax.devices()[:1], progress=False)
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[seed], _params(many)), _params(one),
                                **steps_tol(config.num_steps, MLP_STEP_OPS))


def test_learning_rate_sweep_in_one_program(tmp_path):
  config = _mlp(mesh=(("data", 2), ("model", 4)))
  config.runs.sweep = (("learning_rate", (1e-3, 3e-2)),)
  swept = train(config, str(tmp_path / "swept"), progress=False)
  row = read_metrics(str(tmp_path / "swept"))[-1]
  np.testing.assert_allclose(row["opt/learning_rate"], [1e-3, 3e-2], rtol=ops_rtol(1))  # float32 of the value
  one = train(_mlp(optimizer=ml_collections.ConfigDict({"name": "adam", "learning_rate": 3e-2})),
              str(tmp_path / "one"), devices=jax.devices()[:1], progress=False)
  # inject_hyperparams multiplies by a traced rate, plain adam by a constant: rounding only.
  chex.assert_trees_all_close(jax.tree.map(lambda x: x[1], _params(swept)), _params(one),
                              **steps_tol(config.num_steps, MLP_STEP_OPS))


@pytest.mark.parametrize("num_steps", [20, 22])
def test_steps_per_call_matches_one_step_per_call(tmp_path, num_steps):
  one = train(_mlp(num_steps=num_steps), str(tmp_path / "one"), progress=False)
  scanned = train(_mlp(num_steps=num_steps, steps_per_call=5), str(tmp_path / "k5"), progress=False)
  assert int(scanned.state.step) == num_steps
  chex.assert_trees_all_close(_params(one), _params(scanned), **steps_tol(num_steps, MLP_STEP_OPS))


def test_eval_runs_on_its_own_schedule(tmp_path):
  train(_mlp(log_every=5, eval_every=3), str(tmp_path), progress=False)
  rows = read_metrics(str(tmp_path))
  assert [r["step"] for r in rows if "test_accuracy" in r] == [3, 6, 9, 12, 15, 18, 20]
  assert [r["step"] for r in rows if "loss" in r] == [5, 10, 15, 20]


def test_rerun_of_a_finished_run_reports_its_results_and_early_stops_say_so(tmp_path):
  stopped = train(_mlp(), str(tmp_path), stop_after=10, progress=False)
  assert "early at step 10 of 20" in stopped.summary["stopped"]
  first = train(_mlp(), str(tmp_path), progress=False)
  again = train(_mlp(), str(tmp_path), progress=False)
  assert "stopped" not in again.summary
  assert np.isfinite(again.summary["final_loss"]) and again.summary["final_loss"] == first.summary["final_loss"]
  assert again.summary["test_accuracy"] == first.summary["test_accuracy"]


def test_steps_per_sec_excludes_compilation(tmp_path):
  result = train(_mlp(num_steps=40, log_every=20), str(tmp_path), progress=False)
  rows = [r for r in read_metrics(str(tmp_path)) if "loss" in r]
  # Compilation takes seconds; a tiny MLP step takes well under 50 ms even on a loaded machine.
  assert rows[0]["steps_per_sec"] > 20 and result.summary["steps_per_sec"] > 20


# --- registry and imports ---------------------------------------------------------------------

def test_importing_the_trainer_imports_no_method_package(cli):
  code = ("import sys, jaxlab.train, jaxlab.experiment.trainer, jaxlab.main; "
          "print(sorted(m for m in sys.modules if m.startswith(('jaxlab.ot_clip', 'jaxlab.tasks', 'jaxlab.rl', "
          "'jaxlab.pde', 'ott', 'gymnax', 'flashbax', 'exponax'))))")
  out = cli.run([sys.executable, "-c", code], timeout=120)
  assert out.returncode == 0, out.stderr
  # the config layer names the shipped tasks (jaxlab.tasks.registry) without importing one of them
  assert out.stdout.strip() == "['jaxlab.tasks', 'jaxlab.tasks.registry']"


def test_registering_the_same_task_again_is_fine_but_another_is_not():
  TASKS.register("test_on_device_regression")(on_device_regression)  # a re-run notebook cell
  with pytest.raises(InputError, match="already registered"):
    TASKS.register("test_on_device_regression")(lambda config: None)


@TASKS.register("test_always_nan")
def always_nan(config, ctx):
  base = on_device_regression(config, ctx)
  loss_fn = lambda params, batch, rng, extra: (jnp.nan * base.loss_fn(params, batch, rng, extra)[0], {})
  return Task(init_params=base.init_params, loss_fn=loss_fn, collect=base.collect, init_data=base.init_data)


def test_a_run_whose_every_step_is_skipped_stops_and_says_so(tmp_path):
  from jaxlab.errors import DivergedError
  with pytest.raises(DivergedError, match=r"every step from 0 to 6 had a non-finite loss or gradient"):
    train(_device_config(task="test_always_nan"), str(tmp_path), progress=False)


def test_classification_with_the_wrong_number_of_outputs_is_refused(tmp_path):
  config = _mlp()
  config.model.num_outputs = 5
  with pytest.raises(InputError, match="model.num_outputs=5 but the digits have 10 classes"):
    train(config, str(tmp_path), progress=False)
