"""DQN with (Soft-)MoE value networks on Atari 2600 games (envpool), through the shared step.

Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024, in
its Atari setting: Dopamine's JAX DQN (``JaxDQNAgent`` with ``labs/moes/configs/dqn.gin``) on the
Nature CNN, whose penultimate layer is dense or an MoE over the 11x11x64 feature map's tokens.
The task is the ``dqn_minatar`` task's loop with Atari pieces: each train step is one DQN update;
its ``collect`` acts epsilon-greedily in ``env.num_envs`` environments of envpool (or ale-py,
``env.backend``; :mod:`jaxlab.rl.atari`, stepped from inside the program) for ``dqn.update_period`` agent steps
(all environments together), writes the frames to a frame-stacking replay
(:mod:`jaxlab.rl.replay_frames`, uint8, 7.07 GB per 1M transitions) and samples a batch; the loss
is :func:`jaxlab.rl.dqn.td_loss` against the target network in ``TrainState.extra``.

Counts are Dopamine's: ``dqn.*`` periods and sizes are *agent steps* (one agent step = 4
emulator frames); the logged ``frames`` are emulator frames (the papers' x-axis, 200M for 200
iterations). envpool resets an environment on the step after its episode ends (the action of that
*reset step* is ignored); reset steps count as agent steps here (one per episode), and the replay
never samples a transition that crosses an episode boundary.

Rainbow (Hessel et al. 2018) as Dopamine's ``JaxFullRainbowAgent`` and the paper's
``full_rainbow`` / ``DER`` configs run it (``configs/dqn_atari.py`` presets): ``network.num_atoms``
> 1 (C51 on ``[dqn.vmin, dqn.vmax]``), ``dqn.update_horizon`` n > 1 (n-step windows of the frame
replay, :meth:`~jaxlab.rl.FrameReplay.sample_n_step`), ``network.dueling``, ``network.noisy``,
``dqn.double_dqn`` and ``network.encoder="impala"``, with the noise keys and loss of
:mod:`jaxlab.rl.agent_loss` (shared with ``dqn_minatar``); ``dqn.epsilon_schedule="zero"`` is
Dopamine's ``zero_epsilon`` (noisy nets explore alone), warm-up included. ``env.terminal_on_life_loss``
ends the agent's episode at a lost life (stored terminal, a fresh frame stack) while the game and its
reported return go on, as Dopamine's ``AtariPreprocessing`` + ``Runner`` do; the lives are the pool's
(``AtariStep.lives``). ``dqn.replay_scheme="prioritized"`` is Dopamine's prioritised replay (the frame
replay's sum tree, the new priorities through ``Task.update_data``). ``env.max_noops`` starts each game
(training and evaluation) after 0..max_noops-1 NOOP agent steps that are neither stored nor counted, as
Dopamine's Atari 100k runner does. ``network.noisy_hidden`` / ``noisy_experts`` / ``noise_per_row`` are
the rest of Dopamine's noisy MoE network and agents (:class:`~jaxlab.rl.QNetwork`). The target network
is synced on Dopamine's agent steps (multiples of ``dqn.target_update_period``, the warm-up counted).

Checkpoints: the replay, the agent's frame stacks, params, optimizer, counters and episode
statistics are in the train state; the emulators are not (envpool keeps them in its host pool).
A resumed run therefore starts fresh episodes in a fresh pool: the program recognises states made
with another pool by ``AtariData.epoch`` and restarts their episodes (the running episodes'
returns are dropped, not counted). Not bit-identical to an uninterrupted run, unlike MinAtar.

With ``network.diagnostics`` the loss also logs ``diag/...`` (dormant-neuron fractions, feature rank;
:mod:`jaxlab.rl.diagnostics`) of the online network on its replay batch, as in ``dqn_minatar``.

Bad input: every ``env.*`` / ``dqn.*`` key the task reads is checked before anything is built,
each failure one line naming the key; an unknown game or a missing ROM names the game; a
``dqn.replay_capacity`` whose replay cannot fit in the memory of the mesh's devices (the host's for
CPU) is refused before anything is allocated, naming the bytes needed and available.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections

from jaxlab import errors
from jaxlab.errors import InputError, check
from jaxlab.rl import dqn
from jaxlab.rl.atari import FRAME_SHAPE, STACK_SIZE, AtariEnv, check_game, get_backend, make_atari, push_frame
from jaxlab.rl.agent_loss import AgentNetwork, make_loss_fn, priority_update
from jaxlab.rl.atari_play import eval_seeds, eval_settings, make_play, noop_counts
from jaxlab.tasks.dqn_config import MAX_FRAMES, c51_support_from_config, check_dqn_settings, q_network_from_config
from jaxlab.rl.episode_returns import RETURN_WINDOW, push_returns, recent_return
from jaxlab.rl.play import q_value_fns
from jaxlab.rl.replay_frames import FrameReplay, FrameStep, make_frame_replay
from jaxlab.train.context import TaskContext
from jaxlab.train.precision import cast_floats, compute_dtype, float_dtype
from jaxlab.train.task import TASKS, Inference, Task

STEP_VIA = ("auto", "xla", "callback")


#: The encoders of 84x84x4 frames: the Nature CNN (the paper's DQN) or IMPALA (its Rainbow runs).
ATARI_ENCODERS = ("nature", "impala")

class AtariData(NamedTuple):
  """The task's ``data_state``: what the agent acts on, episode statistics, the replay."""

  stack: jax.Array           # uint8 [N, 84, 84, 4]: the state to act on (newest frame last)
  first: jax.Array           # bool [N]: the newest frame of ``stack`` begins an episode
  done: jax.Array            # bool [N]: the last step ended an episode (the next is envpool's reset step)
  epoch: jax.Array           # uint32 []: the pool ``stack`` came from (0: none yet)
  episode_return: jax.Array  # float32 [N]: game score of the running episode
  episode_length: jax.Array  # int32 [N]: agent steps of the running episode
  replay: Any                # FrameReplayState
  returns: jax.Array         # float32 [RETURN_WINDOW]: a ring of completed-episode returns
  episodes: jax.Array        # int32 []: completed episodes so far
  lives: Any = None          # int32 [N]: lives left after the last step (terminal_on_life_loss), else None


