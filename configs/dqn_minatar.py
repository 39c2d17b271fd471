r"""DQN with a Soft-MoE value network on MinAtar, fully jitted, through the one train step.

Paper: Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024
(https://proceedings.mlr.press/v235/obando-ceron24b.html). The penultimate dense layer of the
value network is a Soft MoE (Puigcerver et al., ICLR 2024) over the encoder's per-pixel tokens.
DQN settings are Dopamine's MinAtar DQN configs (dopamine/labs/environments/minatar/dqn_*.gin
with ``JaxDQNAgent``'s defaults: Adam lr 2.5e-4 / eps 3.125e-4, target sync every 1000 frames,
1000 frames of random play, replay 100k, batch 32, one update every 4 frames, epsilon 1 -> 0.01
over 250k frames, MSE loss (not halved), rewards clipped to [-1, 1] for learning, sticky actions
0.1, all 6 actions). Every hyper-parameter beside Dopamine's value, with file and line, and the
switch for each difference: docs/methods/soft_moe_rl.md, "Protocol table: configs/dqn_minatar.py vs Dopamine".
The MoE paper has no MinAtar config; its Atari DQN uses lr 6.25e-5 / eps 1.5e-4 and an 8000-frame
target period (``--config.optimizer.learning_rate=6.25e-5 --config.optimizer.eps=1.5e-4``).
Dopamine's MinAtar network has no hidden dense layer (conv 16 -> Q; ``--config.network.head=none``);
as in the MinAtar paper and the MoE paper's design, ours has a penultimate layer of 128 units
(dense) or an MoE with 128-unit experts over the 100 per-pixel tokens, which is the layer the MoE
replaces. ``dqn.update_period`` counts environment frames of all ``env.num_envs`` environments
together, so the update-to-data ratio (1/4 updates per frame) does not change with ``num_envs``;
frames = updates x update_period (MinAtar has no frame skip). Top-1 heads take auxiliary-loss
weights ``network.importance_weight`` / ``network.load_balancing_weight`` (0: Dopamine's released
``labs/moes`` configs bind no auxiliary loss). Evaluation: each of ``dqn.eval_envs`` environments
plays one whole episode, capped at ``dqn.eval_steps`` steps (reported as ``eval_capped``).

Run::

  python -m jaxlab.main --config=configs/dqn_minatar.py --workdir=runs/dqn_breakout
  python -m jaxlab.main --config=configs/dqn_minatar.py:demo --workdir=/tmp/dqn_demo    # under a minute on CPU (quickstart)
  python -m jaxlab.main --config=configs/dqn_minatar.py:tiny --workdir=/tmp/dqn_tiny    # seconds

Other games and heads: ``--config.env.name=space_invaders --config.network.head=dense``; several
seeds in one program: ``--config.runs.seeds=8`` (sharded over the "data" mesh axis). Any gymnax
environment by its id (``--config.env.name=CartPole-v1``: gymnax's dynamics, default params and
time limit, no sticky actions) or your own registered in ``jaxlab.rl.envs.ENVS``
(``configs/examples/own_env.py``); ``network.encoder`` / ``network.tokenizer`` "auto" pick an MLP
torso with per-feature tokens for vector observations, the MinAtar conv with per-position tokens
for images. Rainbow's pieces are options of the same agent (docs/methods/soft_moe_rl.md, "Rainbow's
pieces and the IMPALA encoder"): ``--config.network.num_atoms=51 --config.dqn.update_horizon=3
--config.network.dueling=True --config.network.noisy=True --config.dqn.double_dqn=True
--config.dqn.replay_scheme=prioritized``.

Router options: on MinAtar the Soft MoE's router stays uniform under Dopamine's recipe (normalised
routing entropy ~0.999 after 60k frames), so every output token is the same mixture and the Q head
sees no position. Each option below is off by default (off = the network and run above, bit for bit)
and is a variant of ``benchmarks/rl_router_diagnosis.py`` (docs/methods/soft_moe_rl.md, "Why the
router does not learn"):

* ``--config.network.normalize=True``: l2-normalised tokens and router with a learned scale
  (Puigcerver et al., Sec. 2.3; vmoe's default, Dopamine's ``normalization=False``);
* ``--config.optimizer.eps=1e-8``: Adam's own eps (Kingma & Ba) instead of Dopamine's 3.125e-4, which
  is larger than the router's gradients;
* ``--config.network.position_embedding=learned``: a learned table added to the tokens (ViT's);
* ``--config.network.tokenizer=per_patch --config.network.patch_size=(2,2)``: Dopamine's PER_PATCH
  tokens (a strided patch convolution to ``network.embedding_size`` = 64 dims; 2x2 patches keep all of
  MinAtar's 10x10 cells, Dopamine's 3x3 would drop the last row, Breakout's paddle);
* ``--config.network.pooling=gap``: global average pooling over the positions in place of the
  flatten before the Q head (Sokar & Castro, "Mind the GAP!", 2025);
* ``--config.network.router_diagnostics=True``: logs what says why (``moe/combine_spread``,
  ``q_spread_*``, ``router/grad_rms_over_eps``, ``router/step_fraction``; ``jaxlab.rl.diagnostics``).
"""

import ml_collections
from ml_collections.config_dict import placeholder

