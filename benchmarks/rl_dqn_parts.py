"""Shared pieces of the two RL benchmarks: the dense MinAtar Q-network and one DQN TD update.

Kept next to the benchmarks (not in jaxlab.rl, where the networks live) so that the speed
figures do not depend on code that is still changing. Hyper-parameters: Dopamine's JAX DQN
(dopamine/jax/agents/dqn/dqn_agent.py: MSE TD loss, Adam, max_a Q_target(s', a) target), see
docs/methods/soft_moe_rl.md, "Performance: the jitted DQN on XLA:CPU", for the table.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

GAMMA = 0.99
LEARNING_RATE = 6.25e-5  # dopamine/labs/moes/configs/dqn.gin (the MinAtar gin files use 2.5e-4)
ADAM_EPS = 1.5e-4        # dopamine/labs/moes/configs/dqn.gin (MinAtar gin: 3.125e-4)
BATCH_SIZE = 32
UPDATE_PERIOD = 4
TARGET_UPDATE_PERIOD = 1000  # dopamine MinAtar dqn_*.gin, in agent (= env) steps


class MinAtarQNetwork(nn.Module):
  """conv 16@3x3 (SAME) -> ReLU -> flatten -> Dense(hidden) -> ReLU -> Dense(num_actions).

  ``hidden=None`` drops the hidden layer, which gives Dopamine's ``MinatarDQNNetwork``; 128 is
  the network of the MinAtar paper (Young & Tian, 2019) and of CleanRL-style baselines.
  """
  num_actions: int
  hidden: int | None = 128
  patch_conv: bool = False  # True: PatchConv3x3 (same params, fast inside lax.scan on CPU)

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    init = nn.initializers.xavier_uniform()
    x = obs.astype(jnp.float32)  # replay stores bool observations
    conv = (PatchConv3x3(16, kernel_init=init, name="Conv_0") if self.patch_conv
            else nn.Conv(16, (3, 3), kernel_init=init, name="Conv_0"))
    x = nn.relu(conv(x))
    x = x.reshape(x.shape[0], -1)
    if self.hidden:
      x = nn.relu(nn.Dense(self.hidden, kernel_init=init)(x))
    return nn.Dense(self.num_actions, kernel_init=init)(x)


class SoftMoEProxyQNetwork(nn.Module):
  """A *timing proxy* of a Soft-MoE value net for MinAtar (not jaxlab's implementation).

  Shaped like Dopamine's NatureDQNMoE with PER_PIXEL tokens (dopamine/labs/moes/architectures):
  conv 16@3x3 -> 100 tokens of 16 -> Soft MoE (Puigcerver et al., 2024) with ``num_experts``
  experts of ceil(100 / num_experts) slots, each expert Dense(hidden) -> ReLU -> Dense(16) ->
  flatten -> Dense(num_actions). Used only to check that the MoE einsums hit no slow path inside
  lax.scan on XLA:CPU.

  Notation: b batch, m tokens, d token dim, n experts, p slots per expert, h expert hidden.
  """
  num_actions: int
  num_experts: int = 8
  expert_hidden: int = 128
  patch_conv: bool = True

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    init = nn.initializers.xavier_uniform()
    x = obs.astype(jnp.float32)
    conv = (PatchConv3x3(16, kernel_init=init, name="Conv_0") if self.patch_conv
            else nn.Conv(16, (3, 3), kernel_init=init, name="Conv_0"))
    x = nn.relu(conv(x))
    tokens = x.reshape(x.shape[0], -1, x.shape[-1])  # [b, m, d]
    m, d, n = tokens.shape[1], tokens.shape[2], self.num_experts
    p = -(-m // n)
    phi = self.param("phi", nn.initializers.lecun_normal(), (d, n, p))
    logits = jnp.einsum("bmd,dnp->bmnp", tokens, phi)
    dispatch = jax.nn.softmax(logits, axis=1)
    combine = jax.nn.softmax(logits.reshape(*logits.shape[:2], n * p), axis=-1).reshape(
        logits.shape)
    slots = jnp.einsum("bmd,bmnp->bnpd", tokens, dispatch)
    w1 = self.param("w1", init, (n, d, self.expert_hidden))
    b1 = self.param("b1", nn.initializers.zeros, (n, self.expert_hidden))
    w2 = self.param("w2", init, (n, self.expert_hidden, d))
    b2 = self.param("b2", nn.initializers.zeros, (n, d))
    h = nn.relu(jnp.einsum("bnpd,ndh->bnph", slots, w1) + b1[:, None])
    y = jnp.einsum("bnph,nhd->bnpd", h, w2) + b2[:, None]
    out = jnp.einsum("bnpd,bmnp->bmd", y, combine)
    return nn.Dense(self.num_actions, kernel_init=init)(out.reshape(out.shape[0], -1))


class Batch(NamedTuple):
  obs: jax.Array       # bool [B, 10, 10, C]
  action: jax.Array    # int32 [B]
  reward: jax.Array    # float32 [B]
  discount: jax.Array  # float32 [B], 0 at terminal transitions
  next_obs: jax.Array  # bool [B, 10, 10, C]


class Learner(NamedTuple):
  params: Any
  target_params: Any
  opt_state: Any


def make_optimizer() -> optax.GradientTransformation:
  return optax.adam(LEARNING_RATE, eps=ADAM_EPS)


def init_learner(net: nn.Module, obs_shape, rng: jax.Array) -> Learner:
  params = net.init(rng, jnp.zeros((1, *obs_shape), jnp.bool_))
  # Separate buffers for target and online params: a jitted step can donate both.
  target = jax.tree.map(jnp.copy, params)
  return Learner(params, target, make_optimizer().init(params))


def td_loss(net: nn.Module, params, target_params, batch: Batch) -> jax.Array:
  """DQN TD loss (Mnih et al., 2015), MSE as Dopamine's JAX DQN default."""
  q_next = net.apply(target_params, batch.next_obs).max(-1)
  target = jax.lax.stop_gradient(batch.reward + GAMMA * batch.discount * q_next)
  q = jnp.take_along_axis(net.apply(params, batch.obs), batch.action[:, None], -1)[:, 0]
  return jnp.mean((q - target) ** 2)


def td_update(net: nn.Module, learner: Learner, batch: Batch) -> tuple[Learner, jax.Array]:
  """One Adam step on the TD loss; the target network is left to the caller."""
  loss, grads = jax.value_and_grad(td_loss, argnums=1)(net, learner.params,
                                                       learner.target_params, batch)
  updates, opt_state = make_optimizer().update(grads, learner.opt_state, learner.params)
  return Learner(optax.apply_updates(learner.params, updates), learner.target_params,
                 opt_state), loss


def random_batch(obs_shape, num_actions: int, rng: jax.Array, batch_size: int = BATCH_SIZE
                 ) -> Batch:
  ko, ka, kr, kd, kn = jax.random.split(rng, 5)
  return Batch(obs=jax.random.bernoulli(ko, 0.1, (batch_size, *obs_shape)),
               action=jax.random.randint(ka, (batch_size,), 0, num_actions),
               reward=jax.random.bernoulli(kr, 0.1, (batch_size,)).astype(jnp.float32),
               discount=jnp.where(jax.random.bernoulli(kd, 0.02, (batch_size,)), 0.0, 1.0),
               next_obs=jax.random.bernoulli(kn, 0.1, (batch_size, *obs_shape)))


class PatchConv3x3(nn.Module):
  """3x3 SAME conv as patches @ kernel (im2col): same params/output as ``nn.Conv(F, (3, 3))``.

  XLA:CPU leaves the kernel-gradient convolution inside a while loop (lax.scan) in a
  non-canonical layout that runs on its slow generic emitter; as a matmul it does not.
  """
  features: int
  kernel_init: Any = nn.initializers.lecun_normal()

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    c = x.shape[-1]
    kernel = self.param("kernel", self.kernel_init, (3, 3, c, self.features))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    h, w = x.shape[-3:-1]
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)])
    patches = jnp.concatenate(
        [xp[..., i:i + h, j:j + w, :] for i in range(3) for j in range(3)], axis=-1)
    return patches @ kernel.reshape(9 * c, self.features) + bias


