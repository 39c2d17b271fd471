"""DQN's pieces as pure functions: the TD loss, epsilon-greedy acting, the epsilon schedule.

Mnih et al., "Human-level control through deep reinforcement learning", Nature 2015 (DQN);
van Hasselt et al., "Deep Reinforcement Learning with Double Q-learning", AAAI 2016 (Double
DQN), as Dopamine's ``JaxDQNAgent`` implements them (the agent of Obando-Ceron et al., ICML
2024). The agent loop itself is a ``jaxlab.train`` task (``jaxlab.tasks.dqn_minatar``): acting
and replay in the step's ``collect``, this loss as its ``loss_fn``, the target network in
``TrainState.extra``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab import errors
from jaxlab.contract import PER_SAMPLE
from jaxlab.errors import check
from jaxlab.registry import Registry
from jaxlab.rl import diagnostics, distributional

QFn = Callable[[Any, jax.Array], tuple[jax.Array, dict[str, jax.Array]]]  # (params, obs) -> (q, stats)


def linear_epsilon(frame: jax.Array, decay_frames: int, warmup_frames: int, end: float) -> jax.Array:
  r"""Dopamine's ``linearly_decaying_epsilon``: 1 during warm-up, then linear to ``end``.

  .. math::
    \epsilon(t) = \epsilon_e + \mathrm{clip}\Big((1 - \epsilon_e)
      \frac{T_d + T_w - t}{T_d},\ 0,\ 1 - \epsilon_e\Big)

  ``decay_frames`` must be an int >= 1 (0 would divide 0 by 0 at the end of warm-up: NaN),
  ``warmup_frames`` an int >= 0 and ``end`` in [0, 1].
  """
  errors.check_int(decay_frames, "epsilon decay_frames", 1, "1 = straight to the end value")
  errors.check_int(warmup_frames, "epsilon warmup_frames", 0)
  errors.check_probability(end, "epsilon end")
  left = decay_frames + warmup_frames - frame.astype(jnp.float32)
  return end + jnp.clip((1.0 - end) * left / decay_frames, 0.0, 1.0 - end)


def zero_epsilon(frame: jax.Array, decay_frames: int, warmup_frames: int, end: float) -> jax.Array:
  """Dopamine's ``zero_epsilon`` (full_rainbow_agent.py:52-55 @ 5873f54): greedy from the first step, warm-up
  included (noisy nets explore alone); the arguments of :func:`linear_epsilon`, unused."""
  del decay_frames, warmup_frames, end
  return jnp.zeros(jnp.shape(frame), jnp.float32)


#: Exploration schedules by name (config ``dqn.epsilon_schedule``), each ``(frame, decay_frames,
#: warmup_frames, end) -> epsilon``.
EPSILON_SCHEDULES: Registry = Registry("epsilon schedule")
EPSILON_SCHEDULES.register("linear")(linear_epsilon)
EPSILON_SCHEDULES.register("zero")(zero_epsilon)


def epsilon_greedy(q_values: jax.Array, rng: jax.Array, epsilon: jax.Array) -> jax.Array:
  """Actions ``int32 [N]`` from ``q_values [N, A]``: random with probability ``epsilon``.

  A Python-number ``epsilon`` must be in [0, 1]; a traced one cannot be checked (NaN acts greedily).
  """
  check(jnp.ndim(q_values) == 2, f"q_values of shape {jnp.shape(q_values)}; must be [N, num_actions]")
  if not isinstance(epsilon, (jax.Array, np.ndarray)):  # an array may be traced: not checked
    errors.check_probability(epsilon, "epsilon")
  k_explore, k_action = jax.random.split(rng)
  n, a = q_values.shape
  explore = jax.random.uniform(k_explore, (n,)) < epsilon
  random_actions = jax.random.randint(k_action, (n,), 0, a)
  return jnp.where(explore, random_actions, jnp.argmax(q_values, axis=-1)).astype(jnp.int32)


AUX_LOSSES = ("importance_loss", "load_balancing_loss")  # the Top-1 MoE's (jaxlab.moe.top1)


def squared_error(error: jax.Array) -> jax.Array:
  """Dopamine's ``mse_loss``: ``(target - prediction) ** 2``, not halved
  (dopamine/jax/losses.py:41-43 @ 5873f54)."""
  return jnp.square(error)


def huber_error(error: jax.Array) -> jax.Array:
  """Dopamine's ``huber_loss`` with :math:`\\delta = 1` (dopamine/jax/losses.py @ 5873f54; ``optax.huber_loss``)."""
  return optax.huber_loss(error, delta=1.0)


