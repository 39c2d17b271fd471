"""Q-networks whose penultimate layer is dense, widened dense, Soft MoE or Top-1 MoE.

Obando-Ceron et al., "Mixtures of Experts Unlock Parameter Scaling for Deep RL", ICML 2024,
Sec. 3 / Fig. 3: encoder -> tokenize -> MoE (replacing the penultimate dense layer) -> flatten ->
Q head ``Dense(num_actions)``. Baseline: encoder -> flatten -> Dense(width) -> ReLU -> Q head
(dopamine's ``NatureDQNMoE`` with ``moe_type='BASELINE'``); ``width_multiplier`` scales that
layer (their "dense xN" baseline, dopamine's ``scale_hidden_layer``).

Ablations of Sokar et al., "Don't flatten, tokenize!", ICLR 2025: ``head="token_dense"`` /
``"token_mlp"`` keep the tokens and drop the router (:mod:`jaxlab.rl.networks_token_heads`),
``tokenizer="flatten"`` gives the MoE one token of the flattened features, and a single expert
scaled to the width of n (:func:`scaled_single_expert`) is ``num_experts=1, expert_hidden=n*h``.
``diagnostics=True`` adds the activations :mod:`jaxlab.rl.diagnostics` scores to the stats.

Options for a router that stays uniform (docs/methods/soft_moe_rl.md, "Why the router does not
learn"), each off by default (off, the network, its parameters and stats are those without it):
``normalize`` (Puigcerver et al.'s l2-normalised routing with a learned scale, vmoe's default),
``position_embedding="learned"`` (ViT's table added to the tokens), ``tokenizer="per_patch"``
(Dopamine's patch embedding), ``pooling="gap"`` (global average pooling in place of the flatten,
Sokar & Castro 2025) and ``router_diagnostics`` (the combine weights' spread in the stats).

Example::

  net = QNetwork(num_actions=6, encoder="minatar", head="softmoe", num_experts=8,
                 expert_hidden=512)
  variables = net.init(key, obs)           # obs [b, 10, 10, C]
  q_values, stats = net.apply(variables, obs)  # [b, 6], dict of routing statistics
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlab.errors import check, check_bool, check_choice, check_int, check_range
from jaxlab.moe import modules as moe_modules
from jaxlab.moe._soft_moe import check_impl
from jaxlab.rl import networks_encoders as encoders
from jaxlab.rl import networks_token_heads as token_heads
from jaxlab.rl import networks_tokens as tokens
from jaxlab.registry import Registry
from jaxlab.rl.rainbow_layers import NoisyDense, RainbowHead, factorised_noise

#: The value heads of :class:`QNetwork` by name (its ``head``): dense, Soft MoE, Top-1 MoE, none, or a
#: tokenised layer without a router (``token_dense``, ``token_mlp``: :mod:`jaxlab.rl.networks_token_heads`).
#: Each is ``(net, features, encoder, activations) -> (hidden [b, h], stats)``, called inside
#: ``QNetwork.__call__`` (its layers are the network's submodules); it may add to ``activations``.
HEADS: Registry = Registry("QNetwork head")
#: Prefix of the stats entries that ``diagnostics=True`` adds (arrays with a batch axis, not routing statistics).
ACTIVATIONS = "activations/"
_INIT = nn.initializers.xavier_uniform()


class QNetwork(nn.Module):
  """Q-values [b, num_actions] and a stats dict from observations [b, H, W, C] or vectors [b, F].

  With ``num_atoms > 1`` (C51) the first output is instead the logits [b, num_actions,
  num_atoms] of each action's return distribution; :func:`~jaxlab.rl.expected_q`
  turns them into Q-values on a support (Dopamine's ``FullRainbowMoENetwork``: ``q = sum(support * softmax(logits))``).

  Attributes:
    num_actions: size of the Q head.
    encoder: "minatar" (one 3x3 conv, for 10x10xC grids and other small images), "nature" or
      "impala" (84x84x4 frames), "mlp" (``mlp_features`` Dense + ReLU layers on flattened
      observations) or "auto": "mlp" for vector observations [b, F], "minatar" for images.
    head: "dense", "softmoe" or "top1": the penultimate layer; "none": no penultimate layer
      (Dopamine's MinAtar network, conv -> Q); "token_dense": the dense layer (``width *
      width_multiplier`` units) applied to every token with shared weights, then flattened;
      "token_mlp": one expert MLP (``expert_hidden``) applied to every token, no router (a
      one-expert Soft MoE with identity dispatch and combine), then flattened.
    tokenizer: "per_conv", "per_feat", "per_patch" or "flatten" (one token of all features) for
      the MoE and token heads, on image features;
      vector features (the "mlp" encoder's) take "per_feat", one token per feature, each scalar
      embedded to ``embedding_size`` (:class:`~jaxlab.rl.networks_tokens.PerFeatureEmbedding`);
      "auto": "per_conv" for image features, "per_feat" for vectors.
    num_experts: experts of the MoE head.
    expert_hidden: hidden width of each expert (dopamine ``expert_hidden_units``, 512).
    width: hidden width of the dense head (dopamine uses ``expert_hidden_units`` too).
    width_multiplier: dense head width = width * width_multiplier ("dense xN").
    capacity_factor: Soft MoE slots per expert ceil(m * cf / n); Top-1 tokens per expert.
    normalize: Soft MoE l2-normalised routing with a learned scale.
    single_exponential: Soft MoE kernel option (see ``jaxlab.moe.soft_moe``; needs
      ``moe_impl="cpu_kernel"``).
    moe_impl: Soft MoE implementation, ``"auto"`` (the CPU kernel on CPU, the einsum form on
      GPU/TPU, chosen when the program is lowered), ``"cpu_kernel"`` or ``"einsum"``.
    patch_size: the "per_patch" tokenizer's patch size (Dopamine's: (3, 3); its VALID convolution drops
      the last ``H mod ph`` rows and ``W mod pw`` columns, so on MinAtar's 10x10 map (2, 2) or (5, 5)
      keep every cell).
    embedding_size: the "per_patch" tokenizer's embedding size, and the token width of
      "per_feat" on vector features.
    mlp_features: the "mlp" encoder's hidden widths (dopamine's ``ClassicControlDQNNetwork``
      has 512 units before its penultimate layer).
    importance_weight: weight of the Top-1 head's importance loss in the TD loss
      (:func:`~jaxlab.rl.td_loss`'s ``aux_weights``, set by the ``dqn_minatar`` task). The
      module only returns the losses in its stats; the weights live here so that a network
      config is one set of ``QNetwork`` keyword arguments.
    load_balancing_weight: weight of the Top-1 head's load-balancing loss, likewise.
    num_atoms: atoms of the value distribution: 1 = scalar Q-values (DQN), > 1 = C51 logits.
    dueling: the Q head is a value and an advantage stream (Wang et al. 2016), as Dopamine's
      ``FullRainbowMoENetwork`` places them after its MoE layer.
    noisy: the Q head's layers are factorised noisy linear layers (Fortunato et al. 2018);
      every call then needs a ``"noise"`` RNG (``apply(..., rngs={"noise": key})``).
    noisy_hidden: the dense head's hidden layer is a noisy linear layer too, as in Dopamine's
      ``FullRainbowNetwork`` and ``FullRainbowMoENetwork``'s BASELINE, where ``noisy`` makes every
      layer of ``feature_layer`` noisy (jax/networks.py:588-589, labs/moes/architectures/networks.py:
      567, 583 @ 5873f54). The other heads have no such layer and ignore it.
    noisy_experts: the Soft-MoE head's experts have a noisy first layer, one noise draw shared
      by all experts and slots (Dopamine's ``ExpertModel(noisy=True)``, networks.py:46-49,
      175-182; :func:`jaxlab.moe.experts.init_noisy_experts`). As in Dopamine, ``deterministic``
      does not reach them (its ``eval_mode`` is never passed to the experts): they draw noise
      whenever the network is called, evaluation included. ``head="top1"`` refuses it; heads
      without experts ignore it.
    noise_per_row: every batch row draws its own noise, as Dopamine's MoE agents apply the network
      (``jax.vmap`` over rows, one key each: full_rainbow_moe_agent.py:85-86,
      rainbow_100k_moe_agent.py:84-85). :class:`~jaxlab.rl.agent_loss.AgentNetwork` does the vmap;
      here it makes the noisy layers compute in their factorised form (:class:`NoisyDense`), which
      forms no weight matrix per row. Off: one draw per call for the whole batch.
    deterministic: noisy layers use their mean weights (Dopamine's ``eval_mode``): no RNG needed
      unless ``noisy_experts``.
    expert_means: noisy experts use their means too (no RNG needed): the noise-free network of the
      tasks' inference functions. Dopamine has no such mode.
    position_embedding: "none", or "learned": a table [m, d] added to the tokens of the MoE and
      token heads before the layer (``jaxlab.rl.networks_tokens.PositionEmbedding``, ViT's).
    pooling: how the Q head's input is made from positions: "flatten" (the paper's: the MoE or
      token layer's output [b, m, d] flattened, or the encoder's features before the dense head) or
      "gap" (their mean over the positions: global average pooling, Sokar & Castro 2025,
      ``jaxlab.rl.networks_tokens.global_average_pool``); vector features have no positions to pool
      but the tokens of the MoE and token heads.
    router_diagnostics: the Soft MoE's stats keep ``combine_spread``
      (:func:`jaxlab.moe.combine_spread`; dropped otherwise), and the dqn_minatar task logs the Q-values'
      spread on the replay batch and the router's Adam moments against eps (``jaxlab.rl.diagnostics``).
    diagnostics: the stats also hold ``activations/encoder`` (the encoder's post-ReLU output),
      ``activations/penultimate`` (the post-ReLU hidden layer of the dense and token heads; the
      MoE heads' expert activations are not exposed) and ``activations/features`` (the Q head's
      input [b, F]), for :func:`~jaxlab.rl.diagnostics.network_diagnostics`. Off: the stats
      and the computation are those without the option.
  """

  num_actions: int
  encoder: str = "auto"
  head: str = "softmoe"
  tokenizer: str = "auto"
  num_experts: int = 8
  expert_hidden: int = 512
  width: int = 512
  width_multiplier: int = 1
  capacity_factor: float = 1.0
  normalize: bool = False
  single_exponential: bool = False
  moe_impl: str = "auto"
  patch_size: Sequence[int] = (3, 3)
  embedding_size: int = 64
  mlp_features: Sequence[int] = (512,)
  importance_weight: float = 0.0
  load_balancing_weight: float = 0.0
  num_atoms: int = 1
  dueling: bool = False
  noisy: bool = False
  noisy_hidden: bool = False
  noisy_experts: bool = False
  noise_per_row: bool = False
  deterministic: bool = False
  expert_means: bool = False
  position_embedding: str = "none"
  pooling: str = "flatten"
  router_diagnostics: bool = False
  diagnostics: bool = False

  @property
  def has_noisy_layers(self) -> bool:
    """Whether the network has noisy layers (the head, the dense hidden layer, Soft-MoE experts)."""
    return (self.noisy or (self.noisy_experts and self.head == "softmoe")
            or (self.noisy_hidden and self.head == "dense"))

  @property
  def draws_noise(self) -> bool:
    """Whether a call draws noise (and needs a ``"noise"`` RNG), given ``deterministic`` and ``expert_means``."""
    head_noise = (self.noisy or (self.noisy_hidden and self.head == "dense")) and not self.deterministic
    return head_noise or (self.noisy_experts and self.head == "softmoe" and not self.expert_means)

  def check_config(self) -> None:
    """InputError ``QNetwork.<attribute>=...`` for a setting that builds no network.

    The dqn_minatar task passes its ``network`` config as these keyword arguments, so
    ``QNetwork.x`` is the config key ``network.x``. Every setting is checked, also those the
    chosen head does not use, and all are static, so this runs at trace time before any compile.
    """
    check_int(self.num_actions, "QNetwork.num_actions")
    check_choice(self.head, "QNetwork.head", tuple(HEADS))
    check_choice(self.encoder, "QNetwork.encoder", encoders.ENCODERS)
    check_choice(self.tokenizer, "QNetwork.tokenizer", tokens.TOKENIZERS)
    check_int(self.width, "QNetwork.width", meaning="hidden width of the dense head")
    check_int(self.width_multiplier, "QNetwork.width_multiplier", meaning="dense head width = width * multiplier")
    moe_modules.check_moe_settings("QNetwork", self.num_experts, self.expert_hidden, self.capacity_factor)
    tokens.check_patch_settings("QNetwork", self.embedding_size, self.patch_size)
    ok = (isinstance(self.mlp_features, (tuple, list)) and len(self.mlp_features) >= 1
          and all(isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in self.mlp_features))
    check(ok, f"QNetwork.mlp_features={self.mlp_features!r}; must be a non-empty tuple of ints >= 1 "
          "(the MLP encoder's hidden widths)")
    check_bool(self.normalize, "QNetwork.normalize")
    check_bool(self.single_exponential, "QNetwork.single_exponential")
    check_impl(self.moe_impl, self.single_exponential, "QNetwork.moe_impl", "QNetwork.single_exponential")
    for name in ("importance_weight", "load_balancing_weight"):
      w = getattr(self, name)
      check_range(w, f"QNetwork.{name}", 0)
    check_int(self.num_atoms, "QNetwork.num_atoms", meaning="1 = scalar Q-values, > 1 = C51 (Dopamine: 51)")
    check_choice(self.position_embedding, "QNetwork.position_embedding", tokens.POSITION_EMBEDDINGS)
    check_choice(self.pooling, "QNetwork.pooling", tokens.POOLINGS)
    for name in ("dueling", "noisy", "noisy_hidden", "noisy_experts", "noise_per_row", "deterministic",
                 "expert_means", "router_diagnostics", "diagnostics"):
      check_bool(getattr(self, name), f"QNetwork.{name}")
    check(not (self.noisy_experts and self.head == "top1"),
          "QNetwork.noisy_experts=True with head='top1': only the Soft-MoE head has noisy experts; set it False")
    check(not self.noise_per_row or self.has_noisy_layers,
          f"QNetwork.noise_per_row=True but the network draws no noise (noisy={self.noisy}, noisy_hidden="
          f"{self.noisy_hidden}, noisy_experts={self.noisy_experts}, head={self.head!r}); set it False")

  @nn.compact
  def __call__(self, obs: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    self.check_config()
    if obs.ndim == 2:
      check(obs.shape[1] >= 1, f"observations have shape {obs.shape}; need [batch, F] with F >= 1")
    else:
      check(obs.ndim == 4 and min(obs.shape[1:]) >= 1,
            f"observations have shape {obs.shape}; need [batch, H, W, C] with H, W, C >= 1 (images) or "
            "[batch, F] (vectors)")
    encoder = encoders.resolve_encoder(self.encoder, obs.ndim)
    check(obs.ndim == 4 or encoder == "mlp",
          f"QNetwork.encoder={self.encoder!r} needs images [batch, H, W, C]; vector observations {obs.shape} "
          "take encoder='mlp' (or 'auto')")
    features = encoders.make_encoder(encoder, tuple(self.mlp_features))(obs)
    activations = {"encoder": features}
    hidden, stats = HEADS.get(self.head)(self, features, encoder, activations)
    if not self.router_diagnostics:
      stats.pop("combine_spread", None)
    if self.diagnostics:
      activations["features"] = hidden
      stats = {**stats, **{ACTIVATIONS + k: v for k, v in activations.items()}}
    return self._q_head(hidden), stats

  def _tokens(self, features: jax.Array, encoder: str) -> jax.Array:
    """The encoder's features as tokens [b, m, d] for the MoE and token heads (``tokenizer``), plus the
    learned position embedding with ``position_embedding="learned"``."""
    tokenizer = self.tokenizer
    if tokenizer == "auto":
      tokenizer = "per_feat" if features.ndim == 2 else "per_conv"
    if tokenizer == "flatten":  # no tokenization: one token of everything (images or vectors)
      x = tokens.flatten(features)
    elif features.ndim == 2:  # vector features: one token per feature, each embedded
      check(tokenizer == "per_feat",
            f"QNetwork.tokenizer={self.tokenizer!r} needs image features; the {encoder!r} encoder's vector "
            "features take tokenizer='per_feat' (or 'auto'): one token per feature, or 'flatten'")
      x = tokens.PerFeatureEmbedding(self.embedding_size, name="embedding")(features)
    elif tokenizer == "per_conv":
      x = tokens.per_conv(features)
    elif tokenizer == "per_feat":
      x = tokens.per_feat(features)
    else:
      x = tokens.PerPatch(self.embedding_size, tuple(self.patch_size))(features)
    if self.position_embedding == "learned":
      x = tokens.PositionEmbedding(name="position_embedding")(x)
    return x

  def _q_head(self, hidden: jax.Array) -> jax.Array:
    """The output layer: DQN's ``Dense(num_actions)``, or Rainbow's head (atoms, dueling, noisy)."""
    if self.num_atoms == 1 and not self.dueling and not self.noisy:
      return nn.Dense(self.num_actions, kernel_init=_INIT)(hidden)
    logits = RainbowHead(self.num_actions, self.num_atoms, noisy=self.noisy, dueling=self.dueling,
                         deterministic=self.deterministic, factorised=self.noise_per_row, name="rainbow_head")(hidden)
    return logits[..., 0] if self.num_atoms == 1 else logits


def _pooled_features(net: QNetwork, features: jax.Array, encoder: str) -> jax.Array:
  """The encoder's features as the dense heads' input: flattened, or averaged over positions (``pooling``)."""
  check(net.pooling == "flatten" or features.ndim == 4,
        f"QNetwork.pooling={net.pooling!r} with head={net.head!r} needs image features to average over; "
        f"the {encoder!r} encoder's vector features have no positions (pooling='flatten')")
  return tokens.pool(features, net.pooling)


@HEADS.register("none")
def _no_head(net: QNetwork, features: jax.Array, encoder: str, activations: dict) -> tuple[jax.Array, dict]:
  """Dopamine's MinAtar network: conv -> flatten -> Q, no hidden layer."""
  del activations
  return _pooled_features(net, features, encoder), {}


@HEADS.register("dense")
def _dense_head(net: QNetwork, features: jax.Array, encoder: str, activations: dict) -> tuple[jax.Array, dict]:
  """The baseline: flatten (or GAP) -> ``Dense(width * width_multiplier)`` (noisy with ``noisy_hidden``) -> ReLU."""
  width = net.width * net.width_multiplier
  layer = (NoisyDense(width, deterministic=net.deterministic, factorised=net.noise_per_row) if net.noisy_hidden
           else nn.Dense(width, kernel_init=_INIT))
  hidden = nn.relu(layer(_pooled_features(net, features, encoder)))
  activations["penultimate"] = hidden
  return hidden, {}


@HEADS.register("softmoe")
def _soft_moe_head(net: QNetwork, features: jax.Array, encoder: str, activations: dict) -> tuple[jax.Array, dict]:
  """Tokens -> Soft MoE (Puigcerver et al. 2024; noisy experts with ``noisy_experts``) -> flatten (or GAP)."""
  del activations
  x = net._tokens(features, encoder)  # the tokenizer's layers first, as the network always built them
  noise = None
  if net.noisy_experts and not net.expert_means:  # one draw for every expert and slot
    noise = factorised_noise(net.make_rng("noise"), x.shape[-1], net.expert_hidden)
  y, stats = moe_modules.SoftMoE(
      net.num_experts, net.expert_hidden, net.capacity_factor,
      normalize=net.normalize, single_exponential=net.single_exponential, impl=net.moe_impl,
      noisy_experts=net.noisy_experts)(x, expert_noise=noise)
  return tokens.pool(y, net.pooling), stats


@HEADS.register("top1")
def _top1_head(net: QNetwork, features: jax.Array, encoder: str, activations: dict) -> tuple[jax.Array, dict]:
  """Tokens -> Top-1 MoE -> flatten (or GAP)."""
  del activations
  x = net._tokens(features, encoder)
  y, stats = moe_modules.Top1MoE(net.num_experts, net.expert_hidden, net.capacity_factor)(x)
  return tokens.pool(y, net.pooling), stats


@HEADS.register("token_dense")
def _token_dense_head(net: QNetwork, features: jax.Array, encoder: str, activations: dict) -> tuple[jax.Array, dict]:
  """Tokens -> a shared ``Dense(width * width_multiplier)`` per token, no router -> flatten (or GAP)."""
  x = net._tokens(features, encoder)
  y, activations["penultimate"] = token_heads.TokenDense(net.width * net.width_multiplier)(x)
  return tokens.pool(y, net.pooling), {}


@HEADS.register("token_mlp")
def _token_mlp_head(net: QNetwork, features: jax.Array, encoder: str, activations: dict) -> tuple[jax.Array, dict]:
  """Tokens -> one expert-sized MLP per token, no router -> flatten (or GAP)."""
  x = net._tokens(features, encoder)
  y, activations["penultimate"] = token_heads.TokenMLP(net.expert_hidden)(x)
  return tokens.pool(y, net.pooling), {}


def scaled_single_expert(num_experts: int, expert_hidden: int) -> dict[str, int]:
  """Network settings of one Soft-MoE expert scaled to the width of ``num_experts`` experts.

  Sokar et al., ICLR 2025, Fig. 1 ("a single, scaled, expert"): ``num_experts=1`` and the expert's
  hidden width ``num_experts * expert_hidden``, so that its MLP has the parameters of the n experts'
  MLPs but for the output biases (``d`` instead of ``n * d``); the router differs by the slot count
  (``m`` slots for one expert vs ``n * ceil(m / n)``).

  Args:
    num_experts: n, the number of experts whose width the one expert takes.
    expert_hidden: each of the n experts' hidden width.

  Returns:
    ``{"num_experts": 1, "expert_hidden": num_experts * expert_hidden}``: ``QNetwork`` keyword
    arguments (the ``network.*`` config keys) to merge over a Soft-MoE head's.
  """
  check_int(num_experts, "scaled_single_expert num_experts", meaning="the experts whose width the one expert takes")
  check_int(expert_hidden, "scaled_single_expert expert_hidden", meaning="hidden width of each of those experts")
  return {"num_experts": 1, "expert_hidden": num_experts * expert_hidden}


def count_params(tree: Any) -> int:
  """Number of scalars in a parameter pytree (arrays or ShapeDtypeStructs)."""
  return int(sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(tree)))


def param_count(obs_shape: Sequence[int], **network_kwargs) -> int:
  """Parameters of ``QNetwork(**network_kwargs)`` for observations of ``obs_shape`` [H, W, C] or [F]
  (shape-only: nothing is allocated; noisy layers count their means and noise scales)."""
  net = QNetwork(**network_kwargs).clone(deterministic=True, expert_means=True)  # no noise RNG needed
  shapes = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, *obs_shape), jnp.float32))
  return count_params(shapes["params"])
