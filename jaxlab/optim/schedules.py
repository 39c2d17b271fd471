"""Learning-rate schedules by name; ``jaxlab.optim.config`` passes the result as the learning rate."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.errors import InputError, check, is_traced
from jaxlab.registry import Registry

#: Learning-rate schedules by name (``config.optimizer.schedule``).
SCHEDULES: Registry = Registry("schedule")


@SCHEDULES.register("constant")
def constant(learning_rate: float, num_steps: int) -> Any:
  del num_steps
  return learning_rate


@SCHEDULES.register("cosine")
def cosine(learning_rate: float, num_steps: int, alpha: float = 0.0) -> optax.Schedule:
  return optax.cosine_decay_schedule(learning_rate, decay_steps=num_steps, alpha=alpha)


@SCHEDULES.register("warmup_cosine")
def warmup_cosine(learning_rate: float, num_steps: int, warmup_steps: int = 100,
                  end_value: float = 0.0) -> optax.Schedule:
  return optax.warmup_cosine_decay_schedule(0.0, learning_rate, min(warmup_steps, num_steps),
                                            num_steps, end_value=end_value)


def _onecycle_phases(num_steps: int, pct_start: float) -> tuple[float, float]:
  """torch's two phase ends (float steps): warm-up ends at pct_start * T - 1, annealing at T - 1."""
  check(isinstance(pct_start, (int, float)) and 0 <= pct_start <= 1,
        f"optimizer.schedule_kwargs.pct_start={pct_start!r} must be in [0, 1]")
  end_up, end_down = float(pct_start * num_steps) - 1, float(num_steps - 1)
  check(end_up != 0,
        f"optimizer.schedule_kwargs.pct_start={pct_start} with num_steps={num_steps} puts the one-cycle peak at "
        "step 0 (pct_start * num_steps = 1), where torch's OneCycleLR divides by zero; change pct_start or num_steps")
  return end_up, end_down


def _anneal(start: float, end: float, done: Any, left: Any, strategy: str) -> Any:
  """torch's anneal from ``start`` to ``end`` at pct = ``done`` (``left`` = 1 - pct, computed apart).

  cos: torch's end + (start - end) (cos(pi pct) + 1) / 2 written as start sin^2(pi left / 2) +
  end sin^2(pi pct / 2): equal in real arithmetic, but a sum of two non-negative terms, so float32
  keeps a few ulps of relative accuracy where the lr is 1e-4 of its peak (torch's form, in float32,
  would lose it to cancellation: 1e-3 - (1e-3 - 1e-7)).
  """
  if strategy == "cos":
    return start * jnp.sin(0.5 * math.pi * left) ** 2 + end * jnp.sin(0.5 * math.pi * done) ** 2
  return start * left + end * done


def onecycle_values(num_steps: int, up: tuple[float, float], down: tuple[float, float], pct_start: float,
                    anneal_strategy: str = "cos") -> optax.Schedule:
  """``count -> value`` of torch's two-phase ``OneCycleLR`` (torch/optim/lr_scheduler.py, torch 2.0).

  ``up`` = (start, peak) over steps [0, pct_start * T - 1], ``down`` = (peak, end) from there to
  step T - 1, T = ``num_steps``; count k is the k-th ``optimizer.step()`` (0-based), the value torch
  has set when that step runs (the scheduler's ``__init__`` sets step 0's, ``scheduler.step()``
  the next). Counts past T - 1 keep the end value (torch raises there).
  """
  check(anneal_strategy in ("cos", "linear"),
        f"optimizer.schedule_kwargs.anneal_strategy={anneal_strategy!r}; allowed: 'cos', 'linear'")
  end_up, end_down = _onecycle_phases(num_steps, pct_start)

  def schedule(count):
    k = jnp.minimum(jnp.asarray(count, jnp.float32), end_down)
    # torch picks the first phase while k <= end_up, and starts the second phase at end_up (not + 1)
    warm = k <= end_up
    # end_down == end_up (pct_start = 1) leaves no second phase: its 0/0 is never selected
    length = (end_down - end_up) or 1.0
    rise = _anneal(up[0], up[1], k / end_up, (end_up - k) / end_up, anneal_strategy)
    fall = _anneal(down[0], down[1], (k - end_up) / length, (end_down - k) / length, anneal_strategy)
    return jnp.where(warm, rise, fall)
  return schedule