def _check_config(config: ml_collections.ConfigDict) -> None:
  """Every env / dqn key the task reads, one clear line each, before anything is built."""
  e, d = config.env, config.dqn
  check_game(e.name, "env.name", get_backend(e.get("backend", "envpool"), "env.backend").name)
  errors.check_choice(e.step_via, "env.step_via", STEP_VIA)
  errors.check_bool(e.time_limit_is_terminal, "env.time_limit_is_terminal")
  errors.check_bool(e.get("terminal_on_life_loss", False), "env.terminal_on_life_loss")
  noops = e.get("max_noops", 0)
  errors.check_int(noops, "env.max_noops", 0, "each game starts after 0..max_noops-1 NOOP agent steps "
                   "(Dopamine's Atari 100k runner: 30); 0 = none", maximum=10_000)
  check(not noops or e.num_envs == 1,
        f"env.max_noops={noops} needs env.num_envs=1 (got {e.num_envs!r}): the pool steps its environments "
        "together, so one environment's no-ops would step the others (Dopamine's runner trains on one)")
  seeds, sweep = config.runs.get("seeds", 1), config.runs.get("sweep", ())
  check(not noops or (seeds == 1 and not sweep),
        f"env.max_noops={noops} needs one run per program (got runs.seeds={seeds}{', a runs.sweep' if sweep else ''}): "
        "the vmapped runs' emulators step together, so one run's no-op start would step the others; set "
        "env.max_noops=0 or train each seed in its own program")
  errors.check_choice(d.get("epsilon_schedule", "linear"), "dqn.epsilon_schedule", tuple(dqn.EPSILON_SCHEDULES),
                      "'zero': Dopamine's zero_epsilon, which its full Rainbow uses with noisy nets")
  noisy = config.network.get("noisy", False)
  check(d.get("epsilon_schedule", "linear") != "zero" or noisy is True,
        f"dqn.epsilon_schedule='zero' with network.noisy={noisy!r}: the agent would never explore (Dopamine takes "
        "zero_epsilon only with noisy nets, full_rainbow_agent.py:335 @ 5873f54); set network.noisy=True or "
        "dqn.epsilon_schedule='linear'")
  check(errors.is_int(d.update_period) and d.update_period >= 1,
        f"dqn.update_period={d.update_period!r} agent steps per update; must be an int >= 1 (Dopamine: 4)")
  check_dqn_settings(d, "agent steps", "epsilon_decay_period", d.clip_rewards, config.network)
  check(config.network.encoder in ATARI_ENCODERS,
        f"network.encoder={config.network.encoder!r}; Atari frames (84x84x4) take one of {ATARI_ENCODERS}")


