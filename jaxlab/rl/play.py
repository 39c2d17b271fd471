"""A trained Q-network playing: greedy actions, and one whole episode in each of a batch of environments.

:func:`first_episodes` is the evaluation loop both DQN tasks share: every environment plays until
its first episode ends (or a step cap), and the metrics average the finished episodes' returns,
one per environment, so short episodes are not over-weighted. :func:`make_play` runs it on gymnax
environments (MinAtar and the rest of :func:`~jaxlab.rl.make_env`); the Atari pool's version is
:func:`jaxlab.rl.atari_play.make_play`. :func:`q_value_fns` are the pure inference functions of a
Q-network (``q_values``, ``greedy_policy``) that ``jaxlab.load_run`` binds to trained params.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxlab import errors
from jaxlab.rl import dqn

#: ``(params, obs) -> q-values [N, actions]`` (a noisy network at its means).
QValues = Callable[[Any, jax.Array], jax.Array]
#: ``(state, t) -> (state, done [N], return [N])``: one step of every environment; ``return`` is each
#: environment's episode return, read where ``done``.
EpisodeStep = Callable[[Any, jax.Array], tuple[Any, jax.Array, jax.Array]]


def first_episodes(step: EpisodeStep, state: Any, num_envs: int, max_steps: int | jax.Array) -> dict[str, jax.Array]:
  """Steps ``num_envs`` environments until each has ended its first episode or ``max_steps`` steps have passed.

  Pure and jit-able (a ``lax.while_loop``). An environment's later episodes are never scored.

  Args:
    step: one step of every environment, ``(state, t) -> (state, done [N], episode return [N])``.
    state: the environments' state after their reset (anything ``step`` carries).
    num_envs: ``N``.
    max_steps: the cap on steps.

  Returns:
    ``eval_return``: mean return of the finished episodes (NaN if none finished); ``eval_episodes``:
    how many finished; ``eval_capped``: 1 if the cap cut an episode short (its partial return is not
    counted), else 0; ``eval_steps_run``: steps taken.

  Examples:
    >>> import jax.numpy as jnp
    >>> from jaxlab.rl.play import first_episodes
    >>> step = lambda s, t: (s, t + 1 >= jnp.array([1, 3]), jnp.array([2.0, 4.0]))  # episodes of 1 and 3 steps
    >>> {k: float(v) for k, v in first_episodes(step, (), 2, 10).items()}
    {'eval_return': 3.0, 'eval_episodes': 2.0, 'eval_capped': 0.0, 'eval_steps_run': 3.0}
  """
  def unfinished(carry):
    t, _, finished, _ = carry
    return (t < max_steps) & ~jnp.all(finished)

  def body(carry):
    t, state, finished, returns = carry
    state, done, episode_return = step(state, t)
    returns = jnp.where(done & ~finished, episode_return, returns)  # the first episode only
    return t + 1, state, finished | done, returns

  init = (jnp.zeros((), jnp.int32), state, jnp.zeros((num_envs,), jnp.bool_), jnp.zeros((num_envs,), jnp.float32))
  steps, _, finished, returns = jax.lax.while_loop(unfinished, body, init)
  count = jnp.sum(finished, dtype=jnp.int32)
  mean = jnp.sum(jnp.where(finished, returns, 0.0)) / jnp.maximum(count, 1)
  return {"eval_return": jnp.where(count > 0, mean, jnp.nan), "eval_episodes": count,
          "eval_capped": (count < num_envs).astype(jnp.int32), "eval_steps_run": steps}


def make_play(env: Any, q_values: QValues, *, num_envs: int, max_steps: int, max_frames: int = 2**31 - 1
              ) -> Callable[..., dict[str, jax.Array]]:
  """``play(params, rng, num_envs=num_envs, max_steps=max_steps, epsilon=0.0)``: one episode in each of ``num_envs``
  fresh gymnax environments (:func:`~jaxlab.rl.make_env`), epsilon-greedy (0: greedy), as :func:`first_episodes`.

  Args:
    env: the environments (``reset(rng, n) -> (state, obs)``, ``step(state, actions, rng) -> (state, obs, reward,
      done, info)``, episode statistics in ``state.stats.last_return``).
    q_values: the network's Q-values.
    num_envs: the default number of environments.
    max_steps: the default cap on steps.
    max_frames: the largest cap (frame counters are int32 on the device).

  Returns:
    ``play``, pure and jit-able with ``num_envs`` and ``max_steps`` static.
  """
  default_envs, default_cap = num_envs, max_steps

  def play(params: Any, rng: jax.Array, num_envs: int = default_envs, max_steps: int = default_cap,
           epsilon: float | jax.Array = 0.0) -> dict[str, jax.Array]:
    num_envs = errors.check_int(num_envs, "play num_envs", 1)
    errors.check_int(max_steps, "play max_steps", 1, maximum=max_frames)
    k_reset, k_run = jax.random.split(rng)
    env_state, obs = env.reset(k_reset, num_envs)

    def step(state, t):
      env_state, obs = state
      k_act, k_env = jax.random.split(jax.random.fold_in(k_run, t))
      actions = dqn.epsilon_greedy(q_values(params, obs), k_act, epsilon)
      env_state, obs, _, done, _ = env.step(env_state, actions, k_env)
      return (env_state, obs), done, env_state.stats.last_return

    return first_episodes(step, (env_state, obs), num_envs, max_steps)

  return play


def q_value_fns(q_values: QValues) -> dict[str, Callable[[Any, jax.Array], jax.Array]]:
  """``{"q_values": fn, "greedy_policy": fn}``, each ``fn(params, obs)``, pure: the Q-values ``[N, actions]`` and the
  greedy actions ``int32 [N]`` (argmax Q)."""
  return {"q_values": q_values,
          "greedy_policy": lambda params, obs: jnp.argmax(q_values(params, obs), axis=-1).astype(jnp.int32)}
