"""The pde_operator task (DPOT / FNO on generated PDE data) through the trainer.

Tiny configs (32^2, 3 input frames, 8 steps); data are generated once per module into a
temporary cache. Identical programs compile once: the suite's persistent compilation cache
(tests/conftest.py) serves the repeated runs (kill + resume, fine-tuning).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs import dpot_pde
from jaxlab.pde.data import make_dataset, rollout_eval_data
from jaxlab.tasks.pde_data import channels_of
from jaxlab.tasks.pde_model import build_model
from jaxlab.pde.rollout import rollout, rollout_l2re
from jaxlab.experiment import task_context
from jaxlab.tasks import make_task
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train
from tests.support.pde import DPOT_STEP_OPS
from tests.support.tolerances import assert_close_to_scale, ops_rtol, steps_tol

STEPS = 8


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
  return str(tmp_path_factory.mktemp("pde_data"))


def _config(cache, arg="mixture_tiny", **overrides):
  c = dpot_pde.get_config(arg)
  c.data.cache_dir = cache
  c.num_steps, c.log_every, c.eval_every, c.checkpoint_every = STEPS, 2, STEPS, 4
  c.data.rollout_steps = 3
  # SGD: its update is linear in the gradient, so 1- and 8-device runs (which sum the loss in another
  # order) stay within float rounding; Adam's first steps are ~lr * sign(g), which flips for g ~ 1e-9
  c.optimizer = ml_collections.ConfigDict({"name": "sgd", "learning_rate": 3e-3, "momentum": 0.9})
  if c.model.name == "dpot":
    c.model.depth = 1
  for k, v in overrides.items():
    c[k] = v
  return c


@pytest.fixture(scope="module")
def one_device(cache, tmp_path_factory):
  """The 1-channel + 2-channel mixture trained on one device (also the fine-tuning test's pre-training)."""
  workdir = str(tmp_path_factory.mktemp("one_device"))
  return workdir, train(_config(cache), workdir, devices=jax.devices()[:1], progress=False)


def test_mixture_of_1_and_2_channel_sets_trains_on_1_and_8_devices_alike(cache, one_device, tmp_path):
  workdir, one = one_device
  config = _config(cache)
  config.mesh = (("data", 8), ("model", 1))
  eight = train(config, str(tmp_path), progress=False)
  assert eight.summary["mesh"] == {"data": 8, "model": 1}
  chex.assert_trees_all_close(jax.device_get(eight.state.params), jax.device_get(one.state.params),
                              **steps_tol(STEPS, DPOT_STEP_OPS))
  losses = [r["loss"] for r in read_metrics(workdir) if "loss" in r]
  assert len(losses) == STEPS // 2 and np.all(np.isfinite(losses)) and losses[-1] < losses[0]
  assert one.summary["nonfinite_skipped"] == 0
  for name in ("ns_fno_nu1e-03", "diffusion_reaction"):
    for kind in ("1step", "rollout"):
      assert 0 < one.summary[f"l2re_{kind}/{name}"] < 10


def test_rollout_equals_a_python_loop_of_model_calls(cache):
  config = _config(cache, t_out=2)
  model = build_model(config, channels_of(config))
  x0 = jax.random.normal(jax.random.key(1), (2, 32, 32, config.t_in, 2))
  params = model.init(jax.random.key(0), x0)["params"]
  steps = 5  # not a multiple of t_out: the last call's second frame is dropped
  window, frames, apply = x0, [], jax.jit(model.apply)
  while sum(f.shape[3] for f in frames) < steps:
    pred = apply({"params": params}, window)
    frames.append(pred)
    window = jnp.concatenate([window[..., 2:, :], pred], axis=3)
  expected = jnp.concatenate(frames, axis=3)[..., :steps, :]
  got = jax.jit(rollout, static_argnums=(0, 3, 4))(model.apply, params, x0, steps, 2)
  assert got.shape == (2, 32, 32, steps, 2)
  # A scan of model calls vs separate calls: each call's rounding is fed into the next (5 calls).
  assert_close_to_scale(got, expected, ops_rtol(steps * DPOT_STEP_OPS))


def _decaying(n=4, frames=7, channels=2):
  """Trajectories with frame t+1 = 0.9 * frame t, so ``0.9 * last input frame`` predicts them exactly."""
  w0 = np.random.default_rng(0).normal(size=(n, 1, 8, 8, channels)).astype(np.float32)
  return w0 * (0.9 ** np.arange(frames, dtype=np.float32))[None, :, None, None, None]


def test_l2re_of_a_perfect_predictor_is_zero_and_padding_is_masked():
  evals = rollout_eval_data([make_dataset("decay", _decaying(), num_test=2)], t_in=3, num_channels=3)
  junk = jnp.asarray([0.0, 0.0, 7.0])  # anything in the padded third channel must not count

  def perfect(variables, window):
    return variables["params"] * window[..., -1:, :] + junk
  exact = rollout_l2re(perfect, jnp.float32(0.9), evals, t_out=1)
  assert set(exact) == {"l2re_1step/decay", "l2re_rollout/decay"}
  for v in exact.values():
    assert float(v) < 1e-6
  off = rollout_l2re(perfect, jnp.float32(1.0), evals, t_out=1)   # persistence: 1/0.9 - 1 = 0.111 at step 1
  # Two 128-term norms and their ratio; 1/0.9 - 1 loses a digit to the subtraction (x 10).
  np.testing.assert_allclose(off["l2re_1step/decay"], 1 / 0.9 - 1, rtol=10 * ops_rtol(2 * 128 + 4))
  assert off["l2re_rollout/decay"] > off["l2re_1step/decay"]


def test_l2re_of_a_coarse_set_counts_its_own_grid_points_only():
  """A 4^2 set resampled to 8^2 is scored at every 2nd point (DPOT's test mask): errors elsewhere do not count."""
  coarse = make_dataset("coarse", np.ascontiguousarray(_decaying()[:, :, ::2, ::2]), num_test=2)
  evals = rollout_eval_data([coarse], t_in=3, resolution=8)  # resampling is linear: still 0.9 per frame
  between = np.ones((8, 8, 1, 2), np.float32)
  between[::2, ::2] = 0.0                                   # junk only where the set has no point of its own

  def perfect_but_between(variables, window):
    return variables["params"] * window[..., -1:, :] + 7.0 * between
  scored = rollout_l2re(perfect_but_between, jnp.float32(0.9), evals, t_out=1)
  for v in scored.values():
    assert float(v) < 1e-6
  everywhere = {k: {**e, "score_mask": np.ones_like(e["score_mask"])} for k, e in evals.items()}
  assert float(rollout_l2re(perfect_but_between, jnp.float32(0.9), everywhere, t_out=1)["l2re_1step/coarse"]) > 1


def _mixed_batch(task, padded_rows):
  """The first batch of 8 rows holding both data sets (NS is drawn 10/14 of the time), and its padded rows."""
  for step in range(50):
    batch = task.host_batch(step, np.arange(8), 0)
    rows = padded_rows(batch)
    if 0 < rows.sum() < 8:
      return batch, rows
  raise AssertionError("no batch with both data sets in 50 steps")


def test_padded_channel_contributes_nothing_to_the_loss(cache):
  config = _config(cache)
  config.data.channel_padding = "zeros_masked"   # jaxlab's earlier rule (the default is DPOT's ones)
  task = make_task(config, task_context(config))
  params = task.init_params(jax.random.key(0))
  batch, one_channel = _mixed_batch(task, lambda b: b["mask"][:, 0, 0, 0, 1] == 0)
  assert not np.any(batch["x"][one_channel, ..., 1]) and not np.any(batch["y"][one_channel, ..., 1])
  noisy = dict(batch, y=batch["y"].copy())
  noisy["y"][one_channel, ..., 1] = 5.0   # a wrong target in the padded channel
  grad = jax.jit(jax.value_and_grad(lambda p, b: task.loss_fn(p, b, jax.random.key(2), None)[0]))
  (loss, g), (loss_noisy, g_noisy) = grad(params, batch), grad(params, noisy)
  assert float(loss) == float(loss_noisy)
  chex.assert_trees_all_equal(g, g_noisy)
  unmasked = dict(noisy, mask=np.ones_like(batch["mask"]))
  assert float(grad(params, unmasked)[0]) != float(loss)   # the mask is what hides it


def test_dpots_ones_padding_is_trained_on_and_kept_in_the_rollout(cache):
  """DPOT pads missing channels with ones (utils/griddataset.py:98) and its training mask is all ones
  (:157): the padded channel is a target like any other. Only the evaluation masks it out."""
  config = _config(cache)  # default data.channel_padding="ones"
  task = make_task(config, task_context(config))
  params = task.init_params(jax.random.key(0))
  # NS rows: channel 1 is padding (diffusion-reaction's v is never exactly 1.0)
  batch, one_channel = _mixed_batch(task, lambda b: b["x"][:, 0, 0, 0, 1] == 1.0)
  assert np.all(batch["x"][one_channel, ..., 1] == 1) and np.all(batch["y"][one_channel, ..., 1] == 1)
  assert np.all(batch["mask"] == 1)
  wrong = dict(batch, y=batch["y"].copy())
  wrong["y"][one_channel, ..., 1] = 5.0
  loss = jax.jit(lambda p, b: task.loss_fn(p, b, jax.random.key(2), None)[0])
  assert float(loss(params, wrong)) != float(loss(params, batch))   # trained on: the padded target counts

  def junk(variables, window):   # predicts 7 everywhere: the rollout must put the ones back
    return jnp.full(window[..., -1:, :].shape, 7.0)
  x = jnp.asarray(batch["x"][one_channel][:1])
  pred = rollout(junk, None, x, 3, 1, jnp.array([[1.0, 0.0]]), pad_value=1.0)
  assert np.all(np.asarray(pred[..., 1]) == 1.0) and np.all(np.asarray(pred[..., 0]) == 7.0)


def test_mixture_weights_reach_the_batches(cache):
  def share_of_two_channel_rows(weights, rule):
    config = _config(cache, batch_size=16)
    config.data.weights, config.data.mixture_rule = weights, rule
    config.data.channel_padding = "zeros_masked"   # the mask then tells the 2-channel rows
    task = make_task(config, task_context(config))
    masks = [task.host_batch(step, np.arange(16), 0)["mask"][:, 0, 0, 0, 1] for step in range(40)]
    return float(np.mean(np.concatenate(masks)))
  # DPOT's rule: ~ training trajectories x weight; NS has 10, diffusion-reaction 4 (12 and 6, 2 test each)
  for rule, expected in (("size_times_weight", 4 * 1 / (10 * 3 + 4 * 1)), ("weight", 0.25)):
    share = share_of_two_channel_rows((3.0, 1.0), rule)
    assert abs(share - expected) < 4 * np.sqrt(expected * (1 - expected) / 640), (rule, share)  # 640 rows, 4 sigma
    assert share_of_two_channel_rows((0.0, 1.0), rule) == 1.0


def test_fine_tune_from_the_mixture_with_a_new_head_and_frozen_blocks(cache, one_device, tmp_path):
  pre_dir, pre = one_device
  config = _config(cache, seed=3)
  config.data.sets = ({"family": "ns_fno", "viscosity": 1e-3, "trajectories": 6, "seed": 9, "num_frames": 8},)
  config.data.num_channels = 2          # the pre-trained model's channels; the second is padding
  config.init_from.workdir = pre_dir
  config.init_from.reinit = (r"^out_layer/",)
  config.optimizer.freeze = (r"^blocks_",)
  tuned = train(config, str(tmp_path), devices=jax.devices()[:1], progress=False)
  new, old = jax.device_get(tuned.state.params), jax.device_get(pre.state.params)
  chex.assert_trees_all_equal(new["blocks_0"], old["blocks_0"])                          # frozen
  assert not np.allclose(new["patch_embed"]["proj1"]["kernel"], old["patch_embed"]["proj1"]["kernel"])
  assert not np.allclose(new["out_layer"]["fc2"]["kernel"], old["out_layer"]["fc2"]["kernel"])
  assert np.isfinite(tuned.summary["l2re_rollout/ns_fno_nu1e-03"])
  assert tuned.summary["task"] == "dpot on ns_fno_nu1e-03"


def test_rollout_keeps_padded_channels_at_zero():
  # A model that mixes channels: the next frame of every channel is sum over channels of the last one, + 1.
  def apply(variables, window):
    last = window[..., -1:, :]
    return jnp.broadcast_to(last.sum(-1, keepdims=True), last.shape) + variables["params"]

  x1 = jax.random.normal(jax.random.key(0), (2, 4, 4, 3, 1))
  x2 = jnp.concatenate([x1, jnp.zeros_like(x1)], axis=-1)        # channel 1 is padding
  mask = jnp.array([[1.0, 0.0], [1.0, 0.0]])
  padded = rollout(apply, jnp.float32(1.0), x2, 4, 1, mask)
  # Exact: the padded channel holds zeros, and adding zeros rounds nothing.
  chex.assert_trees_all_equal(padded[..., :1], rollout(apply, jnp.float32(1.0), x1, 4, 1))
  assert float(jnp.abs(padded[..., 1]).max()) == 0.0
  unmasked = rollout(apply, jnp.float32(1.0), x2, 4, 1)           # padding fed back: channel 0 drifts
  assert float(jnp.abs(unmasked[..., 0] - padded[..., 0]).max()) > 1.0


def test_summary_names_the_papers_count_for_paper_sizes():
  import ml_collections
  from jaxlab.tasks.pde_model import paper_count
  assert paper_count(ml_collections.ConfigDict({"model": {"name": "dpot", "size": "Ti"}})) == (
      " (DPOT-Ti: the paper's 7,534,643 parameters include a 12-way class head)")
  assert paper_count(ml_collections.ConfigDict({"model": {"name": "dpot", "size": "cpu_small"}})) == ""
  assert paper_count(ml_collections.ConfigDict({"model": {"name": "fno"}})) == ""


def test_fine_tune_channel_advice_works_when_followed():
  """Each channel refusal of a fine-tuning run says what to change, and changing it passes the
  check: more channels than this run's data (pad them), fewer than its widest set (drop the set:
  padding only adds channels), another padding."""
  import re

  from jaxlab.errors import InputError
  from jaxlab.tasks.pde_config import check_config

  def refusal(config, saved):
    with pytest.raises(InputError) as e:
      check_config(config, saved)
    return str(e.value)

  def fine_tuning(sets):
    c = dpot_pde.get_config("mixture_tiny")
    c.init_from.workdir = "pre"
    c.data.sets = tuple(s for s in c.data.sets if s["family"] in sets)
    return c

  one, two = ("ns_fno",), ("ns_fno", "diffusion_reaction")
  saved_two = fine_tuning(two).to_dict()
  config = fine_tuning(one)
  message = refusal(config, saved_two)
  key, value = re.search(r"set data\.(\w+)=(\d+)", message).groups()
  config.data[key] = int(value)
  check_config(config, saved_two)  # padded to the pre-trained model's 2 channels

  saved_one = fine_tuning(one).to_dict()
  config = fine_tuning(two)
  message = refusal(config, saved_one)
  assert "set data.num_channels" not in message  # 1 is below the widest set's 2: refused if followed
  assert message.endswith("fine-tune on data sets of at most 1 channels (the widest set here has 2; padding only "
                          "adds channels)")
  check_config(fine_tuning(one), saved_one)

  saved_old = {**saved_two, "data": {k: v for k, v in saved_two["data"].items() if k != "channel_padding"}}
  config = fine_tuning(one)
  config.data.num_channels = 2
  key, value = re.search(r"set data\.(\w+)='(\w+)'", refusal(config, saved_old)).groups()
  config.data[key] = value
  check_config(config, saved_old)
