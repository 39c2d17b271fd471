"""Preemption and Ctrl-C: save a checkpoint at the current step and stop cleanly.

Cloud TPU/GPU schedulers send SIGTERM before taking a machine back; a person at the terminal
presses Ctrl-C (SIGINT). On one process a signal handler sets a flag that the trainer checks after
each call, so both save the step they reached instead of losing the work since the last
checkpoint. A second Ctrl-C aborts at once (KeyboardInterrupt, nothing saved). On many processes
orbax's ``reached_preemption`` (JAX's coordination service) makes every process agree on the
step, so that all of them save the same one; there the handlers are not installed, and JAX's
preemption service records the SIGTERM in the coordination service. A process that sees that
record and has not finished its loop after the peer timeout ends with one line
(``jaxlab.peers.watch_preemption``): a peer that is gone or stuck would keep it waiting in a
collective, or in the save that needs every process, until a SIGKILL.

The handlers live only inside the ``with`` block (the trainer's loop): afterwards the previous
ones are back, so a notebook keeps its own Ctrl-C. They are installed from the main thread only
(Python allows no other), and SIGINT is left alone where it is ignored (a background job).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

import jax

from jaxlab import peers
from jaxlab.startup_interrupt import raise_if_pending

SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}


class PreemptionWatcher:
  """Context manager; ``should_stop(step)`` is True once SIGTERM or a first SIGINT arrived.

  Args:
    checkpointer: the run's ``Checkpointer`` (its ``reached_preemption`` on many processes).
    signals: the signals that ask for a save-and-stop.
  """

  def __init__(self, checkpointer: Any, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
    self._ckpt = checkpointer
    self._signals = signals
    self._flag = threading.Event()
    self._previous: dict[int, Any] = {}
    self.received: int | None = None  # the first signal that asked to stop
    self._interrupts = 0

  def __enter__(self) -> "PreemptionWatcher":
    raise_if_pending()  # a Ctrl-C the CLI deferred during start-up: stop before the first step
    if jax.process_count() > 1:  # a SIGTERM while a peer is gone ends this process (jaxlab.peers)
      directory = getattr(self._ckpt, "directory", None)
      peers.watch_preemption(os.path.dirname(directory) if directory else None)
    # Many processes: JAX's preemption notifier owns SIGTERM; handlers install on the main thread only.
    if jax.process_count() == 1 and threading.current_thread() is threading.main_thread():
      for sig in self._signals:
        current = signal.getsignal(sig)
        if current is None or (sig == signal.SIGINT and current is signal.SIG_IGN):
          continue  # a handler set outside Python (cannot be restored), or Ctrl-C deliberately ignored
        self._previous[sig] = signal.signal(sig, self._on_signal)
    return self

  def _on_signal(self, signum, frame) -> None:
    if signum == signal.SIGINT:
      self._interrupts += 1
      if self._interrupts > 1:  # the second Ctrl-C: stop at once
        previous = self._previous.get(signal.SIGINT)
        if callable(previous):  # Python's default handler, or a notebook's: it raises KeyboardInterrupt
          previous(signum, frame)
        raise KeyboardInterrupt
    if self.received is None:
      self.received = signum
    if signum == signal.SIGINT:
      sys.stderr.write("\njaxlab: Ctrl-C: stopping after this step with a checkpoint; rerun with the same "
                       "workdir to resume (Ctrl-C again stops at once, without saving)\n")
      sys.stderr.flush()
    self._flag.set()

  def __exit__(self, *exc) -> None:
    if jax.process_count() > 1:
      peers.stand_down()
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous = {}

  @property
  def notified(self) -> bool:
    return self._flag.is_set()

  @property
  def reason(self) -> str | None:
    """``"SIGTERM"``, ``"SIGINT"`` or None: what asked this process to stop."""
    return SIGNAL_NAMES.get(self.received, str(self.received)) if self.received is not None else None

  def should_stop(self, step: int) -> bool:
    if jax.process_count() > 1:  # all processes must stop at the same step
      return bool(self._ckpt.reached_preemption(step))
    return self._flag.is_set()
