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

Here the environments are a pool of their own (:func:`~jaxlab.rl.atari.make_atari`, on the training
pool's backend, ``dqn.eval_episodes`` environments per run); each evaluation resets the pool on the host (an
``io_callback``: the pool is a host object) and steps it from inside the program until every
environment has finished its first episode or the cap has passed. As the runner (through
:func:`make_play`'s options, set by the ``dqn_atari`` task from its ``env.*`` keys):

* ``max_noops``: each game starts after ``k`` NOOP agent steps, ``k`` uniform on ``0 .. max_noops - 1``
  per environment (``jax.random.randint(rng, (), 0, max_noops)`` at each reset, lines 204-212;
  ``max_noops = 30``, line 60); those steps are neither scored nor counted as the episode's;
* ``terminal_on_life_loss``: a lost life (the lives the environment reports went down, the game
  going on) zero-pads the frame stack, as the runner's ``reset_one`` does on a ``done`` that is
  not a game over (lines 329-330); the score stays the whole game's (``cum_reward`` until
  ``game_over``, lines 287-297).

Any backend whose ``step`` reports :class:`~jaxlab.rl.atari.AtariStep` (frames, rewards, game ends and
lives) serves: :func:`make_play` takes the evaluation pool's reset as an argument (default
:func:`make_reset`, the pool's own, envpool's or ale-py's). The loop is :func:`jaxlab.rl.play.first_episodes`,
the one both DQN tasks evaluate with.
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
#: The most evaluation games per run: each is an emulator of its own in the evaluation pool, a host object built
#: with the task (about 1.2 MB each: an envpool Pong pool of 64 grew the process by 76 MB), so 10x Dopamine's 100
#: keeps the pool near 1 GB per run; a million ended in ``std::bad_alloc`` instead of a message.
MAX_EVAL_EPISODES = 1000
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
                   f"(Dopamine's Atari 100k: 100); 0 = no evaluation; at most {MAX_EVAL_EPISODES}, each an emulator "
                   "of the evaluation pool", maximum=MAX_EVAL_EPISODES)
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


def make_play(env: AtariEnv, q_values: Callable[[Any, jax.Array, jax.Array], jax.Array], *, max_steps: int,
              reset: Callable[[jax.Array], jax.Array] | None = None, terminal_on_life_loss: bool = False,
              max_noops: int = 0) -> Callable[..., dict[str, jax.Array]]:
  """``play(params, rng, epsilon=EVAL_EPSILON, max_steps=max_steps)``: one whole game in each of ``env``'s environments.

  Resets the pool (``reset``), takes each game's no-op start, then acts epsilon-greedily on
  ``q_values(params, stack, key)`` until every environment has ended its first episode (game over,
  or the backend's ``max_episode_steps``) or ``max_steps`` agent steps have passed. Pure and
  jit-able (``max_steps`` static); vmapped over the pool's runs, one pool step serves them all.

  Args:
    env: the evaluation pool (not the training pool: its episodes would be cut); anything with
      ``num_envs`` and ``step(actions) -> AtariStep``.
    q_values: ``(params, uint8 [N, 84, 84, 4], key) -> [N, actions]``: Dopamine's ``eval_mode``
      network; the key (a fresh one per step) is for noise it keeps there (noisy experts).
    max_steps: the default cap.
    reset: ``token -> uint8 [N, 84, 84]``, resetting the pool (:func:`make_reset`'s contract); None:
      :func:`make_reset` of ``env`` (its pool's ``reset()`` on the host, either backend).
    terminal_on_life_loss: a lost life restarts the frame stack (zero-padded), the game going on.
    max_noops: each game first takes ``k ~ U{0, ..., max_noops - 1}`` NOOP steps (action 0), unscored
      (0: none). A game that ends inside them restarts (the backend's reset) and the count goes on.

  Returns:
    ``play``, whose metrics are :func:`jaxlab.rl.play.first_episodes`'s: ``eval_return`` (mean whole-game
    score of the finished episodes, one per environment; NaN if none finished), ``eval_episodes`` (how
    many finished), ``eval_capped`` (1 if the cap cut an episode short; its partial score is not
    counted) and ``eval_steps_run`` (loop steps, no-ops included).
  """
  errors.check_bool(terminal_on_life_loss, "make_play terminal_on_life_loss")
  errors.check_int(max_noops, "make_play max_noops", 0, "NOOP steps at a game's start are drawn from 0..max_noops-1")
  n = env.num_envs
  reset = make_reset(env) if reset is None else reset
  default_cap = max_steps

  def play(params: Any, rng: jax.Array, epsilon: float | jax.Array = EVAL_EPSILON,
           max_steps: int = default_cap) -> dict[str, jax.Array]:
    errors.check_int(max_steps, "play max_steps", 1, maximum=2**31 - 1)
    frames = reset(jax.random.key_data(rng))  # the token varies over vmapped runs, as the key does
    stack = push_frame(jnp.zeros((n, *FRAME_SHAPE, STACK_SIZE), jnp.uint8), frames, jnp.ones((n,), jnp.bool_))
    # keys apart from the per-step epsilon keys fold_in(rng, t), t < 2**31
    noise_root, noop_key = jax.random.fold_in(rng, 2**31), jax.random.fold_in(rng, 2**31 + 1)
    noops = noop_counts(noop_key, n, max_noops)

    def step(state, t):
      stack, running, noops, lives = state
      in_noops = noops > 0
      actions = dqn.epsilon_greedy(q_values(params, stack, jax.random.fold_in(noise_root, t)),
                                   jax.random.fold_in(rng, t), epsilon)
      out = env.step(jnp.where(in_noops, 0, actions).astype(jnp.int32))
      game_end = out.terminated | out.truncated
      scored = ~in_noops
      running = running + jnp.where(scored, out.reward, 0.0)
      # a finished environment's next frames (the backend's reset step, a new episode) are never scored
      restart = in_noops  # the stack a game starts from holds only the frame after its no-ops
      if terminal_on_life_loss:  # lives -1: not known yet (the first step after the reset)
        restart = restart | ((lives >= 0) & (out.lives < lives) & ~game_end)
      # a game that ends inside its no-ops gets one more (the backend's reset step, whose action is ignored)
      noops = noops - (in_noops & ~game_end).astype(jnp.int32)
      return (push_frame(stack, out.frame, restart), running, noops, out.lives), game_end & scored, running

    zeros = jnp.zeros((n,), jnp.float32)
    return first_episodes(step, (stack, zeros, noops, jnp.full((n,), -1, jnp.int32)), n, max_steps)

  return play


def noop_counts(key: jax.Array, n: int, max_noops: int) -> jax.Array:
  """int32 [n]: each game's number of NOOP steps at its start, uniform on ``0 .. max_noops - 1`` (zeros
  for ``max_noops`` 0), as Dopamine's ``DataEfficientAtariRunner._initialize_episode`` draws it
  (``jax.random.randint(rng, (), 0, max_noops)``, atari_100k_runner.py:204-208 @ 5873f54)."""
  if not max_noops:
    return jnp.zeros((n,), jnp.int32)
  return jax.random.randint(key, (n,), 0, max_noops, dtype=jnp.int32)
