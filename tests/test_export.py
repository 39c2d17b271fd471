"""The standalone components lower for GPU and TPU: ``jax.export`` for ("cuda", "tpu") on this CPU machine.

Each case is one jitted program (forward and gradient together, or an optimizer update) at tiny
shapes, exported for both platforms in one lowering (tests/support/export.py). The train steps of
the shipped configs and the (data x model x expert) mesh program: tests/train/test_step_export.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from jaxlab.moe import init_soft_moe, init_top1_moe, soft_moe, top1_moe
from jaxlab.optim import momo, momo_adam
from jaxlab.ot_clip import LOSSES, get_loss
from jaxlab.pde import FNO2d, make_dpot
from tests.support.export import BARRIER, abstract, export_for, forward_and_grad

KEY = jax.random.key(0)
TOKENS = jax.ShapeDtypeStruct((2, 10, 6), jnp.float32)


def _soft_moe_program():
  params = abstract(jax.eval_shape(lambda k: init_soft_moe(k, 6, 4, 3, 8), KEY))
  return forward_and_grad(lambda p, x: soft_moe(p, x)[0]), (params, TOKENS)


def _top1_program():
  params = abstract(jax.eval_shape(lambda k: init_top1_moe(k, 6, 4, 8), KEY))
  return forward_and_grad(lambda p, x: top1_moe(p, x, capacity_factor=1.0)[0]), (params, TOKENS)


def _flax_program(model, x_shape):
  x = jax.ShapeDtypeStruct(x_shape, jnp.float32)
  params = jax.eval_shape(model.init, KEY, x)["params"]
  return forward_and_grad(lambda p, x: model.apply({"params": p}, x)), (params, x)


def _dpot(**overrides):
  return _flax_program(make_dpot("tiny", **overrides), (2, 16, 16, 3, 2))


def _fno():
  return _flax_program(FNO2d(modes=4, width=8, in_channels=2, out_channels=2, in_timesteps=3, n_layers=2,
                             projection_dim=16), (2, 16, 16, 3, 2))


def _ot_loss(name, **kwargs):
  loss = get_loss(name, **kwargs)
  emb = jax.ShapeDtypeStruct((8, 4), jnp.float32)
  scalar = jax.ShapeDtypeStruct((), jnp.float32)
  return jax.value_and_grad(loss, argnums=(0, 1, 2, 3)), (emb, emb, scalar, scalar)


def _optimizer_update(opt):
  params = {"w": jax.ShapeDtypeStruct((3, 4), jnp.float32), "b": jax.ShapeDtypeStruct((4,), jnp.float32)}
  state = jax.eval_shape(opt.init, params)
  loss = jax.ShapeDtypeStruct((), jnp.float32)
  return (lambda g, s, p, v: opt.update(g, s, p, value=v)), (params, state, params, loss)


COMPONENTS = {
    "soft_moe": _soft_moe_program,
    "top1_moe": _top1_program,
    "dpot": _dpot,
    # the L/H layout: blocks in one nn.scan, rematerialised; with the Soft-MoE MLP
    "dpot_softmoe_scan_remat": lambda: _dpot(mlp="softmoe", num_experts=2, scan_blocks=True, remat=True),
    "fno": _fno,
    **{f"ot_clip_{name}": (lambda name=name: _ot_loss(name)) for name in LOSSES.names()},
    "ot_clip_entropic_ot_use_ott": lambda: _ot_loss("entropic_ot", use_ott=True),
    "momo": lambda: _optimizer_update(momo(1e-2)),
    "momo_adapt_lower_bound": lambda: _optimizer_update(momo(1e-2, adapt_lower_bound=True)),
    "momo_adam": lambda: _optimizer_update(momo_adam(1e-3)),
    "momo_adam_adapt_lower_bound": lambda: _optimizer_update(momo_adam(1e-3, adapt_lower_bound=True)),
}


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_component_exports_for_cuda_and_tpu(name):
  program, args = COMPONENTS[name]()
  text = export_for(program, *args).mlir_module()
  assert BARRIER not in text  # the Soft MoE's CPU kernel is not what GPU/TPU run (impl="auto")


@pytest.mark.xfail(strict=True, raises=NotImplementedError, reason=(
    "implicit=True gradients (any OT loss): ott's ImplicitDiff solves with lineax, whose convergence check is an "
    "equinox runtime error, i.e. a host callback (pure_callback), which jax.export cannot serialise. jax.jit on a "
    "GPU/TPU host runs it; EQX_ON_ERROR=nan (set before equinox is imported) makes a failed solve NaN instead and "
    "the program exports (docs/design.md, 'The accelerator path, checked by export')"))
def test_implicit_ot_gradient_does_not_export():
  program, args = _ot_loss("entropic_ot", implicit=True)
  export_for(program, *args)

