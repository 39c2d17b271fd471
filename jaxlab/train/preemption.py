"""Preemption: save a checkpoint at the current step and stop cleanly.

Cloud TPU/GPU schedulers send SIGTERM before taking a machine back. On one process a signal
handler sets a flag that the trainer checks after each call; on many processes orbax's
``reached_preemption`` (JAX's coordination service) makes every process agree on the step, so
that all of them save the same one.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import jax


class PreemptionWatcher:
  """Context manager; ``should_stop(step)`` is True once a preemption notice arrived."""

  def __init__(self, checkpointer: Any, signals: tuple[int, ...] = (signal.SIGTERM,)):
    self._ckpt = checkpointer
    self._signals = signals
    self._flag = threading.Event()
    self._previous: dict[int, Any] = {}

  def __enter__(self) -> "PreemptionWatcher":
    # Many processes: JAX's preemption notifier owns SIGTERM; handlers install on the main thread only.
    if jax.process_count() == 1 and threading.current_thread() is threading.main_thread():
      for sig in self._signals:
        self._previous[sig] = signal.signal(sig, self._on_signal)
    return self

  def _on_signal(self, signum, frame) -> None:
    del signum, frame
    self._flag.set()

  def __exit__(self, *exc) -> None:
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)

  @property
  def notified(self) -> bool:
    return self._flag.is_set()

  def should_stop(self, step: int) -> bool:
    if jax.process_count() > 1:  # all processes must stop at the same step
      return bool(self._ckpt.reached_preemption(step))
    return self._flag.is_set()
