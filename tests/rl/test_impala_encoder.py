"""The IMPALA encoder against Dopamine's definition (jax/networks.py ``Stack`` / ``ImpalaEncoder``)."""

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.rl.impala_encoder import ImpalaEncoder
from jaxlab.rl.networks import QNetwork, count_params
from tests.support.export import ACCELERATORS, export_for
from tests.support.tolerances import assert_close_to_scale, ops_rtol

_ATARI = (84, 84, 4)


class _DopamineStack(nn.Module):
  """Dopamine's ``Stack``, written out from its definition (nn.Conv / nn.max_pool only)."""

  num_ch: int

  @nn.compact
  def __call__(self, x):
    x = nn.Conv(self.num_ch, (3, 3), strides=1, padding="SAME", kernel_init=nn.initializers.xavier_uniform())(x)
    x = nn.max_pool(x, window_shape=(3, 3), padding="SAME", strides=(2, 2))
    for _ in range(2):
      block_input = x
      x = nn.Conv(self.num_ch, (3, 3), strides=1, padding="SAME")(nn.relu(x))
      x = nn.Conv(self.num_ch, (3, 3), strides=1, padding="SAME")(nn.relu(x))
      x = x + block_input
    return x


class _DopamineImpala(nn.Module):
  @nn.compact
  def __call__(self, x):
    x = x.astype(jnp.float32) / 255.0  # preprocess_atari_inputs
    for size in (16, 32, 32):
      x = _DopamineStack(size)(x)
    return nn.relu(x)


def _frames(n=2, key=1, shape=_ATARI):
  return jax.random.randint(jax.random.key(key), (n, *shape), 0, 256).astype(jnp.uint8)


def _as_ours(dopamine_params):
  """Dopamine's tree (``_DopamineStack_i``) under our names (``Stack_i``): same leaves."""
  return {"params": {k.replace("_DopamineStack", "Stack"): v for k, v in dopamine_params["params"].items()}}


def test_xla_conv_impala_is_dopamines_network_exactly():
  frames = _frames()
  reference = _DopamineImpala()
  params = reference.init(jax.random.key(0), frames)
  ours = ImpalaEncoder(conv="xla")
  chex.assert_trees_all_equal_shapes(_as_ours(params), ours.init(jax.random.key(0), frames))
  features = ours.apply(_as_ours(params), frames)
  assert features.shape == (2, 11, 11, 32)  # 84 -> 42 -> 21 -> 11 (SAME pooling), 121 tokens of 32
  np.testing.assert_array_equal(features, reference.apply(params, frames))


def test_impala_parameter_count_and_nn_scale():
  per_stack = lambda c_in, c: (9 * c_in * c + c) + 4 * (9 * c * c + c)
  frames = jnp.zeros((1, *_ATARI), jnp.uint8)
  shapes = jax.eval_shape(ImpalaEncoder().init, jax.random.key(0), frames)
  assert count_params(shapes) == per_stack(4, 16) + per_stack(16, 32) + per_stack(32, 32) == 97_744
  wide, _ = jax.eval_shape(lambda f: ImpalaEncoder(nn_scale=2).init_with_output(jax.random.key(0), f), frames)
  assert wide.shape == (1, 11, 11, 64)


def test_impala_initialisation_is_dopamines_per_layer():
  """The stack's first conv is Glorot-uniform (bounded by sqrt(6 / (fan_in + fan_out))); the
  residual convs keep flax's LeCun-normal: std sqrt(1 / fan_in), a normal truncated at 2 of its
  own std, which is std / 0.8796 (variance_scaling's correction for the truncation)."""
  params = ImpalaEncoder().init(jax.random.key(0), jnp.zeros((1, *_ATARI), jnp.uint8))["params"]
  first = np.asarray(params["Stack_1"]["Conv_0"]["kernel"])          # 3x3x16 -> 32
  bound = np.sqrt(6 / (9 * 16 + 9 * 32))
  assert np.abs(first).max() <= bound and np.abs(first).max() > 0.9 * bound
  residual = np.asarray(params["Stack_1"]["Conv_3"]["kernel"])       # 3x3x32 -> 32
  std = np.sqrt(1 / (9 * 32))
  assert 0.9 * 2 * std / 0.8796 < np.abs(residual).max() <= 2 * std / 0.87962566 * 1.0001
  np.testing.assert_allclose(residual.std(), std, rtol=0.1)
  assert all(np.all(params[s][c]["bias"] == 0) for s in params for c in params[s])


def test_patch_convs_equal_xla_convs_in_values_and_gradients():
  # A smaller encoder than Atari's (the same layer code, a quicker compile): 2 stacks of 1 block.
  frames = _frames(n=1, shape=(20, 20, 4))
  small = dict(stack_sizes=(8, 16), num_blocks=1)
  patches, xla = ImpalaEncoder(conv="patches", **small), ImpalaEncoder(conv="xla", **small)
  shapes = jax.eval_shape(xla.init, jax.random.key(0), frames)
  chex.assert_trees_all_equal_shapes(shapes, jax.eval_shape(patches.init, jax.random.key(0), frames))
  rng = np.random.default_rng(0)  # numpy draws: no init program to compile
  params = jax.tree.map(lambda s: jnp.asarray(rng.normal(0, 0.1, s.shape), jnp.float32), shapes)

  @jax.jit
  def features_and_grads(params):  # both modules in one program: one compile
    def one(module):
      features, vjp = jax.vjp(lambda p: module.apply(p, frames), params)
      return features, vjp(2 * features)[0]  # the gradient of sum(features ** 2)
    return one(patches), one(xla)

  (f_patches, g_patches), (f_xla, g_xla) = features_and_grads(params)
  # 6 convolutions of at most 3*3*16 = 144 terms in sequence (residual sums keep the scale);
  # the gradient also sums over the 20 x 20 positions of the first stack.
  n = 6 * 144
  assert_close_to_scale(f_patches, f_xla, 2 * ops_rtol(n))
  assert_close_to_scale(g_patches, g_xla, 4 * ops_rtol(n + 20 * 20))


def test_auto_conv_is_the_patch_matmul_on_cpu_and_xla_conv_elsewhere():
  frames = jnp.zeros((1, 16, 16, 4), jnp.uint8)
  encoder = ImpalaEncoder()
  params = encoder.init(jax.random.key(0), frames)
  forward = lambda p, f: encoder.apply(p, f)
  cpu, accelerators = (export_for(forward, params, frames, platforms=p).mlir_module()
                       for p in (("cpu",), ACCELERATORS))
  assert "stablehlo.convolution" not in cpu
  assert "stablehlo.convolution" in accelerators


@pytest.mark.parametrize("kwargs, match", [
    ({"conv": "fft"}, r"ImpalaEncoder.conv='fft'; choose one of"),
    ({"nn_scale": 0}, r"ImpalaEncoder.nn_scale=0; must be an int >= 1"),
])
def test_bad_settings_are_one_line(kwargs, match):
  with pytest.raises(InputError, match=match):
    ImpalaEncoder(**kwargs).init(jax.random.key(0), jnp.zeros((1, 16, 16, 4), jnp.uint8))


def test_qnetwork_with_the_impala_encoder_gives_121_tokens_of_32_to_its_soft_moe_head():
  net = QNetwork(num_actions=6, encoder="impala", head="softmoe", num_experts=4, expert_hidden=16)
  params = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((2, *_ATARI), jnp.uint8))["params"]
  chex.assert_shape(params["SoftMoE_0"]["router"]["phi"], (32, 4, 31))  # d=32, ceil(121 / 4) slots
  assert "Stack_2" in params["ImpalaEncoder_0"]
