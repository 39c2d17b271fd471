"""Bad input to the pde_operator task: each case ends in ONE line naming the bad value.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. The checks run
before any data are generated or anything is compiled, so every case takes milliseconds; the
two that need files (a cache with a NaN, a pre-trained run's checkpoint) write tiny ones.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from configs import dpot_pde  # noqa: E402
from jaxlab.pde.data import dataset_dir, fno_navier_stokes  # noqa: E402
from jaxlab.pde.rollout import rollout, rollout_l2re  # noqa: E402
from jaxlab.experiment import task_context  # noqa: E402
from jaxlab.tasks import make_task  # noqa: E402
from jaxlab.train.checkpoint import Checkpointer  # noqa: E402
from jaxlab.experiment import train  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]


def _cfg(arg: str = "tiny", **overrides: Any):
  c = dpot_pde.get_config(arg)
  c.data.cache_dir = tempfile.mkdtemp()  # nothing may be generated before the checks; if it were, not in $HOME
  for key, value in overrides.items():
    node = c
    *parents, leaf = key.split(".")
    for p in parents:
      node = node[p]
    with node.unlocked():
      node[leaf] = value
  return c


def _task(arg: str = "tiny", **overrides: Any) -> Callable[[], Any]:
  def build() -> Any:
    config = _cfg(arg, **overrides)
    return make_task(config, task_context(config))
  return build


def _non_finite_data():
  """A cached NS set whose trajectory 1 holds a NaN (as a crashed solver or a bad disk would leave)."""
  config = _cfg()
  spec = fno_navier_stokes(1e-3, 12, resolution=32, num_frames=8)
  folder = dataset_dir(spec, config.data.cache_dir)
  folder.mkdir(parents=True)
  data = np.zeros(spec.shape, np.float32)
  data[1, 3, 5, 5, 0] = np.nan
  np.save(folder / "trajectories.npy", data)
  (folder / "settings.json").write_text(json.dumps(spec.settings()))
  return make_task(config, task_context(config))


def _pretrained_with_two_channels():
  """Fine-tuning a 1-channel run from a checkpoint of a 2-channel (mixture) run, without padding."""
  pre = tempfile.mkdtemp()
  ckpt = Checkpointer(os.path.join(pre, "checkpoints"), 1, config=dpot_pde.get_config("mixture_tiny").to_dict())
  ckpt.maybe_save(1, {"params": {"w": jnp.zeros(2)}}, final=True)
  ckpt.close()
  config = _cfg()
  config.init_from.workdir = pre
  return train(config, tempfile.mkdtemp(), devices=jax.devices()[:1], progress=False)


def _pretrained_with_zero_padding():
  """Fine-tuning with DPOT's ones from a run that padded with zeros (the model saw zeros there)."""
  pre = tempfile.mkdtemp()
  saved = dpot_pde.get_config("mixture_tiny")
  saved.data.channel_padding = "zeros_masked"
  ckpt = Checkpointer(os.path.join(pre, "checkpoints"), 1, config=saved.to_dict())
  ckpt.maybe_save(1, {"params": {"w": jnp.zeros(2)}}, final=True)
  ckpt.close()
  config = _cfg("mixture_tiny")
  config.init_from.workdir = pre
  return train(config, tempfile.mkdtemp(), devices=jax.devices()[:1], progress=False)


def _ns_set(**kw: Any) -> tuple[dict, ...]:
  return ({"family": "ns_fno", "viscosity": 1e-3, "trajectories": 12, "num_frames": 8, **kw},)


def _persistence(variables, window):
  return window[..., -1:, :]


def _rollout_l2re_of_no_frames():
  """An evaluation entry with 0 frames to roll out would score L2RE 0/0: refused."""
  evals = {"d": dict(x=np.ones((2, 8, 8, 3, 1), np.float32), y=np.ones((2, 8, 8, 0, 1), np.float32),
                     channel_mask=np.ones((2, 1), bool))}
  return rollout_l2re(_persistence, None, evals, t_out=1)


