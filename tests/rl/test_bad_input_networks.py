"""Bad sizes and settings of the DQN's Q-networks (dense / Soft-MoE / Top-1 heads, tokenizers, encoders).

Each case ends in ONE line naming ``QNetwork.<attribute>`` (the dqn_minatar task passes its
``network`` config as these keyword arguments, so that is the key ``network.<attribute>``). The
settings are static, so the checks run when ``init`` is traced (``jax.eval_shape`` here), before
anything compiles. Collected with the other sweeps by ``python tests/test_bad_input_sweep.py``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from jaxlab.rl.networks import QNetwork  # noqa: E402
from jaxlab.rl.networks_encoders import MinAtarEncoder  # noqa: E402
from jaxlab.rl.networks_tokens import PerPatch  # noqa: E402
from tests.support.bad_input import assert_one_clear_line  # noqa: E402

Case = tuple[str, str, Callable[[], Any], str]
KEY = jax.random.key(0)
OBS = jnp.zeros((1, 10, 10, 4))  # a MinAtar observation


def _q(obs: jax.Array = OBS, **kw: Any) -> Callable[[], Any]:
  kw = {"num_actions": 3, **kw}
  return lambda: jax.eval_shape(QNetwork(**kw).init, KEY, obs)


def _patch(**kw: Any) -> Callable[[], Any]:
  return _q(head="softmoe", tokenizer="per_patch", **kw)


_CF = "must be a finite number > 0"
CASES: list[Case] = [
    # the per-patch tokenizer: embedding_size 0 and patch sides 0 divided by zero in the conv init
    ("Q-network", "per_patch embedding_size 0", _patch(embedding_size=0),
     "QNetwork.embedding_size=0; must be an int >= 1 (width of each per-patch token)"),
    ("Q-network", "per_patch embedding_size 2.5", _patch(embedding_size=2.5), "QNetwork.embedding_size=2.5; must be"),
    ("Q-network", "per_patch patch_size side 0", _patch(patch_size=(0, 3)),
     "QNetwork.patch_size=(0, 3); must be (height, width), two ints >= 1"),
    ("Q-network", "per_patch patch_size an int", _patch(patch_size=3),
     "QNetwork.patch_size=3; must be (height, width)"),
    ("Q-network", "per_patch patch_size 3 sides", _patch(patch_size=(3, 3, 3)),
     "QNetwork.patch_size=(3, 3, 3); must be"),
    ("Q-network", "per_patch patch_size 2.5", _patch(patch_size=(2.5, 2)), "QNetwork.patch_size=(2.5, 2); must be"),
    ("Q-network", "per_patch patch larger than the observation", _patch(patch_size=(11, 3)),
     "PerPatch.patch_size=(11, 3) is larger than the encoder's feature map (10, 10)"),
    ("Q-network", "bad per_patch setting under another tokenizer", _q(embedding_size=0),
     "QNetwork.embedding_size=0; must be an int >= 1"),
    # hidden widths
    ("Q-network", "dense width 0", _q(head="dense", width=0), "QNetwork.width=0; must be an int >= 1"),
    ("Q-network", "dense width True", _q(head="dense", width=True), "QNetwork.width=True; must be an int >= 1"),
    ("Q-network", "dense width_multiplier 2.5", _q(head="dense", width_multiplier=2.5),
     "QNetwork.width_multiplier=2.5; must be an int >= 1"),
    ("Q-network", "expert_hidden 0", _q(expert_hidden=0),
     "QNetwork.expert_hidden=0; must be an int >= 1 (width of each expert MLP)"),
    ("Q-network", "num_actions 0", _q(num_actions=0), "QNetwork.num_actions=0; must be an int >= 1"),
    ("Q-network", "num_actions 2.5", _q(num_actions=2.5), "QNetwork.num_actions=2.5; must be an int >= 1"),
    # experts and capacity
    ("Q-network", "Soft-MoE num_experts 0", _q(num_experts=0), "QNetwork.num_experts=0; must be an int >= 1"),
    ("Q-network", "Top-1 num_experts -1", _q(head="top1", num_experts=-1), "QNetwork.num_experts=-1; must be an int"),
    ("Q-network", "num_experts 2.5", _q(num_experts=2.5), "QNetwork.num_experts=2.5; must be an int >= 1"),
    ("Q-network", "capacity_factor inf", _q(capacity_factor=float("inf")), f"QNetwork.capacity_factor=inf; {_CF}"),
    ("Q-network", "Top-1 capacity_factor a string", _q(head="top1", capacity_factor="1"),
     f"QNetwork.capacity_factor='1'; {_CF}"),
    ("Q-network", "capacity_factor NaN", _q(capacity_factor=float("nan")), f"QNetwork.capacity_factor=nan; {_CF}"),
    ("Q-network", "normalize not a bool", _q(normalize="false"), "QNetwork.normalize='false'; must be True or False"),
    ("Q-network", "unknown Soft-MoE implementation", _q(moe_impl="xla"),
     "QNetwork.moe_impl='xla'; choose one of ('auto', 'cpu_kernel', 'einsum')"),
    ("Q-network", "single_exponential without the CPU kernel", _q(single_exponential=True),
     "QNetwork.single_exponential=True with QNetwork.moe_impl='auto'"),
    ("Q-network", "NaN auxiliary weight", _q(head="top1", importance_weight=float("nan")),
     "QNetwork.importance_weight=nan; must be a finite number >= 0"),
    ("Q-network", "empty observation", _q(obs=jnp.zeros((1, 0, 10, 4))),
     "observations have shape (1, 0, 10, 4); need [batch, H, W, C] with H, W, C >= 1"),
    ("Q-network", "check_config without an observation", lambda: QNetwork(3, num_experts=0).check_config(),
     "QNetwork.num_experts=0"),
    # the router options
    ("Q-network", "unknown position embedding", _q(position_embedding="sincos"),
     "QNetwork.position_embedding='sincos'; choose one of ('none', 'learned')"),
    ("Q-network", "unknown pooling", _q(pooling="max"), "QNetwork.pooling='max'; choose one of ('flatten', 'gap')"),
    ("Q-network", "router_diagnostics not a bool", _q(router_diagnostics="yes"),
     "QNetwork.router_diagnostics='yes'; must be True or False"),
    ("Q-network", "global average pooling of vector features", _q(obs=jnp.zeros((1, 5)), head="dense", pooling="gap"),
     "QNetwork.pooling='gap' with head='dense' needs image features to average over"),
    # the modules on their own
    ("Q-network", "PerPatch embedding_size 0",
     lambda: jax.eval_shape(PerPatch(embedding_size=0).init, KEY, jnp.zeros((1, 10, 10, 16))),
     "PerPatch.embedding_size=0; must be an int >= 1"),
    ("Q-network", "MinAtarEncoder features 0", lambda: jax.eval_shape(MinAtarEncoder(features=0).init, KEY, OBS),
     "MinAtarEncoder.features=0; must be an int >= 1"),
]


@pytest.mark.parametrize("area,what,call,fragment", CASES, ids=[f"{a}: {w}" for a, w, _, _ in CASES])
def test_bad_input_is_one_clear_line(area, what, call, fragment):
  assert_one_clear_line(area, what, call, fragment)


def test_smallest_valid_patch_settings_still_build():
  """A 1x1 patch of width 1 and a patch as large as the observation build."""
  params = _patch(embedding_size=1, patch_size=(1, 1))()["params"]
  assert params["PerPatch_0"]["embedding"]["kernel"].shape == (1, 1, 16, 1)
  assert _patch(patch_size=[10, 10])()["params"]["PerPatch_0"]["embedding"]["kernel"].shape == (10, 10, 16, 64)
