"""DQN with (Soft-)MoE value networks on MinAtar or any gymnax environment, fully on the device,
through the shared step.

Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024. Each
train step is one DQN update: the step's ``collect`` acts in ``env.num_envs`` gymnax environments
(epsilon-greedy with the online network) until ``dqn.update_period`` environment frames (all
environments together) have passed, writes the transitions to a flashbax replay buffer and samples
a batch; the loss is the TD loss against the target network in ``TrainState.extra``, synced by
``update_extra``. The update-to-data ratio is thus 1 / ``update_period`` updates per frame
whatever ``num_envs`` is (Dopamine: one update every ``update_period = 4`` agent steps,
dopamine/jax/agents/dqn/dqn_agent.py:565, ``num_updates_per_train_step = 1``); a ``num_envs``
that cannot hold it (does not divide ``update_period``) is refused. Environments, the buffer and
episode statistics live in ``TrainState.data_state``, so a checkpoint holds everything and a
killed run resumes bit-identically. The buffer starts with ``min_replay_history`` frames of
uniformly random actions (Dopamine acts with epsilon = 1 and does not train until then).

Routing statistics of a MoE head (``moe/...``: dispatch and combine entropies, expert loads) are
those of the acting forward passes, i.e. of the observations the agent acts on, averaged over the
logged steps; the TD loss does not recompute them over its replay batch (on XLA:CPU that cost ~18%
of a Soft-MoE update; docs/methods/soft_moe_rl.md, "Profile of one jitted call"). A Top-1 head's auxiliary
losses are logged from the loss, which uses them.
With ``network.diagnostics`` the loss also logs ``diag/...`` (dormant-neuron fractions, feature rank;
:mod:`jaxlab.rl.diagnostics`) of the online network on its replay batch, as the papers measure them.
With ``network.router_diagnostics`` (:mod:`jaxlab.rl.diagnostics`): ``moe/combine_spread`` from the
acting passes, ``q_spread_states`` / ``q_spread_actions`` from the loss's online pass, and, from the
optimizer state before each update, ``router/grad_rms``, ``router/grad_rms_over_eps`` and
``router/step_fraction`` (and ``adam/...`` over all parameters): Adam's second moments against
``optimizer.eps``.

``env.name`` is a MinAtar game (Dopamine's conventions), any gymnax id ("CartPole-v1", ...) or an
environment registered in ``jaxlab.rl.envs.ENVS`` (e.g. by a config file): see
:func:`jaxlab.rl.make_env`. Vector observations get an MLP torso and per-feature tokens, images
the conv encoder and per-position tokens (``network.encoder`` / ``network.tokenizer`` "auto").

Rainbow's options of the same agent (Hessel et al. 2018, as Dopamine's ``JaxFullRainbowAgent``;
all off by default, where the agent is the DQN above): ``network.num_atoms`` > 1 (C51 on
``[dqn.vmin, dqn.vmax]``: the loss is :func:`~jaxlab.rl.c51_loss`, acting argmaxes the expected
values), ``dqn.update_horizon`` n > 1 (n-step returns from runs of n + 1 replay slots,
:func:`~jaxlab.rl.n_step_transitions`), ``network.dueling`` and ``network.noisy`` (a noise key per
acting step and, in the loss, one for the online pass and another for the target's; evaluation and
the inference functions use the noisy layers' means, Dopamine's ``eval_mode``). With noisy nets
Dopamine acts with ``zero_epsilon`` (full_rainbow_agent.py:52-55, 335 @ 5873f54); this task keeps the
configured schedule (``dqn_atari`` has ``dqn.epsilon_schedule='zero'`` for it).
``dqn.replay_scheme='prioritized'``: prioritised replay as Dopamine's Rainbow (Schaul et al. 2016;
:mod:`jaxlab.rl.priorities`): batches drawn in proportion to priorities, the TD loss weighted by
:func:`~jaxlab.rl.priorities.importance_weights`, and after each update the task's
``update_data`` sets the drawn transitions' priorities from their per-sample TD losses (the
cross-entropy under C51); a row an n-step truncation cut gets priority ~0.

Bad input: every ``env.*`` / ``dqn.*`` key the task reads is checked when the task is built, before
anything is initialised or compiled, each failure one line naming the key. Actions are produced
in range by construction; were one not (a bug), the environment step would report a NaN reward
and the TD loss a NaN, which the trainer's non-finite guard skips and counts
(``nonfinite_skipped``).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections

from jaxlab import errors
from jaxlab.errors import InputError, check
from jaxlab.rl import dqn
from jaxlab.rl.agent_loss import AgentNetwork, make_loss_fn, priority_update
from jaxlab.tasks.dqn_config import (MAX_FRAMES, c51_support_from_config, check_count, check_dqn_settings,
                                    q_network_from_config, router_metrics_from_config)
from jaxlab.rl.envs import make_env
from jaxlab.rl.episode_returns import RETURN_WINDOW, push_returns, recent_return
from jaxlab.rl.play import make_play, q_value_fns
from jaxlab.rl.replay import TimeStep, make_replay
from jaxlab.train.context import TaskContext
from jaxlab.train.precision import cast_floats, compute_dtype, float_dtype
from jaxlab.train.task import TASKS, Inference, Task



class DataState(NamedTuple):
  env: Any               # VecEnvState of num_envs environments
  obs: jax.Array         # [num_envs, *obs_shape]: the observations to act on (bool for MinAtar)
  replay: Any            # flashbax buffer state
  returns: jax.Array     # float32 [RETURN_WINDOW]: a ring of completed-episode returns
  episodes: jax.Array    # int32 []: completed episodes so far


def _check_config(config: ml_collections.ConfigDict) -> None:
  """Every env / dqn key the task reads, one clear line each, before anything is built.

  Relations that need the environment or the replay layout are checked in :func:`dqn_minatar`.
  """
  e, d = config.env, config.dqn
  p = e.sticky_action_prob
  check(p is None or (errors.is_real(p) and 0.0 <= p < 1.0),
        f"env.sticky_action_prob={p!r}; must be a number in [0, 1) (MinAtar: 0.1) or None (the environment's "
        "convention: 0.1 in MinAtar, else 0)")
  limit = e.get("max_episode_steps")
  check(limit is None or (errors.is_int(limit) and 1 <= limit <= 2**30),
        f"env.max_episode_steps={limit!r}; must be None (the environment's own limit; none in MinAtar) or an int "
        "in [1, 2**30]")
  errors.check_int(e.num_envs, "env.num_envs", 1)
  check(errors.is_int(d.update_period) and d.update_period >= 1,
        f"dqn.update_period={d.update_period!r} environment frames per update; must be an int >= 1 "
        "(the update-to-data ratio 1/update_period must be > 0; Dopamine: 4)")
  check_dqn_settings(d, "frames", "epsilon_decay_frames", d.get("clip_rewards", False), config.network)
  errors.check_int(d.eval_steps, "dqn.eval_steps", 0,
                   "steps each evaluation environment may take to finish its episode; 0 = no evaluation")
  check_count("dqn.eval_steps", d.eval_steps, 0)
  if d.eval_steps:
    check_count("dqn.eval_envs", d.eval_envs, 1)
    errors.check_probability(d.eval_epsilon, "dqn.eval_epsilon", "the exploration rate of evaluation")


def _sample_apart(replay: Any, state: Any, rng: jax.Array, gamma: float) -> Any:
  """``replay.sample_transitions(state, rng, gamma)`` behind a ``lax.cond`` that is always true once the buffer is filled.

  With one environment step per update (``env.num_envs == dqn.update_period``) XLA removes the
  collect loop (trip count 1), fuses the replay write into the sample's gather, and copy insertion
  then copies the whole observation buffer twice per update (40 MB at capacity 100k; 3x the
  program's time on XLA:CPU; docs/methods/soft_moe_rl.md, "Profile of one jitted call"). A
  conditional is a fusion boundary, so the write stays in place. The batch is the same: the true
  branch is the plain sample; the false one (zeros) never runs after the warm-up, and under
  vmapped seeds both run and a select over the 32-row batch (not the buffer) picks the sample.
  """
  sample = lambda: replay.sample_transitions(state, rng, gamma)  # noqa: E731
  zeros = lambda: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(sample))  # noqa: E731
  return jax.lax.cond(replay.can_sample(state), sample, zeros)


@TASKS.register("dqn_minatar")
def dqn_minatar(config: ml_collections.ConfigDict, ctx: TaskContext) -> Task:
  """The task of ``configs/dqn_minatar.py`` (see there for every key), with its
  :class:`~jaxlab.train.task.Inference` (the same network and environment).

  Inference functions, each ``fn(params, ...)``: ``q_values(params, obs [N, *obs_shape])``
  (``[N, actions]``), ``greedy_policy(params, obs)`` (``int32 [N]`` actions, argmax Q) and
  ``play(params, rng, num_envs=dqn.eval_envs, max_steps=dqn.eval_steps, epsilon=0.0)``: each of
  ``num_envs`` fresh environments plays one episode, epsilon-greedy (0: greedy), as the task's
  evaluation does (which is ``play`` with ``epsilon=dqn.eval_epsilon``). ``data``: ``env``
  (``reset(rng, n)``, ``step(state, actions, rng)``), ``num_actions``, ``obs_shape``.
  """
  del ctx  # the environments live in the train state: nothing depends on the mesh or the runs
  _check_config(config)
  e, d = config.env, config.dqn
  env = make_env(e.name, sticky_action_prob=e.sticky_action_prob, max_episode_steps=e.get("max_episode_steps"),
                 where=" (env.name)")
  n_envs = e.num_envs
  if d.update_period % n_envs:
    divisors = [k for k in range(1, d.update_period + 1) if d.update_period % k == 0]
    raise InputError(f"env.num_envs={n_envs} does not divide dqn.update_period={d.update_period} (environment "
                     f"frames per update, all environments together: the ratio 1/{d.update_period} updates per "
                     f"frame must not depend on num_envs); allowed env.num_envs: {divisors}")
  frames_per_step = d.update_period
  env_steps_per_update = d.update_period // n_envs
  if d.target_update_period % frames_per_step:
    raise InputError(f"dqn.target_update_period={d.target_update_period} frames must be a multiple of the "
                     f"{frames_per_step} frames of one update (dqn.update_period)")
  clip_rewards = d.get("clip_rewards", False)
  n_eval, eval_cap = d.eval_envs, d.eval_steps
  if eval_cap and env.episode_length is not None and eval_cap < env.episode_length:
    raise InputError(f"dqn.eval_steps={eval_cap} is shorter than one {e.name} episode ({env.episode_length} "
                     f"steps); allowed: 0 (no evaluation) or >= {env.episode_length}")
  horizon = d.get("update_horizon", 1)
  limit = env.time_limit
  if horizon > 1 and limit is not None and limit <= horizon:
    where = "env.max_episode_steps" if e.get("max_episode_steps") is not None else f"{e.name}'s own time limit"
    raise InputError(f"dqn.update_horizon={horizon} with {where}={limit}: every episode is truncated within "
                     f"{horizon} steps, so every {horizon}-step return that does not end in a terminal is cut and "
                     f"leaves the loss (it would train on 0); lower dqn.update_horizon below {limit} or raise "
                     "env.max_episode_steps")
  prioritized = d.get("replay_scheme", "uniform") == "prioritized"
  replay = make_replay(d.replay_capacity, n_envs, config.batch_size, min_size=d.min_replay_history,
                       names={"capacity": "dqn.replay_capacity", "num_envs": "env.num_envs",
                              "min_size": "dqn.min_replay_history", "horizon": "dqn.update_horizon"},
                       horizon=horizon, prioritized=prioritized)
  # + horizon: the last slots have no n-step successor yet
  prefill_steps = math.ceil(d.min_replay_history / n_envs) + horizon
  prefill_frames = prefill_steps * n_envs
  num_steps = config.get("num_steps")
  if isinstance(num_steps, int) and prefill_frames + num_steps * frames_per_step > MAX_FRAMES:
    raise InputError(f"num_steps={num_steps} updates x dqn.update_period={frames_per_step} frames (+{prefill_frames} "
                     "of random play) exceed 2**31 - 1, the int32 frame counter; lower num_steps")
  net, aux_weights = q_network_from_config(config.network, env.num_actions, rainbow=True, diagnostics=True,
                                           router_diagnostics=True)
  # Adam's second moments of the router (and of all parameters) against eps, before each update
  router_metrics = router_metrics_from_config(config) if net.router_diagnostics else None
  check(not net.deterministic, "network.deterministic=True; the task sets it itself (evaluation and inference "
        "use the noisy layers' means, training samples noise): leave it False")
  support = c51_support_from_config(config.network, d)  # None: scalar Q-values
  obs_shape = env.obs_shape
  if tuple(config.get("obs_shape", obs_shape)) != tuple(obs_shape):
    raise InputError(f"obs_shape={tuple(config.obs_shape)} does not match {e.name}'s observations {obs_shape}")
  # The network computes in its params' dtype: bfloat16 in the loss (online and target params, cast by
  # the step) and in acting (cast below) under compute_dtype=bfloat16, float32 in evaluation.
  agent = AgentNetwork(net, support, prepare=lambda params, obs: obs.astype(float_dtype(params)))
  q_values = agent.q_values
  acting_dtype = compute_dtype(config)

  def init_params(rng):
    return agent.init(rng, jnp.zeros((1, *obs_shape), jnp.float32))  # the same params, no noise

  def env_step(data: DataState, params: Any, epsilon: jax.Array, rng: jax.Array) -> tuple[DataState, dict]:
    """One step of every environment; also the acting forward pass's routing statistics."""
    k_act, k_env = jax.random.split(rng)
    stats = {}
    if params is None:  # warm-up: uniformly random actions
      actions = jax.random.randint(k_act, (n_envs,), 0, env.num_actions).astype(jnp.int32)
    else:
      q, stats, k_act = agent.acting_q_values(params, data.obs, k_act)  # noisy: a fresh sample per step
      stats = {k: v.astype(jnp.float32) for k, v in stats.items() if k not in dqn.AUX_LOSSES}
      actions = dqn.epsilon_greedy(q, k_act, epsilon)
    env_state, obs, reward, done, info = env.step(data.env, actions, k_env)
    if clip_rewards:  # Dopamine's Runner clips the reward the agent learns from, not the return it reports
      reward = jnp.clip(reward, -1.0, 1.0)
    done_flag = done if horizon > 1 else None  # n-step rows must tell truncations (replay.n_step_transitions)
    replay_state = replay.add(data.replay, TimeStep(data.obs, actions, reward, info["discount"], done_flag))
    returns, episodes = push_returns(data.returns, data.episodes, done, env_state.stats.last_return)
    return DataState(env_state, obs, replay_state, returns, episodes), stats

  def init_data(params, rng):
    del params
    k_reset, k_fill = jax.random.split(rng)
    env_state, obs = env.reset(k_reset, n_envs)
    example = TimeStep(obs[0], jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32),
                       jnp.zeros((), jnp.bool_) if horizon > 1 else None)
    data = DataState(env_state, obs, replay.init(example), jnp.zeros((RETURN_WINDOW,), jnp.float32),
                     jnp.zeros((), jnp.int32))
    data, _ = jax.lax.scan(lambda dt, k: (env_step(dt, None, jnp.ones(()), k)[0], None), data,
                           jax.random.split(k_fill, prefill_steps))
    return data

  def epsilon_at(step):
    frame = prefill_frames + step * frames_per_step
    return dqn.linear_epsilon(frame, d.epsilon_decay_frames, prefill_frames, d.epsilon_end)

  def collect(state, rng):
    epsilon = epsilon_at(state.step)
    k_act, k_sample = jax.random.split(rng)
    params = cast_floats(state.params, acting_dtype)
    data, stats = jax.lax.scan(lambda dt, k: env_step(dt, params, epsilon, k), state.data_state,
                               jax.random.split(k_act, env_steps_per_update))
    if env_steps_per_update == 1:
      batch = _sample_apart(replay, data.replay, k_sample, d.gamma)
    else:
      batch = replay.sample_transitions(data.replay, k_sample, d.gamma)
    metrics = {"epsilon": epsilon, "episode_return": recent_return(data.returns, data.episodes),
               "episodes": data.episodes, "frames": prefill_frames + (state.step + 1) * frames_per_step,
               **dqn.routing_metrics(jax.tree.map(lambda x: jnp.mean(x, axis=0), stats))}
    if net.router_diagnostics:
      metrics.update(router_metrics(state.opt_state))
    return state.replace(data_state=data), batch, metrics

  loss_fn = make_loss_fn(agent, gamma=d.gamma, horizon=horizon, double_dqn=d.double_dqn, loss=d.loss,
                         aux_weights=aux_weights, log_routing=False, per_sample=prioritized)

  # play's defaults: the evaluation's, or Dopamine's episode cap and 8 environments without one
  play_envs, play_cap = (n_eval, eval_cap) if eval_cap else (8, 27_000)

  greedy_q = lambda params, obs: q_values(params, obs)[0]  # noqa: E731 - the Q-values without the stats
  play = make_play(env, greedy_q, num_envs=play_envs, max_steps=play_cap, max_frames=MAX_FRAMES)

  def evaluate(state, rng):
    """``play`` with the config's ``dqn.eval_envs``, ``dqn.eval_steps`` and ``dqn.eval_epsilon``."""
    return play(state.params, rng, n_eval, eval_cap, d.eval_epsilon)

  fns = {name: jax.jit(fn) for name, fn in q_value_fns(greedy_q).items()}
  fns["play"] = jax.jit(play, static_argnames=("num_envs", "max_steps"))
  inference = Inference(model=net, fns=fns, data={"env": env, "num_actions": env.num_actions,
                                                  "obs_shape": tuple(obs_shape)})
  return Task(init_params=init_params, loss_fn=loss_fn, collect=collect, init_data=init_data,
              evaluate=evaluate if eval_cap > 0 else None,
              init_extra=lambda params: jax.tree.map(jnp.copy, params),
              update_extra=dqn.periodic_sync(d.target_update_period // frames_per_step),
              update_data=priority_update(replay) if prioritized else None,
              throughput={"frames": frames_per_step},
              description=f"DQN {e.name}, {config.network.head} head",
              # evaluation only, and the Soft MoE implementation (the same function on any platform)
              resume_safe=("dqn.eval_envs", "dqn.eval_steps", "dqn.eval_epsilon", "network.moe_impl"),
              inference=inference)
