"""Bad sizes and settings of the PDE models (DPOT, FNO-2D, AFNO): each case ends in ONE line naming the value.

Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``. Every size is a static
Python value, so the models check them when ``init`` is traced, before any parameter is drawn or
anything is compiled (``jax.eval_shape`` here): each case takes milliseconds.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, Callable

import haiku as hk
import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from configs import dpot_pde  # noqa: E402
from jaxlab.pde.afno import AFNO2D, afno2d, afno_param_shapes  # noqa: E402
from jaxlab.pde.afno_haiku import HkAFNO2D  # noqa: E402
from jaxlab.pde.dpot import DPOTBlock  # noqa: E402
from jaxlab.pde.fno import FNO2d, spectral_conv2d  # noqa: E402
from jaxlab.pde.layers import get_activation, group_norm  # noqa: E402
from jaxlab.pde.sizes import make_dpot  # noqa: E402
from jaxlab.experiment import task_context  # noqa: E402
from jaxlab.tasks import make_task  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]
KEY = jax.random.key(0)


def _dpot(**overrides: Any) -> Callable[[], Any]:
  """Traces ``init`` of the tiny DPOT with ``overrides`` on an input of its configured shape."""
  def run():
    m = make_dpot("tiny", **overrides)
    shape = (1, 16, 16, 3, 2)  # the tiny preset's (B, X, Y, T, C): the input is not what is wrong
    return jax.eval_shape(m.init, KEY, jnp.zeros(shape))
  return run


def _block(**overrides: Any) -> Callable[[], Any]:
  kw = {**dict(width=16, n_blocks=2, modes=4), **overrides}
  return lambda: jax.eval_shape(DPOTBlock(**kw).init, KEY, jnp.zeros((1, 4, 4, 16)))


def _fno(**overrides: Any) -> Callable[[], Any]:
  kw = {**dict(modes=4, width=8, in_channels=1, out_channels=1, in_timesteps=3, n_layers=2), **overrides}
  return lambda: jax.eval_shape(FNO2d(**kw).init, KEY, jnp.zeros((1, 16, 16, 3, 1)))


def _afno(**overrides: Any) -> Callable[[], Any]:
  kw = {**dict(width=16, n_blocks=2, modes=4), **overrides}
  return lambda: jax.eval_shape(AFNO2D(**kw).init, KEY, jnp.zeros((1, 8, 8, 16)))


def _hk_afno(**overrides: Any) -> Callable[[], Any]:
  kw = {**dict(width=16, n_blocks=2, modes=4), **overrides}
  f = hk.transform(lambda x: HkAFNO2D(**kw)(x))
  return lambda: jax.eval_shape(f.init, KEY, jnp.zeros((1, 8, 8, 16)))


def _task(**overrides: Any) -> Callable[[], Any]:
  """The pde_operator task built from configs/dpot_pde.py:tiny with ``model.<key>`` overrides."""
  def build():
    c = dpot_pde.get_config("tiny")
    c.data.cache_dir = tempfile.mkdtemp()  # nothing is generated before the checks
    with c.model.unlocked():
      c.model.update(overrides)
    return make_task(c, task_context(c))
  return build


_w = jnp.zeros((2, 1, 8, 8))  # afno2d weights for width 8, one block
_NAN, _INF = float("nan"), float("inf")

CASES: list[Case] = [
    # sizes of 0 or below: used to divide by zero, overflow or reach the compiler
    ("DPOT", "size 0: n_blocks", _dpot(n_blocks=0), "n_blocks=0; must be an int >= 1 (DPOT: AFNO channel blocks)"),
    ("DPOT", "size 0: modes", _dpot(modes=0), "modes=0; must be an int >= 1 (DPOT: Fourier modes kept per axis)"),
    ("DPOT", "size < 0: modes", _dpot(modes=-1), "modes=-1; must be an int >= 1"),
    ("DPOT", "size 0: embed_dim", _dpot(embed_dim=0), "embed_dim=0; must be an int >= 1"),
    ("DPOT", "size 0: depth", _dpot(depth=0), "depth=0; must be an int >= 1 (DPOT: number of blocks)"),
    ("DPOT", "size < 0: depth", _dpot(depth=-2), "depth=-2; must be an int >= 1"),
    ("DPOT", "size 0: patch_size", _dpot(patch_size=0), "patch_size=0; must be an int >= 1"),
    ("DPOT", "size 0: img_size", _dpot(img_size=0), "img_size=0; must be an int >= 1"),
    ("DPOT", "size 0: in_channels", _dpot(in_channels=0, out_channels=0), "in_channels=0; must be an int >= 1"),
    ("DPOT", "size 0: in_timesteps", _dpot(in_timesteps=0), "in_timesteps=0; must be an int >= 1"),
    ("DPOT", "size 0: out_timesteps", _dpot(out_timesteps=0), "out_timesteps=0; must be an int >= 1"),
    ("DPOT", "size < 0: num_classes", _dpot(num_classes=-1), "num_classes=-1; must be an int >= 0"),
    # zero-width parts: used to build and run silently
    ("DPOT", "zero width: out_layer_dim 0", _dpot(out_layer_dim=0), "out_layer_dim=0; must be an int >= 1"),
    ("DPOT", "zero width: mlp_ratio 0", _dpot(mlp_ratio=0.0), "mlp_ratio=0.0; must be a finite number > 0"),
    ("DPOT", "zero width: mlp_ratio rounding to 0 units", _dpot(mlp_ratio=0.01),
     "mlp_ratio=0.01 gives a DPOT MLP hidden width int(32 * 0.01) = 0; need >= 1 (mlp_ratio >= 1/32)"),
    ("DPOT", "bad factor: mlp_ratio NaN", _dpot(mlp_ratio=_NAN), "mlp_ratio=nan; must be a finite number > 0"),
    ("DPOT", "bad factor: mlp_ratio < 0", _dpot(mlp_ratio=-1.0), "mlp_ratio=-1.0; must be a finite number > 0"),
    # not an int
    ("DPOT", "not an int: modes 2.5", _dpot(modes=2.5), "modes=2.5; must be an int >= 1"),
    ("DPOT", "not an int: embed_dim 32.0", _dpot(embed_dim=32.0), "embed_dim=32.0; must be an int >= 1"),
    ("DPOT", "not an int: n_blocks True", _dpot(n_blocks=True), "n_blocks=True; must be an int >= 1"),
    ("DPOT", "not an int: num_classes 1.5", _dpot(num_classes=1.5), "num_classes=1.5; must be an int >= 0"),
    ("DPOT", "not a bool: normalize 'yes'", _dpot(normalize="yes"), "normalize='yes'; must be True or False"),
    ("DPOT", "normalize over a single value", _dpot(img_size=1, patch_size=1, in_timesteps=1, normalize=True),
     "normalize=True takes an unbiased std over X*Y*T = 1 values; need >= 2"),
    ("DPOT", "not a string: act", _dpot(act=["gelu"]), "act=('gelu',) is not one of"),  # flax stores a tuple
    # the Soft-MoE MLP
    ("DPOT", "MoE: capacity_factor inf", _dpot(mlp="softmoe", capacity_factor=_INF),
     "capacity_factor=inf; must be a finite number > 0"),
    ("DPOT", "MoE: capacity_factor NaN", _dpot(mlp="softmoe", capacity_factor=_NAN),
     "capacity_factor=nan; must be a finite number > 0"),
    ("DPOT", "MoE: capacity_factor a string", _dpot(mlp="softmoe", capacity_factor="1"),
     "capacity_factor='1'; must be a finite number > 0"),
    ("DPOT", "MoE: num_experts 2.0", _dpot(mlp="softmoe", num_experts=2.0),
     "num_experts=2.0; must be an int >= 1"),
    ("DPOT", "MoE: slots_per_expert True", _dpot(mlp="softmoe", slots_per_expert=True),
     "slots_per_expert=True; must be an int >= 0 (DPOT: 0 = from capacity_factor)"),
    ("DPOT", "MoE: bad capacity_factor under the dense MLP", _dpot(capacity_factor=-1.0),
     "capacity_factor=-1.0; must be a finite number > 0"),
    ("DPOT", "MoE: unknown moe_impl", _dpot(mlp="softmoe", moe_impl="fast"),
     "moe_impl='fast'; choose one of ('auto', 'cpu_kernel', 'einsum')"),
    ("DPOT", "block: width 0", _block(width=0), "DPOTBlock.width=0; must be an int >= 1"),
    ("DPOT", "block: unknown mlp (was a Soft MoE)", _block(mlp="moe"), "DPOTBlock.mlp='moe'; allowed"),
    ("DPOT", "block: mlp_ratio 0", _block(mlp_ratio=0.0), "DPOTBlock.mlp_ratio=0.0; must be a finite number > 0"),
    # through the task: the config key is model.<attribute>
    ("pde task", "model.modes 0", _task(modes=0), "model: modes=0; must be an int >= 1"),
    ("pde task", "model.out_layer_dim 0", _task(out_layer_dim=0), "model: out_layer_dim=0; must be an int >= 1"),
    ("pde task", "model.capacity_factor inf", _task(mlp="softmoe", capacity_factor=_INF),
     "model: capacity_factor=inf; must be a finite number > 0"),
    ("pde task", "model.moe_impl unknown", _task(mlp="softmoe", moe_impl="gpu"),
     "model: moe_impl='gpu'; choose one of"),
    # FNO-2D
    ("FNO", "size 0: modes", _fno(modes=0), "FNO2d.modes=0; must be an int >= 1 (Fourier modes kept per axis)"),
    ("FNO", "size 0: width", _fno(width=0), "FNO2d.width=0; must be an int >= 1"),
    ("FNO", "size 0: n_layers", _fno(n_layers=0), "FNO2d.n_layers=0; must be an int >= 1 (Fourier layers)"),
    ("FNO", "size < 0: n_layers", _fno(n_layers=-1), "FNO2d.n_layers=-1; must be an int >= 1"),
    ("FNO", "zero width: projection_dim 0", _fno(projection_dim=0), "FNO2d.projection_dim=0; must be an int >= 1"),
    ("FNO", "size 0: out_timesteps", _fno(out_timesteps=0), "FNO2d.out_timesteps=0; must be an int >= 1"),
    ("FNO", "not an int: modes 2.5", _fno(modes=2.5), "FNO2d.modes=2.5; must be an int >= 1"),
    ("FNO", "check_config without an input", lambda: FNO2d(width=0).check_config(), "FNO2d.width=0"),
    ("FNO", "spectral_conv2d: more modes than the grid",
     lambda: spectral_conv2d(jnp.zeros((1, 4, 4, 1)), jnp.zeros((2, 3, 3, 1, 1)), jnp.zeros((2, 3, 3, 1, 1))),
     "spectral_conv2d weights keep 3x3 modes; need 1 <= 3 <= X/2 and 1 <= 3 <= Y//2+1 for the grid X=4, Y=4"),
    # AFNO (flax, haiku, the pure function)
    ("AFNO", "size 0: n_blocks", _afno(n_blocks=0), "AFNO2D.n_blocks=0; must be an int >= 1"),
    ("AFNO", "size 0: width", _afno(width=0), "AFNO2D.width=0; must be an int >= 1"),
    ("AFNO", "size 0: modes", _afno(modes=0), "AFNO2D.modes=0; must be an int >= 1"),
    ("AFNO", "size 0: hidden_size_factor", _afno(hidden_size_factor=0), "AFNO2D.hidden_size_factor=0; must be an int"),
    ("AFNO", "haiku: n_blocks 0", _hk_afno(n_blocks=0), "HkAFNO2D.n_blocks=0; must be an int >= 1"),
    ("AFNO", "haiku: modes 2.5", _hk_afno(modes=2.5), "HkAFNO2D.modes=2.5; must be an int >= 1"),
    ("AFNO", "afno_param_shapes: n_blocks 0", lambda: afno_param_shapes(16, 0), "AFNO2D.n_blocks=0"),
    ("AFNO", "afno2d: modes 0", lambda: afno2d(jnp.zeros((1, 4, 4, 8)), _w, jnp.zeros((2, 1, 8)), _w,
                                               jnp.zeros((2, 1, 8)), modes=0),
     "afno2d modes=0; must be an int >= 1"),
    ("layers", "group_norm: channels not divisible into groups",
     lambda: group_norm(jnp.zeros((1, 2, 2, 12)), 1.0, 0.0, 8), "group_norm: 12 channels are not divisible into 8"),
    ("layers", "get_activation: not a string", lambda: get_activation(None), "act=None is not one of"),
    ("layers", "get_activation: a list", lambda: get_activation(["gelu"]), "act=['gelu'] is not one of"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)


def test_valid_sizes_still_build():
  """The smallest valid sizes trace: 1 block, 1 mode, mlp_ratio of exactly one unit, slots from the factor."""
  out = _dpot(depth=1, modes=1, mlp_ratio=1 / 32, out_layer_dim=1, mlp="softmoe", num_experts=3)()
  assert out["params"]["blocks_0"]["mlp"]["experts"]["w1"].shape == (3, 32, 1)
  assert _fno(modes=1, n_layers=1, projection_dim=1)()["params"]["project"]["fc1"]["kernel"].shape == (8, 1)
