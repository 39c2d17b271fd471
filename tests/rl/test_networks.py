"""Q-networks: every encoder/head/tokenizer builds from plain kwargs; parameter counts; checks."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.networks import QNetwork, count_params, param_count
from jaxlab.rl.networks_tokens import per_conv, per_feat
from tests.support.export import ACCELERATORS, export_for
from tests.support.tolerances import assert_close_to_scale, ops_rtol

_MINATAR = (10, 10, 4)


@pytest.mark.parametrize("kwargs", [
    dict(head="dense"), dict(head="dense", width_multiplier=2),
    dict(head="softmoe", tokenizer="per_conv"), dict(head="softmoe", tokenizer="per_feat"),
    dict(head="softmoe", tokenizer="per_patch", patch_size=(2, 2), embedding_size=8),
    dict(head="top1", tokenizer="per_conv"), dict(head="softmoe", normalize=True),
], ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_minatar_networks_give_q_values_and_stats(kwargs):
  net = QNetwork(num_actions=6, encoder="minatar", num_experts=4, expert_hidden=32, width=64,
                 **kwargs)
  obs = jax.random.bernoulli(jax.random.key(0), 0.2, (3, *_MINATAR))
  variables = net.init(jax.random.key(1), obs)
  q, stats = jax.jit(net.apply)(variables, obs)
  chex.assert_shape(q, (3, 6))
  chex.assert_tree_all_finite(q)
  if kwargs["head"] == "dense":
    assert stats == {}
  else:
    chex.assert_shape(stats["expert_load"], (4,))
  grads = jax.jit(jax.grad(lambda v: jnp.sum(net.apply(v, obs)[0])))(variables)
  assert all(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(grads["params"]))


def test_nature_encoder_gives_121_tokens_of_64():
  net = QNetwork(num_actions=4, encoder="nature", head="softmoe", num_experts=2, expert_hidden=8)
  frames = jnp.zeros((1, 84, 84, 4), jnp.uint8)
  params = jax.eval_shape(net.init, jax.random.key(0), frames)["params"]
  chex.assert_shape(params["SoftMoE_0"]["router"]["phi"], (64, 2, 61))  # ceil(121 / 2)
  chex.assert_shape(params["Dense_0"]["kernel"], (121 * 64, 4))


def test_tokenizers_reshape_as_documented():
  f = jnp.arange(2 * 3 * 4 * 5.0).reshape(2, 3, 4, 5)
  chex.assert_shape(per_conv(f), (2, 12, 5))
  chex.assert_shape(per_feat(f), (2, 5, 12))
  chex.assert_trees_all_equal(per_feat(f)[0, 1], f[0, :, :, 1].reshape(-1))


def test_minatar_parameter_counts():
  """Counts for MinAtar 10x10x4, 6 actions (encoder 592, Q head on flattened tokens)."""
  count = lambda **kw: param_count(_MINATAR, num_actions=6, encoder="minatar", **kw)
  assert count(head="dense") == 592 + (1600 * 512 + 512) + (512 * 6 + 6)
  experts = lambda n, h=512: n * (16 * h + h + h * 16 + 16)
  for n in (1, 2, 4, 8):
    p = -(-100 // n)
    assert count(head="softmoe", num_experts=n) == 592 + 16 * n * p + experts(n) + 1600 * 6 + 6
  assert count(head="top1", num_experts=8) == 592 + 16 * 8 + experts(8) + 1600 * 6 + 6
  assert count(head="dense", width_multiplier=8) == 592 + (1600 * 4096 + 4096) + 4096 * 6 + 6
  assert count_params({"a": jnp.zeros((2, 3)), "b": [jnp.zeros(4)]}) == 10


@pytest.mark.parametrize("kwargs, match", [
    (dict(head="moe"), "head='moe'; choose one of"),
    (dict(tokenizer="per_pixel"), "tokenizer='per_pixel'; choose one of"),
    (dict(encoder="resnet"), "encoder='resnet'; choose one of"),
    (dict(num_experts=0), "num_experts=0"),
    (dict(head="dense", width_multiplier=0), "width_multiplier=0"),
])
def test_bad_network_kwargs_raise_input_errors(kwargs, match):
  net = QNetwork(num_actions=6, **kwargs)
  with pytest.raises(InputError, match=match):
    net.init(jax.random.key(0), jnp.zeros((1, *_MINATAR)))


def test_unbatched_observation_is_rejected():
  with pytest.raises(InputError, match=r"need \[batch, H, W, C\]"):
    QNetwork(num_actions=6).init(jax.random.key(0), jnp.zeros(_MINATAR))


def test_patch_conv_equals_xla_conv_in_values_and_gradients():
  from jaxlab.rl.networks_encoders import MinAtarEncoder
  obs = jax.random.bernoulli(jax.random.key(1), 0.3, (4, 10, 10, 6))
  patches, xla = MinAtarEncoder(conv="patches"), MinAtarEncoder(conv="xla")
  params = xla.init(jax.random.key(0), obs)
  chex.assert_trees_all_equal_shapes(params, patches.init(jax.random.key(0), obs))
  loss = lambda m: lambda p: jnp.sum(m.apply(p, obs) ** 2)
  # One 3x3x6 = 54-term convolution by two kernels (a patch matmul, XLA's conv), the ReLU after:
  # outputs within 2 x the 54-term dot bound at their scale; the gradient sums that over 4 x 100
  # positions as well.
  assert_close_to_scale(patches.apply(params, obs), xla.apply(params, obs), 2 * ops_rtol(54))
  assert_close_to_scale(jax.grad(loss(patches))(params), jax.grad(loss(xla))(params), 4 * ops_rtol(54 + 400))


def test_auto_conv_is_the_patch_matmul_on_cpu_and_xla_conv_elsewhere():
  """``conv="auto"`` (default) picks when lowering: no convolution op in the CPU module (one
  patch concatenation instead), XLA's convolution and no patches in the cuda/tpu module."""
  from jaxlab.rl.networks_encoders import MinAtarEncoder
  obs = jnp.zeros((2, 10, 10, 4), jnp.float32)
  encoder = MinAtarEncoder()
  params = encoder.init(jax.random.key(0), obs)
  grad = jax.grad(lambda p, obs: jnp.sum(encoder.apply(p, obs) ** 2))
  cpu, accelerators = (export_for(grad, params, obs, platforms=p).mlir_module() for p in (("cpu",), ACCELERATORS))
  assert "stablehlo.convolution" not in cpu and "stablehlo.concatenate" in cpu
  assert "stablehlo.convolution" in accelerators and "stablehlo.concatenate" not in accelerators