def resolve_step_via(step_via: str, mesh: jax.sharding.Mesh) -> str:
  """``env.step_via`` for the run's mesh: "auto" is "xla" when the mesh spans one device, else
  "callback"; "xla" on a larger mesh is refused (one line).

  Args:
    step_via: the config's ``env.step_via`` (one of ``STEP_VIA``).
    mesh: the mesh the trainer resolved (``TaskContext.mesh``).

  Returns:
    "xla" or "callback".
  """
  devices = mesh.devices.size
  if step_via == "auto":
    return "xla" if devices == 1 else "callback"
  if step_via == "xla" and devices > 1:
    raise InputError(f"env.step_via='xla' runs the emulator pool's custom calls in a one-device program, but "
                     f"the mesh spans {devices} devices; use 'callback' (or 'auto')")
  return step_via


def _replays_per_device(ctx: TaskContext) -> int:
  """Replays each device of the mesh holds, for the memory check before the replay is allocated.

  Vmapped runs each have a replay, sharded over the "data" axis; CPU devices share the host's
  memory, so there every run's replay counts (a lower bound: a replicated one counts once).

  Args:
    ctx: the run's context (its mesh and runs).

  Returns:
    ``ceil(runs / data axis size)`` on accelerators, the number of runs on CPU (1 for one run).
  """
  runs = len(ctx.runs.seeds) if ctx.runs is not None else 1
  if all(device.platform == "cpu" for device in ctx.devices):
    return runs
  return math.ceil(runs / ctx.mesh.shape.get("data", 1))


def empty_data(env: AtariEnv, replay: FrameReplay, track_lives: bool = False) -> AtariData:
  """A data state made by no pool (``epoch`` 0): its first step restarts every episode;
  ``track_lives``: it keeps the lives left (for ``terminal_on_life_loss``)."""
  n = env.num_envs
  zf, zb = (lambda: jnp.zeros((n,), jnp.float32)), (lambda: jnp.zeros((n,), jnp.bool_))
  return AtariData(stack=jnp.zeros((n, *env.frame_shape, STACK_SIZE), jnp.uint8), first=zb(), done=zb(),
                   epoch=jnp.zeros((), jnp.uint32), episode_return=zf(), episode_length=jnp.zeros((n,), jnp.int32),
                   replay=replay.init(), returns=jnp.zeros((RETURN_WINDOW,), jnp.float32),
                   episodes=jnp.zeros((), jnp.int32), lives=jnp.zeros((n,), jnp.int32) if track_lives else None)


def make_noop_start(env: AtariEnv, max_noops: int) -> Callable[[jax.Array, jax.Array, jax.Array, jax.Array],
                                                                tuple[jax.Array, jax.Array]]:
  """``noop_start(frame, lives, begins, rng) -> (frame, lives, steps)``: where ``begins`` (a game's first frame
  is ``frame``), ``k ~ U{0, ..., max_noops - 1}`` NOOP agent steps first (:func:`~jaxlab.rl.atari_play.noop_counts`,
  Dopamine's ``DataEfficientAtariRunner._initialize_episode``, atari_100k_runner.py:204-212 @ 5873f54),
  neither stored nor counted: the frame and lives after them, and the steps taken (for a data
  dependency that orders the environment's next step after them). A game that ends inside them takes one
  more step (envpool's reset step: a new game). One environment only: a pool steps all its
  environments together, so another environment's no-ops would step this one."""
  check(env.num_envs == 1, f"no-op starts need one environment per pool (got {env.num_envs})")

  def noop_start(frame, lives, begins, rng):
    count = jnp.where(begins, noop_counts(rng, 1, max_noops), 0)[0]

    def body(carry):
      i, _, _ = carry
      out = env.step(jnp.zeros((1,), jnp.int32))
      return i + (~(out.terminated | out.truncated)[0]).astype(jnp.int32), out.frame, out.lives

    taken, frame, lives = jax.lax.while_loop(lambda c: c[0] < count, body, (jnp.zeros((), jnp.int32), frame, lives))
    return frame, lives, taken
  return noop_start