#: The TD losses by name (``td_loss``'s ``loss``, config ``dqn.loss``): TD errors -> per-transition losses.
TD_LOSSES: Registry = Registry("TD loss")
TD_LOSSES.register("mse")(squared_error)
TD_LOSSES.register("huber")(huber_error)
#: The TD loss names (``dqn.loss``), sorted.
LOSSES = tuple(TD_LOSSES)


def routing_metrics(stats: dict[str, jax.Array]) -> dict[str, jax.Array]:
  """A network's routing statistics as scalar metrics named ``moe/...``.

  Scalars keep their name. A vector (e.g. ``expert_load [n]``) is logged per element,
  ``moe/expert_load/0 .. n-1``: its mean would always be 1/n. The load also gets two balance
  summaries: ``moe/expert_load_entropy`` (entropy / log n: 1 = balanced, 0 = one expert) and
  ``moe/expert_load_max_share`` (n * max load: 1 = balanced, n = one expert; finite even when an
  expert gets nothing, unlike a max/min ratio).
  """
  out: dict[str, jax.Array] = {}
  for k, v in stats.items():
    if jnp.ndim(v) == 0:
      out[f"moe/{k}"] = v
    elif jnp.ndim(v) == 1:
      out.update({f"moe/{k}/{i}": v[i] for i in range(v.shape[0])})
  load = stats.get("expert_load")
  if load is not None and jnp.ndim(load) == 1:
    n = load.shape[0]
    share = load / jnp.maximum(jnp.sum(load), 1e-30)
    entropy = -jnp.sum(share * jnp.log(jnp.maximum(share, 1e-30)))
    out["moe/expert_load_entropy"] = entropy / (math.log(n) if n > 1 else 1.0)
    out["moe/expert_load_max_share"] = n * jnp.max(share)
  return out


