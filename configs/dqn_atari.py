r"""DQN with a Soft-MoE value network on Atari 2600 (envpool), the paper's Atari setting.

Paper: Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024
(https://proceedings.mlr.press/v235/obando-ceron24b.html), DQN on the ALE. Settings are those of
its code, Dopamine's ``labs/moes/configs/dqn.gin`` (the JAX DQN of ``jax/agents/dqn/configs/dqn.gin``
with ``NatureDQNMoE``): Adam lr 6.25e-5 / eps 1.5e-4, replay 1M transitions, 20k agent steps of
random play, one update every 4 agent steps, target sync every 8000 agent steps, epsilon 1 -> 0.01
over 250k agent steps, gamma 0.99, batch 32, MSE loss (Dopamine's default ``loss_type``), rewards
clipped to [-1, 1] for learning, 200 iterations x 250k agent steps = 50M agent steps = 200M
frames; sticky actions 0.25, 84x84 grayscale, frame skip 4 with max-pooling, 4-frame stacks, no
life-loss terminals, episodes end (as terminal) after 100k emulator frames, the minimal action set.
The network: Nature CNN (11x11x64 features) -> 121 per-pixel tokens -> Soft MoE, 8 experts of 512
units -> Q head; ``--config.network.head=dense`` is Dopamine's ``NatureDQNNetwork`` (Dense 512).
Every value beside Dopamine's, with file and line: docs/methods/soft_moe_rl.md, "Protocol table:
configs/dqn_atari.py vs Dopamine".

Counts (``dqn.*``) are agent steps, as Dopamine's gin files count them; the logged ``frames`` are
emulator frames (4 per agent step). The replay stores each uint8 frame once (7.07 GB per 1M
transitions, per vmapped run) on the device that runs the program.

Run::

  python -m jaxlab.main --config=configs/dqn_atari.py --workdir=runs/dqn_pong
  python -m jaxlab.main --config=configs/dqn_atari.py:tiny --workdir=<tmp dir>/dqn_atari_tiny   # seconds

Other games and heads: ``--config.env.name=SpaceInvaders --config.network.head=dense``; several
seeds in one program (one envpool pool for all): ``--config.runs.seeds=3``.

Presets (``arg``, a comma list: a preset, then optionally ``tiny``), each equal to one of the paper's
Dopamine configs with the defaults it inherits; every value, with Dopamine's file and line, is in
docs/methods/soft_moe_rl.md ("Protocol table: ..."):

* ``dqn`` (the default): ``labs/moes/configs/dqn.gin``, the Nature CNN;
* ``dqn_impala``: ``labs/moes/configs/dqn_impala.gin``, the same DQN on the IMPALA encoder (``ImpalaMoE``);
* ``full_rainbow``: ``labs/moes/configs/full_rainbow.gin`` (``JaxFullRainbowMoEAgent`` on
  ``FullRainbowMoENetwork``): C51 with 51 atoms on [-10, 10], 3-step returns, dueling noisy head,
  Double DQN, epsilon 0 (noisy nets), prioritised replay, the IMPALA encoder, 4 experts; as
  Dopamine's ``noisy``, the experts' first layers (and the dense baseline's hidden layer) are noisy
  too, and the online pass draws noise per batch row (the MoE agent's vmap);
* ``der``: ``labs/moes/configs/DER.gin`` (data-efficient Rainbow on Atari 100k): the same network
  and prioritised replay, 10-step returns, an update every agent step, 1,600 steps of warm-up,
  target sync every 2,000, Adam 1e-4, no sticky actions, terminal on life loss, 0-29 NOOP steps at
  each game's start, the Nature-CNN encoder, 4 experts; 10 iterations of 10,001 agent steps, the
  warm-up included (98,399 updates), each followed by 100 evaluation games, as Dopamine's Atari 100k
  runner counts them.

``--config=configs/dqn_atari.py:der,tiny`` is the preset shrunk to seconds; ``:tiny`` alone is ``dqn,tiny``.
"""


import ml_collections
from ml_collections.config_dict import placeholder

from jaxlab.experiment import make_tiny, trainer_config

#: The presets ``get_config`` takes (the first item of its argument).
PRESETS = ("dqn", "dqn_impala", "full_rainbow", "der")


