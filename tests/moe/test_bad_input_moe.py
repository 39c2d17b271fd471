"""Bad sizes and factors of the MoE layers: each case ends in ONE line naming the value and where it came from.

Covers the pure functions (``num_slots``, ``capacity``, the ``init_*`` functions, ``soft_moe``,
``top1_moe``), the flax modules and the haiku modules. Sizes and factors are static Python values,
so each check runs when ``init`` is traced (``jax.eval_shape`` here), before anything compiles.
Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import haiku as hk
import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from jaxlab.moe import (SoftMoE, Top1MoE, capacity, haiku_modules, init_experts, init_soft_moe,  # noqa: E402
                        init_top1_moe, num_slots, soft_moe, top1_moe)
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]
KEY = jax.random.key(0)
TOKENS = jnp.zeros((2, 10, 6))
_NAN, _INF = float("nan"), float("inf")


def _flax(module: type, **overrides: Any) -> Callable[[], Any]:
  kw = {**dict(num_experts=2, expert_hidden=4), **overrides}
  return lambda: jax.eval_shape(module(**kw).init, KEY, TOKENS)


def _haiku(name: str, **overrides: Any) -> Callable[[], Any]:
  kw = {**dict(num_experts=2, expert_hidden=4), **overrides}
  f = hk.transform(lambda x: getattr(haiku_modules, name)(**kw)(x))
  return lambda: jax.eval_shape(f.init, KEY, TOKENS)


def _experts(n: int = 2, d: int = 6, h: int = 4) -> dict:
  # zeros, not init_*: an op-by-op random init would compile for a second; the checks need shapes only
  return {"w1": jnp.zeros((n, d, h)), "b1": jnp.zeros((n, h)), "w2": jnp.zeros((n, h, d)), "b2": jnp.zeros((n, d))}


def _soft(x: jax.Array = TOKENS, options: dict | None = None, **experts: int) -> Callable[[], Any]:
  return lambda: soft_moe({"router": {"phi": jnp.zeros((6, 2, 3))}, "experts": _experts(**experts)}, x,
                          **(options or {}))


def _top1(x: jax.Array = TOKENS, **kw: Any) -> Callable[[], Any]:
  return lambda: top1_moe({"router": {"kernel": jnp.zeros((6, 2))}, "experts": _experts()}, x, **kw)


_CF = "must be a finite number > 0"
CASES: list[Case] = [
    # num_slots=0 used to be read as "unset" (``num_slots or ...``) and silently replaced
    ("MoE flax", "num_slots 0", _flax(SoftMoE, num_slots=0),
     "SoftMoE.num_slots=0; must be None (use capacity_factor) or an int >= 1"),
    ("MoE flax", "num_slots 2.5", _flax(SoftMoE, num_slots=2.5), "SoftMoE.num_slots=2.5; must be None"),
    ("MoE haiku", "num_slots 0", _haiku("SoftMoE", num_slots=0),
     "SoftMoE.num_slots=0; must be None (use capacity_factor) or an int >= 1"),
    ("MoE haiku", "num_slots -1", _haiku("SoftMoE", num_slots=-1), "SoftMoE.num_slots=-1; must be None"),
    # capacity_factor: inf (OverflowError in math.ceil), a string (TypeError), NaN, <= 0
    ("MoE flax", "Soft MoE capacity_factor inf", _flax(SoftMoE, capacity_factor=_INF),
     f"SoftMoE.capacity_factor=inf; {_CF}"),
    ("MoE flax", "Soft MoE capacity_factor a string", _flax(SoftMoE, capacity_factor="1"),
     f"SoftMoE.capacity_factor='1'; {_CF}"),
    ("MoE flax", "Soft MoE capacity_factor NaN", _flax(SoftMoE, capacity_factor=_NAN),
     f"SoftMoE.capacity_factor=nan; {_CF}"),
    ("MoE flax", "Soft MoE capacity_factor NaN beside num_slots", _flax(SoftMoE, capacity_factor=_NAN, num_slots=2),
     f"SoftMoE.capacity_factor=nan; {_CF}"),
    ("MoE flax", "Top-1 capacity_factor inf", _flax(Top1MoE, capacity_factor=_INF),
     f"Top1MoE.capacity_factor=inf; {_CF}"),
    ("MoE flax", "Top-1 capacity_factor a string", _flax(Top1MoE, capacity_factor="2"),
     f"Top1MoE.capacity_factor='2'; {_CF}"),
    ("MoE flax", "Top-1 capacity_factor 0", _flax(Top1MoE, capacity_factor=0.0), f"Top1MoE.capacity_factor=0.0; {_CF}"),
    ("MoE haiku", "Soft MoE capacity_factor inf", _haiku("SoftMoE", capacity_factor=_INF),
     f"SoftMoE.capacity_factor=inf; {_CF}"),
    ("MoE haiku", "Top-1 capacity_factor a string", _haiku("Top1MoE", capacity_factor="1"),
     f"Top1MoE.capacity_factor='1'; {_CF}"),
    ("MoE haiku", "Top-1 capacity_factor < 0", _haiku("Top1MoE", capacity_factor=-0.5),
     f"Top1MoE.capacity_factor=-0.5; {_CF}"),
    # num_experts / expert_hidden: 0, negative, not an int
    ("MoE flax", "Soft MoE num_experts 0", _flax(SoftMoE, num_experts=0), "SoftMoE.num_experts=0; must be an int >= 1"),
    ("MoE flax", "Soft MoE num_experts 2.5", _flax(SoftMoE, num_experts=2.5),
     "SoftMoE.num_experts=2.5; must be an int"),
    ("MoE flax", "Top-1 num_experts -2", _flax(Top1MoE, num_experts=-2), "Top1MoE.num_experts=-2; must be an int >= 1"),
    ("MoE flax", "expert_hidden 0", _flax(SoftMoE, expert_hidden=0),
     "SoftMoE.expert_hidden=0; must be an int >= 1 (width of each expert MLP)"),
    ("MoE flax", "expert_hidden True", _flax(Top1MoE, expert_hidden=True),
     "Top1MoE.expert_hidden=True; must be an int"),
    ("MoE haiku", "Soft MoE num_experts 2.5", _haiku("SoftMoE", num_experts=2.5), "SoftMoE.num_experts=2.5; must be"),
    ("MoE haiku", "Top-1 expert_hidden True", _haiku("Top1MoE", expert_hidden=True), "Top1MoE.expert_hidden=True"),
    ("MoE flax", "no tokens", lambda: jax.eval_shape(SoftMoE(2, 4).init, KEY, jnp.zeros((2, 0, 6))),
     "SoftMoE tokens have shape (2, 0, 6); need [batch, tokens, dim] with tokens, dim >= 1"),
    # the pure functions
    ("MoE pure", "num_slots: capacity_factor inf", lambda: num_slots(10, 4, _INF), f"capacity_factor=inf; {_CF}"),
    ("MoE pure", "num_slots: capacity_factor a string", lambda: num_slots(10, 4, "1"), f"capacity_factor='1'; {_CF}"),
    ("MoE pure", "num_slots: num_experts True", lambda: num_slots(10, True), "num_experts=True; must be an int >= 1"),
    ("MoE pure", "num_slots: num_experts 2.5", lambda: num_slots(10, 2.5), "num_experts=2.5; must be an int >= 1"),
    ("MoE pure", "capacity: capacity_factor inf", lambda: capacity(10, 4, _INF), f"capacity_factor=inf; {_CF}"),
    ("MoE pure", "capacity: capacity_factor NaN", lambda: capacity(10, 4, _NAN), f"capacity_factor=nan; {_CF}"),
    ("MoE pure", "capacity: no tokens", lambda: capacity(0, 4), "num_tokens=0; must be an int >= 1"),
    ("MoE pure", "init_soft_moe: slots 2.5", lambda: init_soft_moe(KEY, 6, 2, 2.5, 4), "slots_per_expert=2.5"),
    ("MoE pure", "init_top1_moe: num_experts 2.0", lambda: init_top1_moe(KEY, 6, 2.0, 4), "num_experts=2.0"),
    ("MoE pure", "init_experts: hidden_dim True", lambda: init_experts(KEY, 2, 6, True), "expert hidden_dim=True"),
    ("MoE pure", "top1_moe: capacity_factor inf", _top1(capacity_factor=_INF), f"capacity_factor=inf; {_CF}"),
    ("MoE pure", "top1_moe: capacity_factor a string", _top1(capacity_factor="1"), f"capacity_factor='1'; {_CF}"),
    ("MoE pure", "top1_moe: no tokens", _top1(jnp.zeros((2, 0, 6))),
     "top1_moe tokens have shape (2, 0, 6); need [batch, tokens, dim] with tokens, dim >= 1"),
    ("MoE pure", "soft_moe: no tokens", _soft(jnp.zeros((2, 0, 6))), "soft_moe tokens have shape (2, 0, 6)"),
    ("MoE pure", "soft_moe: experts with hidden width 0", _soft(h=0),
     "expert w1 has shape (2, 6, 0); need >= 1 expert and hidden width >= 1"),
    # the implementation switch; single_exponential exists only in the CPU kernel
    ("MoE pure", "soft_moe: unknown impl", _soft(options={"impl": "gpu"}),
     "impl='gpu'; choose one of ('auto', 'cpu_kernel', 'einsum')"),
    ("MoE pure", "soft_moe: single_exponential without the kernel", _soft(options={"single_exponential": True}),
     "single_exponential=True with impl='auto': single_exponential is an option of the CPU kernel; "
     "set impl='cpu_kernel'"),
    ("MoE flax", "Soft MoE impl 'kernel'", _flax(SoftMoE, impl="kernel"), "SoftMoE.impl='kernel'; choose one of"),
    ("MoE flax", "Soft MoE single_exponential 'yes'", _flax(SoftMoE, single_exponential="yes", impl="cpu_kernel"),
     "SoftMoE.single_exponential='yes'; must be True or False"),
    ("MoE haiku", "Soft MoE single_exponential with the einsum", _haiku("SoftMoE", single_exponential=True, impl="einsum"),
     "SoftMoE.single_exponential=True with SoftMoE.impl='einsum'"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)


def test_num_slots_none_and_one_still_build():
  """None still means "from capacity_factor" and 1 is the smallest explicit slot count."""
  phi = lambda **kw: _flax(SoftMoE, **kw)()["params"]["router"]["phi"].shape
  assert phi(num_slots=None) == (6, 2, 5) and phi(num_slots=1) == (6, 2, 1)
  assert num_slots(10, 4, 1e-9) == 1 and capacity(10, 3, 2) == 7  # an int factor is a number too
