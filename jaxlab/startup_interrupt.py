"""Ctrl-C before training starts: remembered, and acted on at the next safe point.

While JAX initialises, a task builds and the first program compiles, Python's default SIGINT
handler raises ``KeyboardInterrupt`` wherever the main thread is, also inside a callback from C++
(XLA's gc callback swallows it and the run goes on) or in a native call that orbax's and XLA's
threads share (the interpreter can then crash at exit). The CLI installs :func:`defer` before it
imports anything heavy: a first Ctrl-C only sets a flag, which the CLI and the trainer read from
plain Python code (:func:`raise_if_pending`) before the training loop, whose own handler takes over
there (``jaxlab.train.preemption``). A second Ctrl-C raises at once, as during training.
"""

from __future__ import annotations

import signal
import threading

_PENDING = threading.Event()


def _on_sigint(signum, frame) -> None:
  del signum, frame
  if _PENDING.is_set():  # the second Ctrl-C: stop at once
    raise KeyboardInterrupt
  _PENDING.set()


def defer() -> None:
  """Makes a first Ctrl-C set a flag instead of raising, until the trainer's handler takes over.

  Only Python's default handler is replaced, from the main thread: an ignored SIGINT (a background
  job) and a notebook's own handler stay as they are.
  """
  if (threading.current_thread() is threading.main_thread()
      and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, _on_sigint)


def pending() -> bool:
  """Returns:
    whether a Ctrl-C arrived since :func:`defer` and was not acted on yet.
  """
  return _PENDING.is_set()


def raise_if_pending() -> None:
  """Raises ``KeyboardInterrupt`` (from this plain Python frame) if a deferred Ctrl-C arrived."""
  if _PENDING.is_set():
    raise KeyboardInterrupt