def make_env_step(env: AtariEnv, replay: FrameReplay, q_fn: Any, *, clip_rewards: bool,
                  time_limit_terminal: bool, terminal_on_life_loss: bool = False, max_noops: int = 0
                  ) -> Callable[[AtariData, Any, jax.Array, jax.Array], AtariData]:
  """``env_step(data, params, epsilon, rng) -> data``: one agent step of every environment.

  Acts epsilon-greedily with ``q_fn(params, stack, rng) -> (q_values, stats, rng)`` (a noisy
  network draws its noise from ``rng``; :meth:`~jaxlab.rl.agent_loss.AgentNetwork.acting_q_values`;
  uniformly at random where ``params`` is None: the warm-up), steps ``env``, stores the step in
  ``replay`` and updates the frame stacks and episode statistics. A ``data`` made with another pool (``data.epoch != env.epoch``: a fresh
  state, or one restored from a checkpoint of an earlier process) first restarts every episode
  from the frames ``env`` was reset to, and its slot is marked ``first`` so that the replay never
  joins the two pools' frames.

  Args:
    env: the pool.
    replay: the frame replay.
    q_fn: ``(params, uint8 stacks, rng) -> (q_values, stats, rng)``.
    clip_rewards: store ``clip(r, -1, 1)`` (Dopamine's ``Runner``); returns stay game scores.
    time_limit_terminal: an episode truncated at ``max_episode_steps`` is stored as terminal
      (discount 0), as Dopamine's emulator limit is; False bootstraps there.
    terminal_on_life_loss: a step that loses a life (the lives the pool reports went down) ends
      the agent's episode but not the game, as Dopamine's ``AtariPreprocessing.terminal_on_life_loss``
      with its ``Runner`` (atari_lib.py:315-318, run_experiment.py:412-422): the step is stored as
      terminal, the next frame starts a fresh zero-padded stack in a slot marked ``first``, and
      the reported episode return and length stay the whole game's. ``data.lives`` must be an
      array (``empty_data(..., track_lives=True)``).
    max_noops: every game (a restart's first, and each after envpool's reset step) starts after
      :func:`make_noop_start`'s no-ops, as Dopamine's Atari 100k runner starts them; 0: none. Needs
      ``env.num_envs`` 1.

  Returns:
    The step function (pure; jit/vmap/scan-able).
  """
  n = env.num_envs
  noop_start = make_noop_start(env, max_noops) if max_noops else None

  def env_step(data: AtariData, params: Any, epsilon: jax.Array, rng: jax.Array) -> AtariData:
    restart = data.epoch != jnp.uint32(env.epoch)
    # the token must vary over vmapped runs (the key does; a constant epoch would not)
    first_frames = env.first_frames(jax.random.key_data(rng))
    if noop_start is not None:  # a restarted game's no-ops (its lives are not tracked: see life_lost)
      rng, k_restart, k_reset = jax.random.split(rng, 3)
      first_frames, _, noops_taken = noop_start(first_frames, jnp.zeros((n,), jnp.int32), restart, k_restart)
    fresh = push_frame(data.stack, first_frames, jnp.ones((n,), jnp.bool_))
    stack = jnp.where(restart, fresh, data.stack)
    first = data.first | restart
    reset_step = data.done & ~restart  # envpool ignores this step's action and starts the next episode
    if params is None:
      actions = jax.random.randint(rng, (n,), 0, env.num_actions).astype(jnp.int32)
    else:
      q, _, rng = q_fn(params, stack, rng)
      actions = dqn.epsilon_greedy(q, rng, epsilon)
    if noop_start is not None:  # the no-ops first, also where the action ignores the stack (the warm-up):
      actions = jnp.where(noops_taken >= 0, actions, 0)  # a data dependency orders host steps, a barrier does not
    out = env.step(actions)
    terminal = out.terminated | (out.truncated & time_limit_terminal)
    game_end = out.terminated | out.truncated
    if terminal_on_life_loss:  # the reset step refills the lives and a restart's old lives mean nothing
      life_lost = (out.lives < data.lives) & ~reset_step & ~restart
      terminal = terminal | life_lost
      new_life = life_lost & ~game_end  # no reset step follows: the next frame starts the agent's episode
    reward = jnp.clip(out.reward, -1.0, 1.0) if clip_rewards else out.reward
    replay_state = replay.add(data.replay, FrameStep(stack[..., -1], actions, reward,
                                                     1.0 - terminal.astype(jnp.float32), first))
    done = game_end & ~reset_step
    ret = jnp.where(restart, 0.0, data.episode_return) + out.reward
    length = jnp.where(restart, 0, data.episode_length) + (~reset_step).astype(jnp.int32)
    returns, episodes = push_returns(data.returns, data.episodes, done, ret)
    starts = (reset_step | new_life) if terminal_on_life_loss else reset_step
    frame, lives = out.frame, out.lives
    if noop_start is not None:  # envpool's reset step gave a new game's first frame: its no-ops come first
      frame, lives, _ = noop_start(frame, lives, reset_step, k_reset)
    return AtariData(stack=push_frame(stack, frame, starts), first=starts, done=done,
                     epoch=jnp.full((), env.epoch, jnp.uint32),
                     episode_return=jnp.where(done, 0.0, ret), episode_length=jnp.where(done, 0, length),
                     replay=replay_state, returns=returns, episodes=episodes,
                     lives=lives if terminal_on_life_loss else None)
  return env_step


