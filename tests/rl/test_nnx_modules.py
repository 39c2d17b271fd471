"""The NNX Q-network and its parts against the linen modules: parameter tree, outputs, noise, training.

Run op by op, both call the same functions on the same arrays: bit-equal by construction
(tests/support/nnx_training.py). Noise: the two draw their keys differently (linen from ``apply``'s
"noise" RNG and the layer's scope, NNX from its stream), so the noisy tests give the NNX layers
the keys the linen layers drew, recorded at ``jaxlab.rl.rainbow_layers.noisy_dense``, which both call.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxlab.errors import InputError
from jaxlab.rl import ImpalaEncoder, QNetwork, RainbowHead, networks, rainbow_layers
from jaxlab.rl import nnx as rl_nnx
from jaxlab.rl.networks_encoders import MinAtarEncoder, NatureEncoder
from jaxlab.rl.rainbow_layers import NoisyDense
from tests.support.nnx_training import linen_params, load, mean_square, train_both

MINATAR = (10, 10, 4)
NOISE_INIT = {"params": jax.random.key(1), "noise": jax.random.key(2)}
CONFIGS = [
    dict(num_actions=3, num_experts=4, expert_hidden=16),
    dict(num_actions=3, num_experts=2, expert_hidden=8, normalize=True, moe_impl="einsum", diagnostics=True),
    dict(num_actions=3, head="dense", width=16, width_multiplier=2, diagnostics=True),
    dict(num_actions=3, head="top1", num_experts=4, expert_hidden=8, tokenizer="per_feat"),
    dict(num_actions=3, head="none"),
    dict(num_actions=3, head="token_dense", width=8, diagnostics=True),
    dict(num_actions=3, head="token_mlp", expert_hidden=8, tokenizer="per_patch", embedding_size=8),
    dict(num_actions=3, num_experts=2, expert_hidden=8, tokenizer="flatten"),
    dict(num_actions=3, num_experts=2, expert_hidden=8, num_atoms=5, dueling=True, noisy=True, deterministic=True),
    dict(num_actions=3, head="dense", width=8, num_atoms=5, dueling=False),
]


def _obs(shape=MINATAR, n=2, key=0):
  return jax.random.bernoulli(jax.random.key(key), 0.3, (n, *shape))


@pytest.mark.parametrize("settings", CONFIGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items() if k != "num_actions"))
def test_nnx_qnetwork_equals_linen(settings):
  obs = _obs()
  linen = QNetwork(**settings)
  variables = {"params": linen_params(linen, obs)}
  model = load(lambda: rl_nnx.QNetwork(MINATAR, **settings, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(obs), linen.apply(variables, obs))


@pytest.mark.parametrize("obs_shape, settings", [
    ((6,), dict(num_actions=2, num_experts=2, expert_hidden=8, embedding_size=4, mlp_features=(16, 8))),
    ((6,), dict(num_actions=2, head="dense", width=8, mlp_features=(16,))),
    ((20, 20, 4), dict(num_actions=2, encoder="nature", head="dense", width=8)),
    ((8, 8, 3), dict(num_actions=2, encoder="impala", num_experts=2, expert_hidden=8)),
])
def test_nnx_qnetwork_encoders_equal_linen(obs_shape, settings):
  obs = jax.random.randint(jax.random.key(2), (2, *obs_shape), 0, 256).astype(jnp.uint8)
  if len(obs_shape) == 1:
    obs = jax.random.normal(jax.random.key(2), (2, *obs_shape))
  linen = QNetwork(**settings)
  variables = {"params": linen_params(linen, obs)}
  model = load(lambda: rl_nnx.QNetwork(obs_shape, **settings, rngs=nnx.Rngs(0)), variables["params"])
  chex.assert_trees_all_equal(model(obs), linen.apply(variables, obs))


def test_xla_convolutions_equal_linen():
  """conv="xla" is ``nn.Conv`` in linen and ``nnx.Conv`` in NNX (flax's own pair)."""
  frames = jax.random.randint(jax.random.key(2), (2, 12, 12, 3), 0, 256).astype(jnp.uint8)
  pairs = ((NatureEncoder(conv="xla"), lambda: rl_nnx.NatureEncoder(3, conv="xla", rngs=nnx.Rngs(0))),
           (MinAtarEncoder(conv="xla"), lambda: rl_nnx.MinAtarEncoder(3, conv="xla", rngs=nnx.Rngs(0))),
           (ImpalaEncoder(conv="xla"), lambda: rl_nnx.ImpalaEncoder(3, conv="xla", rngs=nnx.Rngs(0))))
  for linen, model in pairs:
    variables = {"params": linen_params(linen, frames)}
    chex.assert_trees_all_equal(load(model, variables["params"])(frames), linen.apply(variables, frames))


class _Keys:
  """Records the keys of ``noisy_dense`` calls, or replays recorded ones in call order."""

  def __init__(self, monkeypatch):
    self.keys, self.replay = [], None
    original = rainbow_layers.noisy_dense

    def noisy_dense(params, x, key, *args):
      if self.replay is not None:
        key = self.replay.pop(0)
      else:
        self.keys.append(key)
      return original(params, x, key, *args)
    monkeypatch.setattr(rainbow_layers, "noisy_dense", noisy_dense)


def test_nnx_noisy_layers_equal_linen_given_its_keys(monkeypatch):
  keys = _Keys(monkeypatch)
  x = jax.random.normal(jax.random.key(0), (3, 8))
  layer = NoisyDense(5)
  variables = {"params": linen_params(layer, x, rngs=NOISE_INIT)}
  keys.keys.clear()
  expected = layer.apply(variables, x, rngs={"noise": jax.random.key(3)})
  model = rl_nnx.NoisyDense(8, 5, rngs=nnx.Rngs(0)).load_linen_params(variables["params"])
  np.testing.assert_array_equal(model(x, rngs=keys.keys[0]), expected)   # the key as the call's rngs
  assert not np.array_equal(model(x), expected)   # its own stream: other noise

  obs = _obs()
  settings = dict(num_actions=3, num_experts=2, expert_hidden=8, num_atoms=5, dueling=True, noisy=True)
  linen = QNetwork(**settings)
  variables = {"params": linen_params(linen, obs, rngs=NOISE_INIT)}
  keys.keys.clear()
  expected = linen.apply(variables, obs, rngs={"noise": jax.random.key(4)})
  assert len(keys.keys) == 2   # advantage, then value
  model = load(lambda: rl_nnx.QNetwork(MINATAR, **settings, rngs=nnx.Rngs(0)), variables["params"])
  keys.replay = list(keys.keys)
  chex.assert_trees_all_equal(model(obs, rngs=nnx.Rngs(noise=0)), expected)   # built abstractly: noise from the call
  assert keys.replay == []
  keys.replay = None
  np.testing.assert_array_equal(model(obs, deterministic=True)[0],
                                linen.clone(deterministic=True).apply(variables, obs)[0])


class _Draws:
  """Records the keys of ``factorised_noise`` draws (every noisy layer's and the noisy experts'), or replays them."""

  def __init__(self, monkeypatch):
    self.keys, self.replay = [], None
    original = rainbow_layers.factorised_noise

    def factorised_noise(key, p, q):
      if self.replay is not None:
        key = self.replay.pop(0)
      else:
        self.keys.append(key)
      return original(key, p, q)
    monkeypatch.setattr(rainbow_layers, "factorised_noise", factorised_noise)
    monkeypatch.setattr(networks, "factorised_noise", factorised_noise)  # the linen head imported the name


# Dopamine's fidelity options, as the der / full_rainbow presets set them (jaxlab.rl.QNetwork's docstring)
FIDELITY = [
    dict(num_actions=3, head="dense", width=8, num_atoms=5, dueling=True, noisy=True, noisy_hidden=True),
    dict(num_actions=3, head="dense", width=8, noisy_hidden=True, noise_per_row=True),
    dict(num_actions=3, num_experts=2, expert_hidden=8, num_atoms=5, dueling=True, noisy=True, noisy_experts=True,
         noise_per_row=True),
    dict(num_actions=3, num_experts=2, expert_hidden=8, noisy_experts=True, tokenizer="flatten"),
]


@pytest.mark.parametrize("settings", FIDELITY, ids=lambda s: "-".join(k for k, v in s.items() if v is True))
def test_nnx_fidelity_noise_options_equal_linen_given_its_draws(monkeypatch, settings):
  draws = _Draws(monkeypatch)
  obs = _obs()
  linen = QNetwork(**settings)
  variables = {"params": linen_params(linen, obs, rngs=NOISE_INIT)}
  draws.keys.clear()
  expected = linen.apply(variables, obs, rngs={"noise": jax.random.key(4)})
  assert draws.keys   # the settings draw noise
  model = load(lambda: rl_nnx.QNetwork(MINATAR, **settings, rngs=nnx.Rngs(0)), variables["params"])
  assert sorted(model.linen_params()) == sorted(variables["params"])
  draws.replay = list(draws.keys)
  chex.assert_trees_all_equal(model(obs, rngs=nnx.Rngs(noise=0)), expected)
  assert draws.replay == []
  draws.replay = None
  means = dict(deterministic=True, expert_means=True)
  np.testing.assert_array_equal(model(obs, deterministic=True)[0] if not settings.get("noisy_experts") else
                                load(lambda: rl_nnx.QNetwork(MINATAR, **settings, **means, rngs=nnx.Rngs(0)),
                                     variables["params"])(obs)[0],
                                linen.clone(**means).apply(variables, obs)[0])


def test_nnx_noisy_experts_draw_whatever_deterministic_says_as_linen():
  """Dopamine's eval_mode never reaches the experts: deterministic leaves them noisy, expert_means does not."""
  settings = dict(num_actions=3, num_experts=2, expert_hidden=8, noisy_experts=True)
  model = rl_nnx.QNetwork(MINATAR, **settings, rngs=nnx.Rngs(0))
  obs = _obs()
  assert not np.array_equal(model(obs, deterministic=True)[0], model(obs, deterministic=True)[0])
  means = rl_nnx.QNetwork(MINATAR, **settings, expert_means=True, rngs=nnx.Rngs(params=0))
  np.testing.assert_array_equal(means(obs)[0], means(obs)[0])


def test_nnx_noise_is_fresh_per_call_and_fixed_by_the_calls_rngs():
  head = rl_nnx.RainbowHead(8, 3, 5, rngs=nnx.Rngs(0))
  x = jnp.ones((2, 8))
  assert not np.array_equal(head(x), head(x))
  np.testing.assert_array_equal(head(x, rngs=nnx.Rngs(noise=1)), head(x, rngs=nnx.Rngs(noise=1)))
  np.testing.assert_array_equal(head(x, deterministic=True), head(x, deterministic=True))
  chex.assert_trees_all_equal_shapes_and_dtypes(head.linen_params(), linen_params(RainbowHead(3, 5), x, rngs=NOISE_INIT))


def test_nnx_qnetwork_trains_with_momo_adam_as_linen():
  obs = _obs()
  settings = dict(num_actions=3, num_experts=2, expert_hidden=8)
  linen = QNetwork(**settings)
  params = linen_params(linen, obs)
  model = load(lambda: rl_nnx.QNetwork(MINATAR, **settings, rngs=nnx.Rngs(0)), params)
  # per step and parameter: the forward chain (the 36-term conv, the Soft MoE's d + m + 2np + d + h =
  # 16 + 100 + 200 + 16 + 8, the 1600-term Q head: ~2000 roundings), the backward as long, the optimizer
  train_both(lambda p, o: linen.apply({"params": p}, o), params, model, mean_square, (obs,), ops_per_step=4000,
             steps=3)


def test_every_linen_setting_has_an_nnx_counterpart():
  """A field added to the linen QNetwork and not to the NNX one fails here (and is refused when set)."""
  fields = {f.name for f in dataclasses.fields(QNetwork)} - {"parent", "name"}
  assert fields == set(rl_nnx.QNETWORK_SETTINGS) | set(rl_nnx.QNETWORK_LINEN_ONLY)
  for name, value in (("position_embedding", "learned"), ("pooling", "gap"), ("router_diagnostics", True)):
    assert name in rl_nnx.QNETWORK_LINEN_ONLY
    with pytest.raises(InputError, match=f"QNetwork.{name}={value!r} has no NNX counterpart; use the linen module"):
      rl_nnx.QNetwork(MINATAR, num_actions=3, **{name: value}, rngs=nnx.Rngs(0))


def test_bad_nnx_settings_are_one_line():
  with pytest.raises(InputError, match="QNetwork.head='moe'; choose one of"):
    rl_nnx.QNetwork(MINATAR, num_actions=3, head="moe", rngs=nnx.Rngs(0))
  with pytest.raises(InputError, match="QNetwork obs_shape=\\(10, 10\\); must be"):
    rl_nnx.QNetwork((10, 10), num_actions=3, rngs=nnx.Rngs(0))
  model = nnx.eval_shape(lambda: rl_nnx.QNetwork(MINATAR, num_actions=3, num_experts=2, expert_hidden=8, rngs=nnx.Rngs(0)))
  with pytest.raises(InputError, match="this QNetwork was built for"):
    model(jnp.zeros((2, 8, 8, 4)))