@SCHEDULES.register("onecycle")
def onecycle(learning_rate: float, num_steps: int, pct_start: float = 0.3, div_factor: float = 25.0,
             final_div_factor: float = 1e4, anneal_strategy: str = "cos") -> optax.Schedule:
  """torch's ``OneCycleLR(max_lr=learning_rate, total_steps=num_steps, ...)`` learning rate, same defaults.

  lr goes from ``learning_rate / div_factor`` to ``learning_rate`` at step pct_start * T - 1, then
  to ``learning_rate / div_factor / final_div_factor`` at step T - 1. DPOT uses div_factor =
  final_div_factor = 1e4 and pct_start = warmup_epochs / epochs = 0.2 (thu-ml/DPOT @ dcd2f9a:
  train_temporal.py:140 and its configs/pretrain_*.yaml). ``optax.cosine_onecycle_schedule`` is the same curve with the peak at
  step int(pct_start * T) and the end at T, i.e. one step later in each phase; this follows torch.
  ``optimizer.cycle_momentum`` cycles Adam's b1 with it, as torch's ``cycle_momentum=True`` does.
  """
  check(div_factor > 0 and final_div_factor > 0,
        f"optimizer.schedule_kwargs div_factor={div_factor} and final_div_factor={final_div_factor} must be > 0")
  initial = learning_rate / div_factor
  return onecycle_values(num_steps, (initial, learning_rate), (learning_rate, initial / final_div_factor),
                         pct_start, anneal_strategy)


def onecycle_momentum(num_steps: int, base_momentum: float = 0.85, max_momentum: float = 0.95,
                      pct_start: float = 0.3, anneal_strategy: str = "cos") -> optax.Schedule:
  """torch's ``OneCycleLR(cycle_momentum=True)`` momentum (Adam's beta1): max -> base -> max, inverse to the lr."""
  check(0 <= base_momentum <= max_momentum < 1,
        f"optimizer.cycle_momentum needs 0 <= base_momentum={base_momentum} <= max_momentum={max_momentum} < 1")
  return onecycle_values(num_steps, (max_momentum, base_momentum), (base_momentum, max_momentum),
                         pct_start, anneal_strategy)


#: Steps at which :func:`check_schedule_nonnegative` evaluates a schedule by default.
CHECKED_STEPS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


def check_schedule_nonnegative(schedule: Callable[[Any], Any], name: str,
                               steps: Sequence[int] = CHECKED_STEPS) -> None:
  """InputError if a learning-rate ``schedule`` is negative (or not finite) at any of ``steps``.

  A negative learning rate does gradient ascent without a word, so a transform built with a
  schedule checks it once, at construction, at a few concrete steps (a handful of tiny host
  computations). A schedule that cannot run on a concrete step, or whose value is traced (built
  inside ``jit``), is not checked.

  Args:
    schedule: ``count -> learning rate``, called with int32 scalars as optax calls it.
    name: the argument it was passed as, for the message (e.g. ``"momo: learning_rate"``).
    steps: the steps to evaluate.

  Raises:
    InputError: ``"<name> (a schedule) gives -0.1 at step 1000; must be finite and >= 0 ..."``.
  """
  for step in steps:
    try:
      value = schedule(jnp.asarray(step, jnp.int32))
    except Exception:  # noqa: BLE001 -- a schedule that only runs traced: optax calls it in update as before
      return
    if is_traced(value):
      return
    values = np.asarray(value, dtype=np.float64)
    bad = ~(np.isfinite(values) & (values >= 0))
    if bad.any():
      raise InputError(f"{name} (a schedule) gives {values[bad].flat[0]:g} at step {step}; must be finite and >= 0 "
                       "at every step (a negative learning rate ascends the loss)")