# --- A fully jitted DQN iteration: `steps_per_update` env steps (+ replay adds), then one update.

EPSILON_TRAIN = 0.01
EPSILON_DECAY_PERIOD = 250_000  # Dopamine JaxDQNAgent default, in agent steps
MIN_REPLAY_HISTORY = 1000       # dopamine MinAtar dqn_*.gin
REPLAY_CAPACITY = 100_000       # dopamine MinAtar dqn_*.gin


class Carry(NamedTuple):
  learner: Learner
  env_state: Any      # jaxlab.rl.envs.VecEnvState
  obs: jax.Array      # bool [N, 10, 10, C]: current observations
  replay: Any         # jaxlab.rl.replay.ReplayState
  rng: jax.Array
  env_steps: jax.Array  # int32: agent steps taken (per env)


def epsilon(env_steps: jax.Array, xnp=jnp) -> jax.Array:
  """Dopamine's linearly_decaying_epsilon: 1 for MIN_REPLAY_HISTORY steps, then linear decay."""
  steps_left = EPSILON_DECAY_PERIOD + MIN_REPLAY_HISTORY - env_steps
  bonus = xnp.clip((1.0 - EPSILON_TRAIN) * steps_left / EPSILON_DECAY_PERIOD, 0.0,
                   1.0 - EPSILON_TRAIN)
  return EPSILON_TRAIN + bonus