def td_loss(q_fn: QFn, params: Any, target_params: Any, batch: Any, *, gamma: float,
            double_dqn: bool = False, loss: str = "mse",
            aux_weights: Mapping[str, float] | None = None,
            log_routing: bool = True, support: jax.Array | None = None,
            target_q_fn: QFn | None = None,
            per_sample: bool = False, log_q_spread: bool = False) -> tuple[jax.Array, dict[str, jax.Array]]:
  r"""One-step TD loss on a replay batch (``obs, action, reward, discount, next_obs``).

  .. math::
    y = r + \gamma\, d\, Q_{\bar\theta}(s', a^*), \quad
    a^* = \arg\max_a Q_{\bar\theta}(s', a)\ \text{(DQN)} \text{ or }
          \arg\max_a Q_\theta(s', a)\ \text{(Double DQN)}, \quad
    L = \mathrm{mean}\ \ell(Q_\theta(s, a) - y) + \sum_k w_k\, \mathrm{aux}_k

  with :math:`d = 0` at terminal steps and :math:`\ell` the squared error :math:`e^2`
  (``"mse"``, the default of Dopamine's ``JaxDQNAgent`` and ``DQNMoEAgent``: ``loss_type='mse'``,
  dopamine/jax/agents/dqn/dqn_agent.py:281, labs/moes/agents/dqn_moe_agent.py:59; its
  ``mse_loss`` is not halved) or Huber with :math:`\delta = 1` (``"huber"``, Dopamine's
  ``huber_loss``). The Q-values may come in a lower precision (a bfloat16 network); the target, the
  TD error and the loss are computed in float32 from them. A batch with a ``weight`` field (float
  [B], e.g. the frame replay's :class:`~jaxlab.rl.StackedTransition`) averages over
  the weighted transitions, :math:`\sum_i w_i \ell_i / \max(\sum_i w_i, 1)`, so a weight-0 row (a
  transition that crosses an episode boundary) contributes nothing; without it every row weighs 1.
  ``aux_weights`` maps the network's auxiliary losses (``AUX_LOSSES``, returned
  by the Top-1 MoE in its stats) to weights :math:`w_k \ge 0`; Dopamine's ``DQNMoEAgent`` adds
  its weighted auxiliary losses to the TD loss the same way (dqn_moe_agent.py:88-100).

  Returns the loss and metrics: ``td_loss`` (the TD part), ``aux_loss`` (the weighted auxiliary
  part, with auxiliary losses), mean Q, TD error and the network's routing statistics
  (``routing_metrics``). ``log_routing=False`` leaves the routing statistics out (the auxiliary
  losses stay): a Soft MoE's statistics (softmaxes and entropies over every token and slot of the
  batch) cost ~18% of a MinAtar update on XLA:CPU, so a jitted agent can log them from its acting
  forward pass instead (as the ``dqn_minatar`` task does).

  Distributional (C51, Bellemare et al. 2017): with a ``support`` [N], ``q_fn`` returns logits
  [B, A, N] (``QNetwork(num_atoms=N)``) and the TD part is the mean (weighted as above)
  cross-entropy :func:`~jaxlab.rl.c51_loss` against
  :func:`~jaxlab.rl.c51_target` with discount :math:`\gamma d`, the next action
  chosen by the target network's expected Q or, with ``double_dqn``, the online network's (as
  Dopamine's ``JaxFullRainbowAgent``); ``loss`` is then unused. ``q_mean`` and ``td_abs_error``
  are those of the expected values :math:`\sum_i z_i p_i`.

  n-step returns: pass a batch whose ``reward`` is the n-step return and ``discount`` the product
  of the n steps' discounts, with ``gamma`` = :math:`\gamma^n` (the ``dqn_minatar`` task's
  ``dqn.update_horizon``).

  ``log_q_spread=True`` adds ``jaxlab.rl.diagnostics.q_spread`` of the online Q-values on the
  batch (expected values under C51): ``q_spread_states`` and ``q_spread_actions``.

  ``target_q_fn`` (default ``q_fn``) evaluates :math:`s'` for both the target network and the
  Double-DQN selector: a noisy network's task binds another noise key into it than into ``q_fn``,
  as Dopamine's full Rainbow draws one key for the online pass and another for the target's.

  Prioritised replay (Schaul et al. 2016, as Dopamine's ``JaxFullRainbowAgent``): a batch with an
  ``importance`` field (float [B], the loss weights :math:`w_i` of Eq. 2,
  :func:`~jaxlab.rl.priorities.importance_weights`) weights each transition's TD loss,
  :math:`\mathrm{mean}_i\, w_i \ell_i` (with ``weight``: :math:`\sum_i m_i w_i \ell_i / \max(\sum_i m_i, 1)`),
  as Dopamine's ``jnp.mean(loss_multipliers * loss)``
  (dopamine/jax/agents/full_rainbow/full_rainbow_agent.py:172 @ 5873f54); ``q_mean`` and
  ``td_abs_error`` stay unweighted. ``per_sample=True`` adds the unweighted per-transition TD
  loss :math:`\ell_i` (float32 [B]; the cross-entropy under C51) to the metrics as
  ``metrics[jaxlab.contract.PER_SAMPLE] = {"td_loss": ...}``, which the train step hands to the
  task's ``update_data`` instead of logging it: the new priorities
  :math:`\sqrt{\ell_i + 10^{-10}}` (Eq. 1 with :math:`\alpha = 0.5`; full_rainbow_agent.py:190-191,
  411-422).

  ``batch.action`` must have an integer dtype and shape [B] (checked at trace time). A concrete
  action outside ``[0, num_actions)`` is refused; a traced one cannot be checked, and makes its
  ``Q(s, a)``, hence the loss, NaN (negative ones too, which indexing would otherwise wrap to a
  valid action), so the trainer's non-finite guard skips the step and counts it in
  ``nonfinite_skipped``. A Python-number ``gamma`` must be in [0, 1].
  """
  errors.check_choice(loss, "loss", LOSSES)
  elementwise = TD_LOSSES.get(loss)
  if not isinstance(gamma, (jax.Array, np.ndarray)):  # an array may be traced: not checked
    errors.check_probability(gamma, "gamma", "the discount factor")
  errors.check_bool(double_dqn, "double_dqn")
  aux_weights = dict(aux_weights or {})
  for name, w in aux_weights.items():
    check(name in AUX_LOSSES, f"auxiliary loss {name!r}; choose among {AUX_LOSSES}")
    check(isinstance(w, (int, float)) and math.isfinite(w) and w >= 0,
          f"{name} weight={w!r}; must be a finite number >= 0 (0 = off)")
  obs, next_obs = batch.obs, batch.next_obs
  target_q_fn = q_fn if target_q_fn is None else target_q_fn
  mean = _batch_mean(getattr(batch, "weight", None))
  td_mean = _importance_mean(mean, getattr(batch, "importance", None))
  if support is not None:
    value, q_all, q_taken, error, stats = _c51_values(q_fn, target_q_fn, params, target_params, batch, gamma,
                                                      double_dqn, support)
    td = td_mean(value)
    metrics = {"td_loss": td, "q_mean": mean(q_taken), "td_abs_error": mean(jnp.abs(error))}
    if log_q_spread:
      metrics.update(diagnostics.q_spread(jax.lax.stop_gradient(q_all)))
    if per_sample:
      metrics[PER_SAMPLE] = {"td_loss": value}
    return _with_aux(td, metrics, stats, aux_weights, log_routing)
  q, stats = q_fn(params, obs)
  q_taken = _q_of_actions(q, batch.action).astype(jnp.float32)
  q_next_target, _ = target_q_fn(target_params, next_obs)
  if double_dqn:
    q_next_online, _ = target_q_fn(params, next_obs)
    best = jnp.argmax(q_next_online, axis=-1)
    next_value = jnp.take_along_axis(q_next_target, best[:, None], axis=1)[:, 0]
  else:
    next_value = jnp.max(q_next_target, axis=-1)
  reward, discount = batch.reward.astype(jnp.float32), batch.discount.astype(jnp.float32)
  target = jax.lax.stop_gradient(reward + gamma * discount * next_value.astype(jnp.float32))
  error = q_taken - target
  value = elementwise(error)
  td = td_mean(value)
  metrics = {"td_loss": td, "q_mean": mean(q_taken), "td_abs_error": mean(jnp.abs(error))}
  if log_q_spread:
    metrics.update(diagnostics.q_spread(jax.lax.stop_gradient(q)))
  if per_sample:
    metrics[PER_SAMPLE] = {"td_loss": value}
  return _with_aux(td, metrics, stats, aux_weights, log_routing)


