"""DPOT's training and evaluation protocol (thu-ml/DPOT @ dcd2f9a) as configs/dpot_pde.py sets it.

Optimizer: the config's optax recipe against a float64 numpy transcription of the official step
(train_temporal.py:135, 140, 225-230; utils/optimizer.py:33-52; torch 2.0 OneCycleLR). Frames and
horizons: what the task serves from each set, read back from a cache whose values are frame indices.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from configs import dpot_pde
from jaxlab.optim import optimizer_from_config
from jaxlab.optim.schedules import onecycle, onecycle_momentum
from jaxlab.pde.data import generator
from jaxlab.pde.losses import add_denoising_noise
from jaxlab.tasks.pde_data import channels_of, evaluation_data, load_datasets
from tests.support.tolerances import ops_rtol

STEPS = 10  # OneCycle over 10 steps at pct_start 0.2: warm-up to step 1, peak, cosine down to step 9
EPS32 = float(np.finfo(np.float32).eps)
A = np.array([1e-5, 2e-5, 3e-5, 5e-6])  # loss sum_i A_i (p_i - C_i)^2 / 2: gradients ~1e-5, so the
C = np.array([-1.0, 3.0, -0.5, 2.0])    # L2 term 1e-6 p (5-20 % of them) and eps 1e-8 both show
P0 = np.array([1.0, -2.0, 0.5, 3.0])


def _torch_onecycle(k, total, max_value, start, end, pct_start=0.2):
  """torch.optim.lr_scheduler.OneCycleLR.get_lr (torch 2.0), cos anneal, at step k, in float64."""
  end_up, end_down = pct_start * total - 1, total - 1
  if k <= end_up:
    pct, lo, hi = k / end_up, start, max_value
  else:
    pct, lo, hi = (k - end_up) / (end_down - end_up), max_value, end
  return hi + (lo - hi) / 2.0 * (math.cos(math.pi * pct) + 1)


def _torch_reference(max_norm=1e4, scale=1.0, steps=STEPS):
  """The official step in float64: clip_grad_norm_, Adam(betas=(b1_k, 0.9), eps=1e-8, weight_decay=1e-6)
  with OneCycleLR(max_lr=1e-3, div_factor=1e4, final_div_factor=1e4, pct_start=0.2) setting lr_k and,
  by its default cycle_momentum=True, b1_k. Returns the params before each step, the gradients and the updates."""
  p, m, v = P0.copy(), np.zeros(4), np.zeros(4)
  params, grads, updates = [], [], []
  for k in range(steps):
    g = scale * A * (p - C)
    params.append(p.copy()), grads.append(g.copy())
    g = g * min(1.0, max_norm / (np.linalg.norm(g) + 1e-6))   # torch.nn.utils.clip_grad_norm_
    lr = _torch_onecycle(k, steps, 1e-3, 1e-7, 1e-11)           # initial 1e-3 / 1e4, min initial / 1e4
    b1 = _torch_onecycle(k, steps, 0.85, 0.95, 0.95)            # max_momentum -> base -> max
    g = g + 1e-6 * p                                            # utils/optimizer.py:36-37: L2 into the gradient
    m = b1 * m + (1 - b1) * g
    v = 0.9 * v + (1 - 0.9) * g * g
    step = k + 1
    denom = np.sqrt(v) / math.sqrt(1 - 0.9 ** step) + 1e-8
    update = -lr / (1 - b1 ** step) * m / denom
    updates.append(update)
    p = p + update
  return np.array(params), np.array(grads), np.array(updates)


def _optax_updates(opt, params, grads):
  """The optimizer fed the reference's own params and gradients (float32), so only its arithmetic differs."""
  state = opt.init({"p": jnp.asarray(params[0], jnp.float32)})
  update = jax.jit(opt.update)
  out = []
  for p, g in zip(params, grads):
    u, state = update({"p": jnp.asarray(g, jnp.float32)}, state, {"p": jnp.asarray(p, jnp.float32)})
    out.append(np.asarray(u["p"], np.float64))
  return np.array(out)