def _parse(arg: str | None) -> tuple[str, bool]:
  """``"der,tiny"`` -> ``("der", True)``; ``None`` / ``""`` -> ``("dqn", False)``; ``"tiny"`` -> ``("dqn", True)``."""
  items = [a.strip() for a in (arg or "").split(",") if a.strip()]
  tiny = items[-1:] == ["tiny"]
  if tiny:
    items = items[:-1]
  if len(items) > 1 or (items and items[0] not in PRESETS):
    raise ValueError(f"configs/dqn_atari.py takes a preset in {PRESETS}, optionally followed by ',tiny' "
                     f"(or 'tiny' alone), got {arg!r}")
  return (items[0] if items else "dqn"), tiny


def _dqn() -> ml_collections.ConfigDict:
  """labs/moes/configs/dqn.gin: JaxDQNAgent on NatureDQNMoE, 200 x 250k agent steps."""
  agent_steps = 200 * 250_000  # Runner.num_iterations x Runner.training_steps
  c = trainer_config(batch_size=32, mesh=(("data", -1), ("model", 1)), steps_per_call=250,
                     log_every=2500, eval_every=2500, checkpoint_every=62_500)
  c.name = "dqn_atari"
  c.task = "dqn_atari"
  c.env = ml_collections.ConfigDict({
      "name": "Pong",                  # any of jaxlab.rl.atari.available_games(env.backend)
      "backend": "envpool",            # or "ale_py": ale-py's vector env, same preprocessing, no frame at reset
      "num_envs": 1,                   # per run; must divide dqn.update_period
      "sticky_action_prob": 0.25,
      "frame_skip": 4,
      "max_episode_steps": 25_000,     # agent steps = 100k emulator frames, where Dopamine's ALE ends a game
      "time_limit_is_terminal": True,  # Dopamine: that end is a game over (no bootstrap)
      "terminal_on_life_loss": False,  # True: a lost life ends the agent's episode (not the game's return)
      "max_noops": 0,                  # > 0: each game starts after 0..max_noops-1 NOOP steps (DER's runner: 30)
      "full_action_space": False,
      "step_via": "auto",              # "xla" (the pool's FFI in the program, one device), "callback", or auto
      "num_threads": 0,                # the pool's worker threads (0: its choice)
  })
  c.network = ml_collections.ConfigDict({
      "encoder": "nature", "head": "softmoe", "tokenizer": "per_conv", "num_experts": 8,
      "expert_hidden": 512, "width": 512, "width_multiplier": 1,
      "importance_weight": 0.0, "load_balancing_weight": 0.0,
      # Rainbow's head (jaxlab.rl.networks.QNetwork): num_atoms 1 = scalar Q (DQN), > 1 = C51 on
      # dqn.vmin..dqn.vmax; dueling streams; noisy linear layers (the head; the dense head's hidden
      # layer; the Soft-MoE experts), noise drawn per batch row or per batch
      "num_atoms": 1, "dueling": False, "noisy": False, "noisy_hidden": False, "noisy_experts": False,
      "noise_per_row": False})
  c.dqn = ml_collections.ConfigDict({
      "gamma": 0.99,
      "update_period": 4,               # agent steps (all envs together) per update
      "target_update_period": 8000,     # agent steps between target syncs
      "min_replay_history": 20_000,     # agent steps of random play before learning
      "replay_capacity": 1_000_000,
      "epsilon_end": 0.01,
      "epsilon_decay_period": 250_000,  # agent steps
      "epsilon_schedule": "linear",     # "zero": Dopamine's zero_epsilon (its full Rainbow with noisy nets)
      "double_dqn": False,
      "loss": "mse",                    # Dopamine's mse_loss, err**2
      "clip_rewards": True,             # Dopamine's Runner.clip_rewards: learn from clip(r, -1, 1)
      "update_horizon": 1,              # n of n-step returns (Dopamine's Rainbow: 3, DER: 10)
      # C51's support (network.num_atoms > 1); vmin None = -vmax (a typed placeholder: --config.dqn.vmin=-5 sets it)
      "vmax": 10.0, "vmin": placeholder(float),
      "replay_scheme": "uniform",       # "prioritized": Schaul et al. 2016 as Dopamine's Rainbow (alpha = beta = 0.5)
      "eval_episodes": 0,               # > 0: whole games played greedily-ish in a pool of their own (off)
      "eval_steps": 0,                  # agent steps an evaluation game may take; 0 = env.max_episode_steps
      "eval_epsilon": 0.001,            # Dopamine's epsilon_eval
  })
  c.num_steps = agent_steps // c.dqn.update_period
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 6.25e-5, "eps": 1.5e-4})
  c.skip_nonfinite = True
  return c