def _c51_values(q_fn: QFn, target_q_fn: QFn, params: Any, target_params: Any, batch: Any, gamma: Any,
                double_dqn: bool, support: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, dict]:
  """Per-transition C51 cross-entropy, the expected Q-values [B, A], expected ``Q(s, a)``, its error and the
  network's stats."""
  logits, stats = q_fn(params, batch.obs)
  check(jnp.ndim(logits) == 3 and logits.shape[-1] == jnp.shape(support)[0],
        f"the network's output of shape {jnp.shape(logits)}; a support of {jnp.shape(support)[0]} atoms needs "
        "logits [batch, num_actions, num_atoms] (QNetwork's num_atoms)")
  q_all = distributional.expected_q(logits, support)
  q_taken = _q_of_actions(q_all, batch.action)  # checks the actions
  action = jnp.clip(jnp.asarray(batch.action, jnp.int32), 0, logits.shape[1] - 1)
  next_logits, _ = target_q_fn(target_params, batch.next_obs)
  selector = distributional.expected_q(target_q_fn(params, batch.next_obs)[0], support) if double_dqn else None
  discount = gamma * batch.discount.astype(jnp.float32)
  target = distributional.c51_target(next_logits, batch.reward, discount, support, selector)
  value = jnp.where(jnp.isnan(q_taken), jnp.nan, distributional.c51_loss(logits, action, target))
  return value, q_all, q_taken, q_taken - jnp.sum(target * support, axis=-1), stats