# Each update passes through ~30 float32 roundings (norm of 4 squares, clip, L2 term, two moment
# updates, b1 and lr from the schedule, two bias corrections, sqrt, divide), and the moments carry
# the earlier steps' roundings into later updates; the gradients keep their sign, so none is
# amplified by cancellation: the bound of 30 roundings per step over the 10 steps, relative.
RTOL = ops_rtol(30 * STEPS)


def _recipe(**chain_overrides):
  c = dpot_pde.get_config().optimizer
  if chain_overrides:
    c = ml_collections.ConfigDict(c.to_dict())
    c.chain = tuple((name, {**dict(kw), **chain_overrides.get(name, {})}) for name, kw in c.chain)
  return c


# The config's max_norm 1e4 (a no-op here, as in the official runs), and a clip that acts. torch's
# clip_grad_norm_ scales by max_norm / (norm + 1e-6), optax's by max_norm / norm: the same once the
# norm is far above 1e-6 (always, where DPOT's 1e4 threshold acts), so the clipping case uses
# gradients ~1e-2 (1e-4 relative in the clip factor, ~1e-8 in Adam's scale-free update).
@pytest.mark.parametrize("max_norm,scale", [(None, 1.0), (2.5e-2, 1e3)])
def test_dpot_optimizer_equals_torch_adam_with_l2_and_onecycle(max_norm, scale):
  overrides = {} if max_norm is None else {"clip_by_global_norm": {"max_norm": max_norm}}
  params, grads, expected = _torch_reference(**({} if max_norm is None else {"max_norm": max_norm}), scale=scale)
  if max_norm is not None:
    assert np.linalg.norm(grads[0]) > 1.1 * max_norm  # the clip does act
  got = _optax_updates(optimizer_from_config(_recipe(**overrides), STEPS), params, grads)
  np.testing.assert_allclose(got, expected, rtol=RTOL, atol=0)


def _lr_b1(total):
  """The config's lr and b1 schedules for ``total`` steps."""
  return (onecycle(1e-3, total, pct_start=0.2, div_factor=1e4, final_div_factor=1e4),
          onecycle_momentum(total, pct_start=0.2))


def test_the_reference_tells_the_alternatives_apart():
  """What the comparison above rules out, each by far more than its tolerance."""
  params, grads, expected = _torch_reference()
  lr, b1 = _lr_b1(STEPS)
  rel = lambda got: float(np.max(np.abs(got - expected) / np.abs(expected)))  # noqa: E731
  wrong = {
      # AdamW: decay applied to the params after Adam instead of entering the moments
      "decoupled decay": optax.chain(optax.scale_by_adam(b1=0.9, b2=0.9), optax.add_decayed_weights(1e-6),
                                     optax.scale_by_learning_rate(lr)),
      # optax's one-cycle: peak at int(0.2 * 10) = 2 instead of torch's 0.2 * 10 - 1 = 1
      "optax onecycle": optax.chain(optax.add_decayed_weights(1e-6),
                                    optax.inject_hyperparams(optax.scale_by_adam)(b1=b1, b2=0.9),
                                    optax.scale_by_learning_rate(optax.cosine_onecycle_schedule(
                                        STEPS, 1e-3, pct_start=0.2, div_factor=1e4, final_div_factor=1e4))),
      # betas (0.9, 0.9) as given, without OneCycleLR's momentum cycle
      "fixed b1": optax.chain(optax.add_decayed_weights(1e-6), optax.scale_by_adam(b1=0.9, b2=0.9),
                              optax.scale_by_learning_rate(lr)),
  }
  for name, opt in wrong.items():
    assert rel(_optax_updates(opt, params, grads)) > 100 * RTOL, name


def test_onecycle_schedule_is_torchs_at_every_step():
  """lr and b1 against torch's formula for a long run, where float32 cancellation would show."""
  total = 100_000
  lr, b1 = _lr_b1(total)
  steps = np.array([0, 1, 7, 19_998, 19_999, 20_000, 20_001, 50_000, 99_000, 99_990, 99_998, 99_999])
  want_lr = np.array([_torch_onecycle(k, total, 1e-3, 1e-7, 1e-11) for k in steps])
  want_b1 = np.array([_torch_onecycle(k, total, 0.85, 0.95, 0.95) for k in steps])
  # one float32 evaluation of a sum of two non-negative terms: a few epsilons relative
  np.testing.assert_allclose(np.asarray(jax.vmap(lr)(steps), np.float64), want_lr, rtol=8 * EPS32)
  np.testing.assert_allclose(np.asarray(jax.vmap(b1)(steps), np.float64), want_b1, rtol=8 * EPS32)


