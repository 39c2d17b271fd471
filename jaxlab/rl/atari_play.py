"""Evaluation of an Atari agent as Dopamine's Atari 100k runner does it: one whole game per environment.

Dopamine (google/dopamine @ 5873f54) evaluates after each training iteration with the agent in
``eval_mode`` (epsilon ``epsilon_eval = 0.001``, ``labs/moes/configs/DER.gin:18``; noisy layers at
their means). Its Atari 100k runner ``DataEfficientAtariRunner`` (``labs/atari_100k/
atari_100k_runner.py:425-468``) makes ``num_eval_envs = 100`` fresh environments and plays one
episode in each (``eval_one_to_one``), an episode lasting until game over (not a lost life:
``envs[env_id].game_over``, line 293) or ``max_steps_per_episode`` agent steps; it reports the mean
undiscounted return over those episodes, ``Eval/AverageReturns``. Atari 100k papers report that
number after the last iteration. (The classic ``Runner``, ``discrete_domains/run_experiment.py:
548-570``, instead plays whole episodes until ``evaluation_steps`` steps have passed.)

Here the environments are an envpool pool of their own (:func:`~jaxlab.rl.atari.make_atari`,
``dqn.eval_episodes`` environments per run, never life-loss terminal, so returns are whole-game
scores); each evaluation resets the pool on the host (an ``io_callback``: the pool is a host
object) and steps it from inside the program until every environment has finished its first
episode or the cap has passed. Not done: Dopamine's up to 30 random no-ops at each reset
(``max_noops``, lines 204-212); envpool starts each episode after one NOOP frame.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import errors
from jaxlab.errors import check
from jaxlab.rl import dqn
from jaxlab.rl.atari import FRAME_SHAPE, STACK_SIZE, AtariEnv, push_frame
from jaxlab.rl.play import first_episodes

#: Dopamine's ``epsilon_eval`` (``JaxDQNAgent``'s default and ``DER.gin:18``).
EVAL_EPSILON = 0.001
#: Evaluation pools are seeded away from the training pool: run seed ``s`` evaluates with ``s + EVAL_SEED_OFFSET``.
EVAL_SEED_OFFSET = 1_000_003


class EvalSettings(NamedTuple):
  """What the evaluation of ``dqn.eval_*`` does (``episodes`` 0: no evaluation)."""

  episodes: int   # environments per run, one episode each (Dopamine: 100)
  max_steps: int  # agent steps after which the evaluation stops (unfinished episodes are not counted)
  epsilon: float  # exploration rate while evaluating (Dopamine: 0.001)


def eval_settings(d: Mapping[str, Any], max_episode_steps: int) -> EvalSettings:
  """The ``dqn.eval_episodes`` / ``dqn.eval_steps`` / ``dqn.eval_epsilon`` of a config, checked.

  Missing keys read as off (``eval_episodes`` 0), no cap (``eval_steps`` 0) and Dopamine's 0.001.

  Args:
    d: the config's ``dqn`` node, a plain mapping (a ConfigDict or a dict).
    max_episode_steps: ``env.max_episode_steps``, where envpool ends every episode: ``eval_steps``
      0 caps the evaluation there, so that every episode finishes.

  Returns:
    The :class:`EvalSettings`.

  Raises:
    InputError: a key out of range (one line naming it).
  """
  episodes = d.get("eval_episodes", 0)
  errors.check_int(episodes, "dqn.eval_episodes", 0, "evaluation environments per run, one whole game each "
                   "(Dopamine's Atari 100k: 100); 0 = no evaluation")
  cap = d.get("eval_steps", 0)
  errors.check_int(cap, "dqn.eval_steps", 0, "agent steps an evaluation may take; 0 = env.max_episode_steps, "
                   "where every episode has ended", maximum=2**31 - 1)
  epsilon = d.get("eval_epsilon", EVAL_EPSILON)
  errors.check_probability(epsilon, "dqn.eval_epsilon", "the exploration rate of evaluation (Dopamine: 0.001)")
  return EvalSettings(int(episodes), int(cap or max_episode_steps), float(epsilon))


def eval_seeds(seeds: tuple[int, ...]) -> tuple[int, ...]:
  """The evaluation pool's seed for each run's seed (``s + EVAL_SEED_OFFSET``)."""
  return tuple(int(s) + EVAL_SEED_OFFSET for s in seeds)


def make_reset(env: AtariEnv) -> Callable[[jax.Array], jax.Array]:
  """``reset(token) -> uint8 [num_envs, 84, 84]``: resets ``env``'s pool on the host, returns the first frames.

  A ``custom_vmap`` function as :meth:`jaxlab.rl.AtariEnv.first_frames` is: vmapped over the pool's runs
  (``token`` must differ over them, e.g. the run's key data), one host reset serves them all
  (``[runs, num_envs, 84, 84]``). Every environment starts a new episode; the pool's next step
  is an ordinary step (not envpool's reset step).
  """
  from jax.experimental import io_callback  # noqa: PLC0415
  r, n = env.num_runs, env.num_envs
  pool = env.pool

  def host(token):
    del token
    obs, info = pool.reset()
    if not np.array_equal(info["env_id"], np.arange(r * n)):  # sync mode answers in env_id order
      raise RuntimeError(f"envpool answered environments {info['env_id']} in another order than 0..{r * n - 1}")
    return np.ascontiguousarray(obs[:, 0])

  def call(token):
    # ordered=False: the frames feed the first action, which orders the reset before the pool's steps
    return io_callback(host, jax.ShapeDtypeStruct((r * n, *FRAME_SHAPE), jnp.uint8), token, ordered=False)

  def refuse(token):  # a bug: custom_vmap traces this even where it is vmapped, so fail only when run
    def fail(_):
      raise RuntimeError(f"this pool holds {r} runs x {n} environments; reset runs vmapped over the {r} runs")
    return jax.pure_callback(fail, jax.ShapeDtypeStruct((n, *FRAME_SHAPE), jnp.uint8), token)

  @jax.custom_batching.custom_vmap
  def reset(token):
    return call(token) if r == 1 else refuse(token)

  @reset.def_vmap
  def reset_runs(axis_size, in_batched, token):
    del in_batched
    check(axis_size == r, f"vmapped over {axis_size} runs; the pool holds {r}")
    return call(token).reshape(r, n, *FRAME_SHAPE), True

  return reset


def make_play(env: AtariEnv, q_values: Callable[[Any, jax.Array], jax.Array], *, max_steps: int
              ) -> Callable[..., dict[str, jax.Array]]:
  """``play(params, rng, epsilon=EVAL_EPSILON, max_steps=max_steps)``: one whole game in each of ``env``'s environments.

  Resets the pool (:func:`make_reset`), then acts epsilon-greedily on ``q_values(params, stack)``
  until every environment has ended its first episode (game over, or envpool's
  ``max_episode_steps``) or ``max_steps`` agent steps have passed. Pure and jit-able
  (``max_steps`` static); vmapped over the pool's runs, one pool step serves them all.

  Args:
    env: the evaluation pool (not the training pool: its episodes would be cut).
    q_values: ``(params, uint8 [N, 84, 84, 4]) -> [N, actions]`` (a noisy network at its means).
    max_steps: the default cap.

  Returns:
    ``play``, whose metrics are :func:`jaxlab.rl.play.first_episodes`'s: ``eval_return`` (mean whole-game
    score of the finished episodes, one per environment; NaN if none finished), ``eval_episodes`` (how
    many finished), ``eval_capped`` (1 if the cap cut an episode short; its partial score is not
    counted) and ``eval_steps_run``.
  """
  n = env.num_envs
  reset = make_reset(env)
  default_cap = max_steps

  def play(params: Any, rng: jax.Array, epsilon: float | jax.Array = EVAL_EPSILON,
           max_steps: int = default_cap) -> dict[str, jax.Array]:
    errors.check_int(max_steps, "play max_steps", 1, maximum=2**31 - 1)
    frames = reset(jax.random.key_data(rng))  # the token varies over vmapped runs, as the key does
    stack = push_frame(jnp.zeros((n, *FRAME_SHAPE, STACK_SIZE), jnp.uint8), frames, jnp.ones((n,), jnp.bool_))

    def step(state, t):
      stack, running = state
      actions = dqn.epsilon_greedy(q_values(params, stack), jax.random.fold_in(rng, t), epsilon)
      out = env.step(actions)
      running = running + out.reward
      # a finished environment's next frames (envpool's reset step, a new episode) are never scored
      stack = push_frame(stack, out.frame, jnp.zeros((n,), jnp.bool_))
      return (stack, running), out.terminated | out.truncated, running

    return first_episodes(step, (stack, jnp.zeros((n,), jnp.float32)), n, max_steps)

  return play