CASES: list[Case] = [
    ("pde task", "resolution not divisible by the patch", _task(**{"data.resolution": 34}),
     "data.resolution=34 is not divisible by the DPOT patch size 4"),
    ("pde task", "embed_dim not divisible by 8", _task(**{"model.embed_dim": 36}),
     "embed_dim 36 is not divisible by 8"),
    ("pde task", "embed_dim not divisible by n_blocks", _task(**{"model.embed_dim": 40, "model.n_blocks": 3}),
     "embed_dim 40 is not divisible by n_blocks 3"),
    ("pde task", "unknown model name", _task(**{"model.name": "unet"}), "model.name='unet'; choose one of"),
    ("pde task", "unknown DPOT size", _task(**{"model.size": "XL"}), "unknown DPOT size 'XL'"),
    ("pde task", "unknown model setting", _task(**{"model.depht": 2}), "unexpected keyword argument 'depht'"),
    ("pde task", "model.in_channels against the data", _task(**{"model.in_channels": 3}),
     "model.in_channels=3 does not match the data's 1 channels"),
    ("pde task", "FNO modes above the grid", _task("fno_tiny", **{"model.modes": 20}),
     "model.modes=20 needs data.resolution >= 40"),
    ("pde task", "unknown data source", _task(**{"data.source": "disk"}),
     "data.source='disk'; allowed: 'generated', 'files'"),
    ("pde task", "unknown family", _task(**{"data.sets": ({"family": "burgers", "trajectories": 4},)}),
     "unknown PDE family 'burgers'"),
    ("pde task", "set without trajectories", _task(**{"data.sets": ({"family": "kolmogorov"},)}),
     "has no 'trajectories' key"),
    ("pde task", "t_in larger than the trajectories", _task(t_in=8),
     "t_in=8 + t_out=1 frames exceed data set 'ns_fno_nu1e-03' (data.sets[0])'s 8 frames (FNO's u, w0 dropped"),
    ("pde task", "t_in=0", _task(t_in=0), "t_in=0; must be an int >= 1"),
    ("pde task", "rollout longer than the trajectories", _task(**{"data.rollout_steps": 6}),
     "t_in=3 + data.rollout_steps=6 exceed data set 'ns_fno_nu1e-03' (data.sets[0])'s 8 frames"),
    ("pde task", "a set's t_test longer than its trajectories",
     _task(**{"data.sets": ({"family": "ns_fno", "viscosity": 1e-3, "trajectories": 12, "num_frames": 8,
                             "t_test": 6},)}),
     "t_in=3 + data.sets[0].t_test=6 exceed data set 'ns_fno_nu1e-03' (data.sets[0])'s 8 frames"),
    ("pde task", "t_in too long for DPOT's t_test of an FNO set", _task("mixture", t_in=12),
     "t_in=12 + t_test=20 (DPOT's for this FNO set; override with data.sets[1].t_test) exceed data set "
     "'ns_fno_nu1e-04' (data.sets[1])'s 30 frames (FNO's u, w0 dropped: data.keep_w0=False); "
     "t_in + the test horizon must be <= 30"),
    ("pde task", "t_test of 0", _task(**{"data.sets": ({"family": "ns_fno", "trajectories": 12, "num_frames": 8,
                                                        "t_test": 0},)}),
     "data.sets[0].t_test=0; must be an int >= 1"),
    ("pde task", "num_channels below the widest set", _task("mixture_tiny", **{"data.num_channels": 1}),
     "data.num_channels=1 is below the widest data set's 2 channels"),
    ("pde task", "weights of another length", _task("mixture_tiny", **{"data.weights": (1.0,)}),
     "data.weights has 1 entries for 2 data sets"),
    ("pde task", "negative weight", _task("mixture_tiny", **{"data.weights": (1.0, -1.0)}),
     "data.weights[1]=-1.0 in data.weights=(1.0, -1.0) must be a finite number >= 0"),
    ("pde task", "weights summing to zero", _task("mixture_tiny", **{"data.weights": (0.0, 0.0)}),
     "data.weights=(0.0, 0.0) sum to 0; at least one weight must be > 0"),
    ("pde task", "unknown mixture rule", _task("mixture_tiny", **{"data.mixture_rule": "sizes"}),
     "data.mixture_rule='sizes'; allowed: 'size_times_weight', 'weight'"),
    ("pde task", "unknown channel padding", _task(**{"data.channel_padding": "zeros"}),
     "data.channel_padding='zeros'; allowed: 'ones', 'zeros_masked'"),
    ("pde task", "negative noise", _task(noise_scale=-1e-3), "noise_scale=-0.001 must be finite and >= 0"),
    ("pde task", "non-finite values in the data", _non_finite_data,
     "data set 'ns_fno_nu1e-03': loaded trajectory 1 has non-finite values"),
    # data.sets entries: every family parameter is checked before anything is generated
    ("pde task", "negative viscosity in a set", _task(**{"data.sets": _ns_set(viscosity=-1e-3)}),
     "data.sets[0]: viscosity=-0.001 of family 'ns_fno'; must be a finite number > 0 (kinematic viscosity nu"),
    ("pde task", "Kolmogorov at zero viscosity (Re = inf)",
     _task(**{"data.sets": ({"family": "kolmogorov", "trajectories": 4, "viscosity": 0.0, "num_frames": 8},)}),
     "data.sets[0]: viscosity=0.0 of family 'kolmogorov'; must be a finite number > 0"),
    ("pde task", "Kolmogorov forcing above the grid's Nyquist",
     _task(**{"data.sets": ({"family": "kolmogorov", "trajectories": 4, "injection_mode": 20, "num_frames": 8},)}),
     "data.sets[0]: injection_mode=20 of family 'kolmogorov'; must be <= 16"),
    ("pde task", "negative diffusivity in the reaction set",
     _task("mixture_tiny", **{"data.sets": _ns_set() + ({"family": "diffusion_reaction", "trajectories": 6,
                                                          "num_frames": 8, "diffusivity_v": -5e-3},)}),
     "data.sets[1]: diffusivity_v=-0.005 of family 'diffusion_reaction'; must be a finite number >= 0"),
    ("pde task", "GRF exponent that makes no field", _task(**{"data.sets": _ns_set(grf_alpha=500.0)}),
     "data.sets[0]: family 'ns_fno': grf_alpha=500.0, grf_tau=7.0 make no field on 32^2 points"),
    ("pde task", "ETDRK order 0", _task(**{"data.sets": _ns_set(order=0)}),
     "data.sets[0]: order=0 of family 'ns_fno'; must be an int in [1, 4]"),
    ("pde task", "dt not dividing the frame interval", _task(**{"data.sets": _ns_set(dt=0.3)}),
     "data.sets[0]: frame_interval=1.0 must be a positive integer multiple of dt=0.3"),
    ("pde task", "zero frames in a set", _task(**{"data.sets": _ns_set(num_frames=0)}),
     "data.sets[0]: num_frames=0 of family 'ns_fno'; must be an int >= 1"),
    ("pde task", "zero trajectories in a set", _task(**{"data.sets": _ns_set(trajectories=0)}),
     "data.sets[0].trajectories=0; must be an int >= 1"),
    ("pde task", "negative seed of a set", _task(**{"data.sets": _ns_set(seed=-1)}),
     "data.sets[0]: seed=-1 must be an int in [0, 2^63)"),
    ("pde task", "a set that is not a dict", _task(**{"data.sets": ("ns_fno",)}),
     "data.sets[0]='ns_fno' must be a dict with 'family', 'trajectories'"),
    ("pde task", "no data sets", _task(**{"data.sets": ()}), "data.sets=() must be a non-empty tuple"),
    ("pde task", "odd resolution", _task("fno_tiny", **{"data.resolution": 33}),
     "data.resolution=33 must be an even int >= 8"),
    # the train/test split and the evaluation
    ("pde task", "eval_trajectories=-1", _task(**{"data.eval_trajectories": -1}),
     "data.eval_trajectories=-1; must be an int >= 0"),
    ("pde task", "eval_trajectories above num_test", _task(**{"data.eval_trajectories": 5}),
     "data.eval_trajectories=5 exceeds data.num_test=2; must be in [0, 2]"),
    ("pde task", "num_test=0 (nothing to evaluate)", _task(**{"data.num_test": 0}),
     "data.num_test=0 must be an int >= 1 (test trajectories per set"),
    ("pde task", "num_test of every trajectory", _task(**{"data.num_test": 12}),
     "data.num_test=12 leaves no training trajectory in data set 'ns_fno_nu1e-03' (data.sets[0].trajectories=12); "
     "must be in [1, 11]"),
    ("pde task", "num_test of a small set in a mixture", _task("mixture_tiny", **{"data.num_test": 6}),
     "data.num_test=6 leaves no training trajectory in data set 'diffusion_reaction' (data.sets[1].trajectories=6)"),
    ("pde task", "rollout of 0 frames (L2RE 0/0)", _rollout_l2re_of_no_frames,
     "evals['d']['y'] has shape (2, 8, 8, 0, 1); must be (n, X, Y, steps, C) with steps >= 1"),
    ("pde task", "rollout of -1 frames", lambda: rollout(_persistence, None, jnp.ones((2, 8, 8, 3, 1)), -1, 1),
     "steps=-1 must be an int >= 1 (frames to roll out)"),
    ("pde task", "rollout with t_out=0", lambda: rollout(_persistence, None, jnp.ones((2, 8, 8, 3, 1)), 2, 0),
     "t_out=0 must be an int >= 1 (frames per call)"),
    # channels and the model
    ("pde task", "model.in_channels below the widest set (no padding can fix it)",
     _task("mixture_tiny", **{"model.in_channels": 1}),
     "model.in_channels=1 does not match the data's 2 channels; remove model.in_channels (the widest data set has 2"),
    ("pde task", "model.out_channels above the data's (pad the data)", _task(**{"model.out_channels": 3}),
     "model.out_channels=3 does not match the data's 1 channels; set data.num_channels=3 to pad the data to it"),
    ("pde task", "negative num_channels", _task(**{"data.num_channels": -1}),
     "data.num_channels=-1 is below the widest data set's 1 channels; must be 0 (the widest set's) or an int >= 1"),
    ("pde task", "FNO modes of 0", _task("fno_tiny", **{"model.modes": 0}), "model.modes=0; must be an int >= 1 (Fourier modes kept per axis)"),
    ("pde task", "checkpoint with other channels than the data", _pretrained_with_two_channels,
     "was trained with 2 channels, this run's data have 1; set data.num_channels=2"),
    ("pde task", "checkpoint with another channel padding", _pretrained_with_zero_padding,
     "was trained with data.channel_padding='zeros_masked', this run has 'ones'; set data.channel_padding="),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)