def epsilon_greedy(net: nn.Module, params, obs: jax.Array, eps: jax.Array, rng: jax.Array,
                   num_actions: int) -> jax.Array:
  k_explore, k_random = jax.random.split(rng)
  greedy = jnp.argmax(net.apply(params, obs), axis=-1).astype(jnp.int32)
  random = jax.random.randint(k_random, greedy.shape, 0, num_actions, jnp.int32)
  return jnp.where(jax.random.uniform(k_explore, greedy.shape) < eps, random, greedy)


def init_carry(net, env, replay, num_envs: int, rng: jax.Array) -> Carry:
  from jaxlab.rl.replay import TimeStep  # benchmarks import jaxlab lazily
  k_net, k_env, rng = jax.random.split(rng, 3)
  learner = init_learner(net, env.obs_shape, k_net)
  env_state, obs = env.reset(k_env, num_envs)
  example = TimeStep(obs[0], jnp.int32(0), jnp.float32(0), jnp.float32(1))
  return Carry(learner, env_state, obs, replay.init(example), rng, jnp.int32(0))


def env_step(net, env, replay, carry: Carry, eps: jax.Array | None = None) -> Carry:
  """One epsilon-greedy step of all N envs and the replay add."""
  from jaxlab.rl.replay import TimeStep
  k_act, k_env, rng = jax.random.split(carry.rng, 3)
  eps = epsilon(carry.env_steps) if eps is None else eps
  action = epsilon_greedy(net, carry.learner.params, carry.obs, eps, k_act, env.num_actions)
  env_state, obs, reward, _, info = env.step(carry.env_state, action, k_env)
  rb = replay.add(carry.replay, TimeStep(carry.obs, action, reward, info["discount"]))
  return carry._replace(env_state=env_state, obs=obs, replay=rb, rng=rng,
                        env_steps=carry.env_steps + 1)


def collect_and_update(net, env, replay, carry: Carry, steps_per_update: int
                       ) -> tuple[Carry, jax.Array]:
  """``steps_per_update`` env steps, then sample + one TD update.

  The env steps run in an inner ``lax.scan`` (one step per loop body): unrolled (Python loop or
  ``unroll>1``), XLA:CPU's fusion emitters fuse consecutive steps into fusions whose run time
  explodes with the number of steps and envs (docs/methods/soft_moe_rl.md, "Performance: the
jitted DQN on XLA:CPU").
  """
  carry = jax.lax.scan(lambda c, _: (env_step(net, env, replay, c), None), carry, None,
                       length=steps_per_update)[0]
  k_sample, rng = jax.random.split(carry.rng)
  batch = replay.sample(carry.replay, k_sample)
  learner, loss = td_update(net, carry.learner, Batch(*batch))
  return carry._replace(learner=learner, rng=rng), loss


def sync_target(carry: Carry) -> Carry:
  """Target <- online. Call between scan chunks (chunk env steps = TARGET_UPDATE_PERIOD)."""
  l = carry.learner
  return carry._replace(learner=l._replace(target_params=jax.tree.map(jnp.copy, l.params)))