def test_denoising_noise_per_grid_point_grows_with_the_grid():
  """The official noise scales with ||x|| over X*Y*T (train_temporal.py:205), so one noise_scale is
  sqrt(4) = 2x the relative noise per point at 128^2 as at 64^2 (documented in the config and docstring)."""
  def relative_noise(n):
    x = jax.random.normal(jax.random.key(0), (4, n, n, 10, 1))
    noise = add_denoising_noise(x, jax.random.key(1), 5e-4) - x
    return float(jnp.sqrt(jnp.mean(noise ** 2)) / jnp.sqrt(jnp.mean(x ** 2)))
  small, large = relative_noise(64), relative_noise(128)
  # 5e-4 sqrt(64 * 64 * 10) = 0.101; sampling error of 4 * 64^2 * 10 normal draws is ~0.2 %
  np.testing.assert_allclose(small, 5e-4 * math.sqrt(64 * 64 * 10), rtol=0.01)
  np.testing.assert_allclose(large / small, 2.0, rtol=0.01)


def _frame_index_cache(monkeypatch):
  """Generation replaced by frame numbers: value = stored frame index, in every trajectory and point."""
  def frame_index(spec, out, **kw):
    out[:] = np.arange(spec.num_frames, dtype=np.float32)[None, :, None, None, None]
    return out
  monkeypatch.setattr(generator, "generate", frame_index)


def _mixture(tmp_path, **data):
  c = dpot_pde.get_config("mixture")
  c.data.cache_dir = str(tmp_path)
  c.data.sets = tuple(dict(s, trajectories=3) for s in c.data.sets)
  c.data.num_test, c.data.eval_trajectories = 1, 0
  for k, v in data.items():
    c.data[k] = v
  return c


def _served(config):
  datasets = load_datasets(config)
  evals = evaluation_data(config, datasets, channels_of(config))
  return {name: (e["x"][0, 0, 0, :, 0].astype(int).tolist(), e["y"][0, 0, 0, :, 0].astype(int).tolist())
          for name, e in evals.items()}


def test_ns_sets_serve_fnos_u_frames_and_dpots_horizons(tmp_path, monkeypatch):
  """Stored frame 0 of an NS set is w0; DPOT's data start at FNO's t = 1 and test t_test = 20 / 20 / 10
  frames after t_in = 10 (utils/make_master_file.py:44, 30, 17); other sets: every frame after t_in."""
  _frame_index_cache(monkeypatch)
  config = _mixture(tmp_path)
  served = _served(config)
  t_in = list(range(1, 11))
  assert served["ns_fno_nu1e-03"] == (t_in, list(range(11, 31)))     # t = 11..30 of T = 50
  assert served["ns_fno_nu1e-04"] == (t_in, list(range(11, 31)))     # t = 11..30 of T = 30
  assert served["ns_fno_nu1e-05"] == (t_in, list(range(11, 21)))     # t = 11..20 of T = 20
  assert served["kolmogorov"] == (list(range(10)), list(range(10, 41)))
  assert served["diffusion_reaction"] == (list(range(10)), list(range(10, 101)))
  ns = load_datasets(config)[0]   # training windows are cut from the same served frames: no w0
  assert ns.num_frames == 50 and float(ns.trajectories[..., 0].min()) == 1.0
  old = _served(_mixture(tmp_path, keep_w0=True))       # the switch: jaxlab's earlier frames
  assert old["ns_fno_nu1e-03"][0] == list(range(10)) and len(old["ns_fno_nu1e-03"][1]) == 20
  assert old["kolmogorov"] == served["kolmogorov"]
  every = _mixture(tmp_path, keep_w0=True)
  every.data.sets = tuple(dict(s, t_test=41 - 20 * (i == 1) - 30 * (i == 2)) if i < 3 else s
                          for i, s in enumerate(every.data.sets))
  assert [len(y) for _, y in list(_served(every).values())[:3]] == [41, 21, 11]   # the 90.5-min study's horizons