from jaxlab.experiment import make_tiny, trainer_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """``arg``: ``None`` (a 1M-frame run), ``"demo"`` (5k frames after 1k of random play, the quickstart's) or ``"tiny"``
  (a few hundred frames, for tests)."""
  if arg not in (None, "", "demo", "tiny"):
    raise ValueError(f"configs/dqn_minatar.py takes no argument, 'demo' or 'tiny', got {arg!r}")
  frames = 1_000_000
  c = trainer_config(batch_size=32, mesh=(("data", -1), ("model", 1)), steps_per_call=250,
                     log_every=2500, eval_every=25_000, checkpoint_every=25_000)
  c.name = "dqn_minatar"
  c.task = "dqn_minatar"
  # name: a MinAtar game ("breakout", or "Breakout-MinAtar"), any gymnax id, or one registered in
  # jaxlab.rl.envs.ENVS. sticky_action_prob None: the environment's convention (MinAtar 0.1, else 0);
  # max_episode_steps None: the environment's own limit (none in MinAtar but Freeway's 2500). Both are typed
  # placeholders, so that --config.env.sticky_action_prob=0.25 / --config.env.max_episode_steps=1000 can set them.
  c.env = ml_collections.ConfigDict({"name": "breakout", "num_envs": 1, "sticky_action_prob": placeholder(float),
                                     "max_episode_steps": placeholder(int)})
  c.network = ml_collections.ConfigDict({
      # "auto": the MinAtar conv and per-conv tokens for images, an MLP of mlp_features and
      # per-feature tokens (each embedding_size wide) for vector observations
      "encoder": "auto", "head": "softmoe", "tokenizer": "auto", "num_experts": 8,
      "expert_hidden": 128, "width": 128, "width_multiplier": 1, "mlp_features": (512,), "embedding_size": 64,
      "patch_size": (3, 3),  # the per_patch tokenizer's (Dopamine's); (2, 2) tiles MinAtar's 10x10 map
      # Router options (module doc), all off = Dopamine's: l2-normalised routing with a learned scale,
      # a learned position embedding on the tokens, "gap" = global average pooling instead of flatten
      "normalize": False, "position_embedding": "none", "pooling": "flatten",
      # Top-1 auxiliary-loss weights (jaxlab.rl.dqn.td_loss); 0 = Dopamine's released configs
      "importance_weight": 0.0, "load_balancing_weight": 0.0,
      # Soft MoE implementation (jaxlab.moe.soft_moe): "auto" = the CPU kernel on CPU, the einsum
      # form on GPU/TPU, chosen when the step is lowered; "cpu_kernel" / "einsum" force one
      "moe_impl": "auto",
      # Rainbow's head (jaxlab.rl.networks.QNetwork): num_atoms 1 = scalar Q (DQN), > 1 = C51 on
      # dqn.vmin..dqn.vmax (Dopamine's Rainbow: 51); dueling streams; noisy linear layers
      "num_atoms": 1, "dueling": False, "noisy": False,
      # diag/* metrics (dormant neurons, feature rank) on the loss's replay batch: jaxlab.rl.diagnostics
      "diagnostics": False,
      # moe/combine_spread, q_spread_*, router/* (Adam's moments vs eps): why a router does or does not learn
      "router_diagnostics": False})
  c.dqn = ml_collections.ConfigDict({
      "gamma": 0.99,
      "update_period": 4,               # environment frames (all envs together) per update
      "target_update_period": 1000,     # frames between target syncs
      "min_replay_history": 1000,       # frames of random play before learning
      "replay_capacity": 100_000,
      "epsilon_end": 0.01,
      "epsilon_decay_frames": 250_000,
      "double_dqn": False,
      "loss": "mse",                    # Dopamine's mse_loss, err**2
      "clip_rewards": True,             # Dopamine's Runner.clip_rewards: learn from clip(r, -1, 1)
      "update_horizon": 1,              # n of n-step returns (Dopamine's Rainbow: 3)
      "replay_scheme": "uniform",       # or "prioritized" (Schaul et al. 2016, as Dopamine's Rainbow)
      # C51's support (network.num_atoms > 1); vmin None = -vmax (a typed placeholder: --config.dqn.vmin=-5 sets it)
      "vmax": 10.0, "vmin": placeholder(float),
      # Evaluation (Dopamine's MinAtar TrainRunner has none): one whole episode per env, capped
      # at eval_steps steps per env (27000: Dopamine's default Runner.max_steps_per_episode);
      # 0 = no evaluation.
      "eval_envs": 8, "eval_steps": 27_000, "eval_epsilon": 0.001,
  })
  c.num_steps = frames // c.dqn.update_period
  c.optimizer = ml_collections.ConfigDict({"name": "adam", "learning_rate": 2.5e-4, "eps": 3.125e-4})
  c.skip_nonfinite = True
  if arg == "demo":  # the same Soft-MoE net, smaller; a short schedule (learning barely starts)
    c.network.num_experts, c.network.expert_hidden = 4, 64
    c.dqn.min_replay_history, c.dqn.replay_capacity, c.dqn.epsilon_decay_frames = 1000, 10_000, 4000
    c.dqn.target_update_period, c.dqn.eval_envs, c.dqn.eval_steps = 400, 8, 500
    c.num_steps = 5000 // c.dqn.update_period
    c.steps_per_call, c.log_every, c.eval_every, c.checkpoint_every = 250, 250, 1250, 1250
  if arg == "tiny":
    c.network.num_experts, c.network.expert_hidden, c.network.width = 2, 16, 16
    c.network.mlp_features = (16,)
    c.dqn.min_replay_history, c.dqn.replay_capacity, c.dqn.epsilon_decay_frames = 64, 512, 400
    c.dqn.target_update_period, c.dqn.eval_envs, c.dqn.eval_steps = 16, 2, 20
    c.steps_per_call = 5
    make_tiny(c, num_steps=20)
  return c