def _with_aux(td: jax.Array, metrics: dict, stats: dict, aux_weights: dict,
              log_routing: bool) -> tuple[jax.Array, dict[str, jax.Array]]:
  """The TD part plus the weighted auxiliary losses, and the metrics (see :func:`td_loss`)."""
  aux = jnp.zeros((), td.dtype)
  for name, w in aux_weights.items():
    if w:
      check(name in stats, f"{name} weight={w!r} but the network returns no {name!r} "
            "(only the Top-1 MoE head has auxiliary losses)")
      aux = aux + w * stats[name]
  if any(name in stats for name in AUX_LOSSES):
    metrics["aux_loss"] = aux
  if log_routing:
    metrics.update(routing_metrics(stats))
  else:
    metrics.update(routing_metrics({k: v for k, v in stats.items() if k in AUX_LOSSES}))
  return td + aux, metrics


def _batch_mean(weight: Any) -> Callable[[jax.Array], jax.Array]:
  """The plain batch mean, or the ``weight``-weighted one (see :func:`td_loss`)."""
  if weight is None:
    return jnp.mean
  check(jnp.ndim(weight) == 1, f"batch.weight of shape {jnp.shape(weight)}; must be [batch], one per transition")
  total = jnp.maximum(jnp.sum(weight), 1.0)
  return lambda x: jnp.sum(weight * x) / total


def _importance_mean(mean: Callable[[jax.Array], jax.Array], importance: Any) -> Callable[[jax.Array], jax.Array]:
  """``mean`` of the losses times prioritised replay's loss weights, or ``mean`` without them."""
  if importance is None:
    return mean
  check(jnp.ndim(importance) == 1, f"batch.importance of shape {jnp.shape(importance)}; must be [batch], "
        "one loss weight per transition")
  return lambda x: mean(importance.astype(jnp.float32) * x)


def _q_of_actions(q: jax.Array, action: Any) -> jax.Array:
  """``Q[i, action[i]]``; NaN where the (traced) action is out of range (see :func:`td_loss`)."""
  dtype = jnp.result_type(action)
  check(jnp.issubdtype(dtype, jnp.integer),
        f"batch.action of dtype {dtype}; must be an integer dtype (a float action would be truncated "
        "to another action)")
  batch_size, num_actions = q.shape
  check(jnp.shape(action) == (batch_size,),
        f"batch.action of shape {jnp.shape(action)}; must be [{batch_size}], one per transition")
  if not isinstance(action, jax.core.Tracer):
    values = np.asarray(action)  # numpy: a concrete array closed over by jit is not traced
    low, high = int(values.min()), int(values.max())
    check(low >= 0 and high < num_actions, f"batch.action in [{low}, {high}]; must be in [0, {num_actions})")
  action = jnp.asarray(action, jnp.int32)
  valid = (action >= 0) & (action < num_actions)
  taken = jnp.take_along_axis(q, jnp.clip(action, 0, num_actions - 1)[:, None], axis=1)[:, 0]
  return jnp.where(valid, taken, jnp.nan)


def agent_step_sync(period: int, steps_per_update: int, offset: int = 0) -> Callable[[Any], Any]:
  """``update_extra``: target params <- params after the update during which the agent-step count
  ``offset + step * steps_per_update`` reaches a multiple of ``period`` agent steps.

  Dopamine syncs when ``training_steps % target_update_period == 0``, checked at every agent step
  once learning has begun (dqn_agent.py:564-601 @ 5873f54; rainbow_100k_moe_agent.py:225-234 for
  DER); ``offset`` (the warm-up's agent steps) puts the syncs on those agent steps rather than on
  multiples of the update count. With
  ``offset`` 0 and ``steps_per_update`` dividing ``period`` this is :func:`periodic_sync` of
  ``period // steps_per_update``.
  """
  errors.check_int(period, "target update period")
  errors.check_int(steps_per_update, "agent steps per update")
  errors.check_int(offset, "agent steps before the first update", 0)

  def sync(state):
    after = offset + state.step * steps_per_update
    take = after // period > (after - steps_per_update) // period
    return jax.tree.map(lambda t, p: jnp.where(take, p, t), state.extra, state.params)
  return sync


def periodic_sync(period: int) -> Callable[[Any], Any]:
  """``update_extra`` for ``make_train_step``: target params <- params every ``period`` updates."""
  errors.check_int(period, "target update period")

  def sync(state):
    take = state.step % period == 0
    return jax.tree.map(lambda t, p: jnp.where(take, p, t), state.extra, state.params)
  return sync