@TASKS.register("dqn_atari")
def dqn_atari(config: ml_collections.ConfigDict, ctx: TaskContext) -> Task:
  """The task of ``configs/dqn_atari.py`` (see there for every key), with its
  :class:`~jaxlab.train.task.Inference` (the same network and pool).

  The pool is stepped the way the context's mesh allows (:func:`resolve_step_via`) and seeded
  with the context's runs (vmapped runs share one pool).

  Inference functions, each ``fn(params, obs)`` with ``obs`` uint8 ``[N, 84, 84, 4]`` (oldest
  frame first): ``q_values`` (``[N, actions]``, every noisy layer at its means) and ``greedy_policy``
  (``int32 [N]``); with ``dqn.eval_episodes`` > 0 also ``play(params, rng, epsilon=0.001,
  max_steps=...)``, the task's evaluation (one whole game in each of ``dqn.eval_episodes``
  environments of a pool of its own, :func:`jaxlab.rl.atari_play.make_play`: Dopamine's
  ``eval_mode``, whose noisy experts still draw noise, with the training games' life-loss stack
  resets and no-op starts) with ``epsilon`` set to ``dqn.eval_epsilon``. ``data``:
  ``env`` (the :class:`~jaxlab.rl.atari.AtariEnv`), ``num_actions``, ``obs_shape``.
  """
  _check_config(config)
  e, d = config.env, config.dqn
  ev = eval_settings(d, e.max_episode_steps)  # dqn.eval_*, checked before anything is built
  step_via = resolve_step_via(e.step_via, ctx.mesh)
  n_envs = e.num_envs
  n_envs = errors.check_int(n_envs, "env.num_envs", 1)
  if d.update_period % n_envs:
    divisors = [k for k in range(1, d.update_period + 1) if d.update_period % k == 0]
    raise InputError(f"env.num_envs={n_envs} does not divide dqn.update_period={d.update_period} (agent steps "
                     f"per update, all environments together); allowed env.num_envs: {divisors}")
  if d.target_update_period % d.update_period:
    raise InputError(f"dqn.target_update_period={d.target_update_period} agent steps must be a multiple of the "
                     f"{d.update_period} agent steps of one update (dqn.update_period)")
  horizon = d.get("update_horizon", 1)
  limit = e.max_episode_steps
  if horizon > 1 and not e.time_limit_is_terminal and errors.is_int(limit) and limit <= horizon:
    raise InputError(f"dqn.update_horizon={horizon} with env.max_episode_steps={limit} and "
                     "env.time_limit_is_terminal=False: every episode is truncated within the horizon, so every "
                     f"{horizon}-step window that does not end in a game over crosses a truncation and leaves the loss (it "
                     "would train on 0); "
                     f"lower dqn.update_horizon below {limit} or raise env.max_episode_steps")
  prioritized = d.get("replay_scheme", "uniform") == "prioritized"
  replay = make_frame_replay(d.replay_capacity, n_envs, config.batch_size, min_size=d.min_replay_history,
                             frame_shape=FRAME_SHAPE, stack_size=STACK_SIZE,
                             names={"capacity": "dqn.replay_capacity", "num_envs": "env.num_envs",
                                    "min_size": "dqn.min_replay_history", "batch_size": "batch_size",
                                    "horizon": "dqn.update_horizon"},
                             devices=ctx.devices, copies=_replays_per_device(ctx), prioritized=prioritized,
                             horizon=horizon)
  held = n_envs * (replay.slots_per_env - STACK_SIZE + 1 - horizon)  # n-step windows a full replay holds
  if horizon > 1 and held < d.min_replay_history:
    raise InputError(f"dqn.update_horizon={horizon} leaves a full replay {held} {horizon}-step transitions "
                     f"(dqn.replay_capacity={d.replay_capacity}, env.num_envs={n_envs}), fewer than "
                     f"dqn.min_replay_history={d.min_replay_history}; raise dqn.replay_capacity")
  # vmapped runs share one pool: run r steps environments r * num_envs...
  seeds = ctx.runs.seeds if ctx.runs is not None else (int(config.seed),)
  backend = e.get("backend", "envpool")
  env = make_atari(e.name, num_envs=n_envs, seeds=seeds, sticky_action_prob=e.sticky_action_prob,
                   frame_skip=e.frame_skip, max_episode_steps=e.max_episode_steps,
                   full_action_space=e.full_action_space, step_via=step_via, num_threads=e.num_threads,
                   backend=backend,
                   names={k: f"env.{k}" for k in ("name", "num_envs", "sticky_action_prob", "frame_skip",
                                                  "max_episode_steps", "full_action_space", "num_threads",
                                                  "backend")}
                   | {"seeds": "seed / runs.seeds"})
  steps_per_update = d.update_period                   # agent steps, all environments together
  pool_steps_per_update = d.update_period // n_envs
  # + horizon: the newest slots have no n-step successor yet
  prefill_pool_steps = math.ceil(d.min_replay_history / n_envs) + horizon
  prefill_steps = prefill_pool_steps * n_envs
  num_steps = config.get("num_steps")
  if isinstance(num_steps, int) and (prefill_steps + num_steps * steps_per_update) * e.frame_skip > MAX_FRAMES:
    raise InputError(f"num_steps={num_steps} updates x dqn.update_period={steps_per_update} agent steps "
                     f"(+{prefill_steps} of random play) x env.frame_skip={e.frame_skip} exceed 2**31 - 1 frames, "
                     "the int32 frame counter; lower num_steps")
  net, aux_weights = q_network_from_config(config.network, env.num_actions, rainbow=True, diagnostics=True)
  for key in ("deterministic", "expert_means"):
    check(not getattr(net, key), f"network.{key}=True; the task sets it itself (inference uses the noisy layers' "
          "means, evaluation Dopamine's eval_mode, training samples noise): leave it False")
  obs_shape = (*env.frame_shape, STACK_SIZE)

  def prepare(params, obs):
    """uint8 frames: the encoder scales them by 1/255 in float32. Under compute_dtype=bfloat16 the
    loss and acting get bfloat16 params (cast by the step and by ``collect``), and the frames are
    scaled first and then cast, so the convolutions run in bfloat16."""
    dtype = float_dtype(params)
    if dtype != jnp.float32:
      obs = (obs.astype(jnp.float32) / 255.0).astype(dtype)
    return obs

  agent = AgentNetwork(net, c51_support_from_config(config.network, d), prepare)
  q_values = agent.q_values

  def init_params(rng):
    return agent.init(rng, jnp.zeros((1, *obs_shape), jnp.uint8))

  acting_dtype = compute_dtype(config)
  life_loss = e.get("terminal_on_life_loss", False)
  max_noops = e.get("max_noops", 0)
  env_step = make_env_step(env, replay, agent.acting_q_values, clip_rewards=d.clip_rewards,
                           time_limit_terminal=e.time_limit_is_terminal, terminal_on_life_loss=life_loss,
                           max_noops=max_noops)
  # dqn.epsilon_schedule: Dopamine's linearly_decaying_epsilon (dqn_agent.py:171-192) or its zero_epsilon
  # (full_rainbow_agent.py:52-55), which JaxFullRainbowAgent takes whenever its network is noisy
  # (full_rainbow_agent.py:335); "zero" also in the warm-up, which then acts with the initial network
  schedule = dqn.EPSILON_SCHEDULES.get(d.get("epsilon_schedule", "linear"))
  zero_epsilon = schedule is dqn.zero_epsilon

  def init_data(params, rng):
    acting = cast_floats(params, acting_dtype) if zero_epsilon else None  # None: uniformly random actions
    epsilon = jnp.zeros(()) if zero_epsilon else jnp.ones(())
    data, _ = jax.lax.scan(lambda dt, k: (env_step(dt, acting, epsilon, k), None),
                           empty_data(env, replay, track_lives=life_loss),
                           jax.random.split(rng, prefill_pool_steps))
    return data

  def collect(state, rng):
    agent_steps = prefill_steps + state.step * steps_per_update
    epsilon = schedule(agent_steps, d.epsilon_decay_period, prefill_steps, d.epsilon_end)
    k_act, k_sample = jax.random.split(rng)
    params = cast_floats(state.params, acting_dtype)  # acting in the compute dtype, as the loss
    data, _ = jax.lax.scan(lambda dt, k: (env_step(dt, params, epsilon, k), None), state.data_state,
                           jax.random.split(k_act, pool_steps_per_update))
    if horizon > 1:
      batch = replay.sample_n_step(data.replay, k_sample, horizon, d.gamma)
    else:
      batch = replay.sample(data.replay, k_sample)
    done_steps = agent_steps + steps_per_update
    metrics = {"epsilon": epsilon, "episode_return": recent_return(data.returns, data.episodes),
               "episodes": data.episodes, "agent_steps": done_steps, "frames": done_steps * e.frame_skip}
    return state.replace(data_state=data), batch, metrics

  loss_fn = make_loss_fn(agent, gamma=d.gamma, horizon=horizon, double_dqn=d.double_dqn, loss=d.loss,
                         aux_weights=aux_weights, per_sample=prioritized)

  greedy_q = lambda params, obs: q_values(params, obs)[0]  # noqa: E731 - the Q-values without the stats
  fns = {name: jax.jit(fn) for name, fn in q_value_fns(greedy_q).items()}
  # Evaluation (dqn.eval_episodes > 0): whole games in a pool of its own, as Dopamine's Atari 100k runner
  evaluate = None
  if ev.episodes:
    eval_env = make_atari(e.name, num_envs=ev.episodes, seeds=eval_seeds(seeds), sticky_action_prob=e.sticky_action_prob,
                          frame_skip=e.frame_skip, max_episode_steps=e.max_episode_steps,
                          full_action_space=e.full_action_space, step_via=step_via, num_threads=e.num_threads,
                          backend=backend)
    play = make_play(eval_env, agent.eval_q_values, max_steps=ev.max_steps, terminal_on_life_loss=life_loss,
                     max_noops=max_noops)
    evaluate = lambda state, rng: play(state.params, rng, ev.epsilon)  # noqa: E731
    fns["play"] = jax.jit(play, static_argnames=("max_steps",))
  inference = Inference(model=net, fns=fns, data={"env": env, "num_actions": env.num_actions,
                                                  "obs_shape": obs_shape})
  return Task(init_params=init_params, loss_fn=loss_fn, collect=collect, init_data=init_data, evaluate=evaluate,
              init_extra=lambda params: jax.tree.map(jnp.copy, params),
              update_extra=dqn.agent_step_sync(d.target_update_period, steps_per_update, prefill_steps),
              update_data=priority_update(replay) if prioritized else None,
              throughput={"agent_steps": steps_per_update, "frames": steps_per_update * e.frame_skip},
              description=f"DQN Atari {e.name}, {config.network.head} head",
              resume_safe=("env.step_via", "env.num_threads",  # how the pool is stepped, not what
                           "dqn.eval_episodes", "dqn.eval_steps", "dqn.eval_epsilon"),  # evaluation only
              inference=inference)