def _rainbow(c: ml_collections.ConfigDict) -> None:
  """What full_rainbow.gin and DER.gin share: JaxFullRainbowAgent's head and loss on FullRainbowMoENetwork,
  trained by an MoE agent (JaxFullRainbowMoEAgent / Atari100kRainbowMoEAgent): ``noisy`` makes the head,
  the dense baseline's hidden layer and the experts noisy, and the online pass draws noise per row."""
  c.network.update(num_atoms=51, dueling=True, noisy=True, noisy_hidden=True, noisy_experts=True, noise_per_row=True,
                   num_experts=4, expert_hidden=512)
  c.dqn.update(double_dqn=True, vmax=10.0, epsilon_schedule="zero", replay_scheme="prioritized")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: a preset of ``PRESETS`` (default ``dqn``, the paper's 200M-frame DQN run), optionally
  followed by ``,tiny`` (a few updates on Pong with 25-step episodes, for tests); ``tiny`` alone is
  ``dqn,tiny``. See the module docstring."""
  preset, tiny = _parse(arg)
  c = _dqn()
  if preset == "dqn_impala":
    c.network.encoder = "impala"
  elif preset == "full_rainbow":
    _rainbow(c)
    c.network.encoder = "impala"
    c.dqn.update_horizon = 3
  elif preset == "der":
    _rainbow(c)
    c.env.update(sticky_action_prob=0.0, terminal_on_life_loss=True)
    c.dqn.update(update_horizon=10, update_period=1, target_update_period=2000, min_replay_history=1600,
                 epsilon_decay_period=2000)
    c.env.max_noops = 30  # DataEfficientAtariRunner(max_noops=30), training and evaluation games
    c.optimizer.learning_rate = 1e-4
    # Runner.num_iterations x training_steps = 10 x 10,000 agent steps, the warm-up included. Dopamine's
    # loop stops after the step that makes total_steps > max_steps (atari_100k_runner.py:264-347), so an
    # iteration is 10,001 agent steps. Its first update comes at agent step 1,611 (replay.add_count >
    # min_replay_history once 1,601 ten-step transitions are out of its accumulator), as ours after the
    # prefill of min_replay_history + update_horizon = 1,610 steps; one update per agent step from there.
    iteration, warmup = 10_000 + 1, c.dqn.min_replay_history + c.dqn.update_horizon + 1
    c.num_steps = 10 * iteration - warmup  # 98,399 updates: Dopamine's, over 100,010 agent steps
    c.dqn.eval_episodes = 100  # Atari 100k's evaluation: 100 whole games after each iteration
    c.eval_every, c.eval_offset = iteration, warmup  # after update s with (s + 1,611) % 10,001 == 0
    c.steps_per_call = 137  # divides 10,001 = 73 x 137, so that calls end at the evaluations
    c.log_every, c.checkpoint_every = 10 * c.steps_per_call, iteration
  if preset != "dqn":
    c.name = f"dqn_atari_{preset}"
  if tiny:
    c.env.max_episode_steps = 25  # episodes end (and restart) within the run
    c.network.num_experts, c.network.expert_hidden, c.network.width = 2, 16, 16
    c.dqn.replay_capacity, c.dqn.epsilon_decay_period = 512, 400
    c.dqn.min_replay_history = 64
    c.dqn.target_update_period = 32 if c.dqn.update_period == 4 else 8
    c.env.num_envs = 2 if c.dqn.update_period % 2 == 0 else 1
    c.steps_per_call = 5
    c.dqn.eval_episodes = 0
    if "eval_offset" in c:  # no evaluation, and calls of steps_per_call from step 0
      c.eval_offset = 0
    make_tiny(c, num_steps=20)
    if preset != "dqn":  # fewer updates: the Rainbow heads and the IMPALA encoder compile slower
      c.batch_size = 8
      make_tiny(c, num_steps=10)
  return c