def test_head_none_is_conv_then_q():
  obs = jnp.zeros((2, 10, 10, 4), bool)
  net = QNetwork(num_actions=3, head="none")
  params = net.init(jax.random.key(0), obs)
  q, stats = net.apply(params, obs)
  chex.assert_shape(q, (2, 3))
  assert stats == {}
  assert count_params(params["params"]) == (9 * 4 * 16 + 16) + (1600 * 3 + 3)


# --- Atari: the Nature CNN and the tokenisations of its 11x11x64 output -----------------------------

_ATARI = (84, 84, 4)


def test_nature_encoder_gives_11x11x64_and_the_papers_token_shapes():
  from jaxlab.rl.networks_encoders import NatureEncoder
  from jaxlab.rl.networks_tokens import PerPatch
  frames = jnp.zeros((2, *_ATARI), jnp.uint8)
  features, _ = jax.eval_shape(lambda f: NatureEncoder().init_with_output(jax.random.key(0), f), frames)
  assert features.shape == (2, 11, 11, 64)  # SAME padding: 84 -> 21 -> 11 -> 11 (VALID would give 7x7)
  chex.assert_shape(per_conv(jnp.zeros(features.shape)), (2, 121, 64))   # PerConv: 121 tokens of 64
  chex.assert_shape(per_feat(jnp.zeros(features.shape)), (2, 64, 121))   # PerFeat: 64 tokens of 121
  patches, _ = jax.eval_shape(lambda f: PerPatch(64, (3, 3)).init_with_output(jax.random.key(0), f),
                              jnp.zeros(features.shape))
  chex.assert_shape(patches, (2, 9, 64))                                   # PerPatch 3x3: 9 tokens of 64
  # The same Soft-MoE head on each: slots per expert ceil(m / n), router phi [d, n, slots]
  for tokenizer, phi in (("per_conv", (64, 8, 16)), ("per_feat", (121, 8, 8)), ("per_patch", (64, 8, 2))):
    net = QNetwork(num_actions=6, encoder="nature", head="softmoe", tokenizer=tokenizer, num_experts=8,
                   expert_hidden=32)
    params = jax.eval_shape(net.init, jax.random.key(0), frames)["params"]
    chex.assert_shape(params["SoftMoE_0"]["router"]["phi"], phi)


def test_nature_dense_network_has_dopamines_parameter_count():
  """Dopamine's NatureDQNNetwork (flax, SAME padding): 3 convs, Dense(512) on 11*11*64, Q head."""
  convs = (8 * 8 * 4 * 32 + 32) + (4 * 4 * 32 * 64 + 64) + (3 * 3 * 64 * 64 + 64)
  expected = convs + (7744 * 512 + 512) + (512 * 6 + 6)
  assert param_count(_ATARI, num_actions=6, encoder="nature", head="dense") == expected == 4_046_502


def test_nature_patch_convs_equal_xla_convs_in_values_and_gradients():
  from jaxlab.rl.networks_encoders import NatureEncoder
  frames = jax.random.randint(jax.random.key(1), (1, *_ATARI), 0, 256).astype(jnp.uint8)
  patches, xla = NatureEncoder(conv="patches"), NatureEncoder(conv="xla")
  shapes = jax.eval_shape(xla.init, jax.random.key(0), frames)
  chex.assert_trees_all_equal_shapes(shapes, jax.eval_shape(patches.init, jax.random.key(0), frames))
  rng = np.random.default_rng(0)  # numpy draws: no init program to compile
  params = jax.tree.map(lambda s: jnp.asarray(rng.normal(0, 0.05, s.shape), jnp.float32), shapes)
  value_and_grad = lambda m: jax.jit(jax.value_and_grad(lambda p: jnp.sum(m.apply(p, frames) ** 2)))
  (_, g_patches), (_, g_xla) = value_and_grad(patches)(params), value_and_grad(xla)(params)
  # Three convolutions of 256, 512 and 576 terms each, computed by two kernels (a matmul over
  # space-to-depth patches, XLA's conv); the gradient also sums over the 21 x 21 positions.
  n = 256 + 512 + 576
  assert_close_to_scale(jax.jit(patches.apply)(params, frames), jax.jit(xla.apply)(params, frames), 2 * ops_rtol(n))
  assert_close_to_scale(g_patches, g_xla, 4 * ops_rtol(n + 441))
