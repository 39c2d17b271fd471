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
"""

import ml_collections

from jaxlab.train.config import make_tiny, trainer_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (the paper's 200M-frame run) or ``"tiny"`` (20 updates on Pong with 25-step episodes, for tests)."""
  if arg not in (None, "", "tiny"):
    raise ValueError(f"configs/dqn_atari.py takes no argument or 'tiny', got {arg!r}")
  agent_steps = 200 * 250_000  # Runner.num_iterations x Runner.training_steps
  c = trainer_config(batch_size=32, mesh=(("data", -1), ("model", 1)), steps_per_call=250,
                     log_every=2500, eval_every=2500, checkpoint_every=62_500)
  c.name = "dqn_atari"
  c.task = "dqn_atari"
  c.env = ml_collections.ConfigDict({
      "name": "Pong",                  # any of jaxlab.rl.atari.available_games()
      "num_envs": 1,                   # per run; must divide dqn.update_period
      "sticky_action_prob": 0.25,
      "frame_skip": 4,
      "max_episode_steps": 25_000,     # agent steps = 100k emulator frames, where Dopamine's ALE ends a game
      "time_limit_is_terminal": True,  # Dopamine: that end is a game over (no bootstrap)
      "full_action_space": False,
      "step_via": "auto",              # "xla" (envpool's FFI in the program, one device), "callback", or auto
      "num_threads": 0,                # envpool worker threads (0: its choice)
  })
  c.network = ml_collections.ConfigDict({
      "encoder": "nature", "head": "softmoe", "tokenizer": "per_conv", "num_experts": 8,
      "expert_hidden": 512, "width": 512, "width_multiplier": 1,
      "importance_weight": 0.0, "load_balancing_weight": 0.0})
  c.dqn = ml_collections.ConfigDict({
      "gamma": 0.99,
      "update_period": 4,               # agent steps (all envs together) per update
      "target_update_period": 8000,     # agent steps between target syncs
      "min_replay_history": 20_000,     # agent steps of random play before learning
      "replay_capacity": 1_000_000,
      "epsilon_end": 0.01,
      "epsilon_decay_period": 250_000,  # agent steps
      "double_dqn": False,
      "loss": "mse",                    # Dopamine's mse_loss, err**2
      "clip_rewards": True,             # Dopamine's Runner.clip_rewards: learn from clip(r, -1, 1)
  })
  c.num_steps = agent_steps // c.dqn.update_period
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 6.25e-5, "eps": 1.5e-4})
  c.skip_nonfinite = True
  if arg == "tiny":
    c.env.num_envs = 2
    c.env.max_episode_steps = 25  # episodes end (and restart) within the run
    c.network.num_experts, c.network.expert_hidden, c.network.width = 2, 16, 16
    c.dqn.min_replay_history, c.dqn.replay_capacity, c.dqn.epsilon_decay_period = 64, 512, 400
    c.dqn.target_update_period = 32
    c.steps_per_call = 5
    make_tiny(c, num_steps=20)
  return c
