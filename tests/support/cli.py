"""jaxlab's commands run as a user runs them: a fresh Python process on the machine's real devices.

Every test that starts ``python -m jaxlab.main`` (or another jaxlab command, a guide's shell block,
a worker script) goes through :class:`Cli`, the ``cli`` fixture of ``tests/conftest.py``, so all of
them see one environment, :func:`user_env`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_DEVICE_COUNT = re.compile(r"\s*--xla_force_host_platform_device_count=\S*")


def user_env(**changes: str | None) -> dict[str, str]:
  """This process's environment as a user's shell has it for a jaxlab command.

  * jaxlab is this checkout's (``REPO`` first on ``PYTHONPATH``) and a guide's ``python`` is this
    interpreter (its folder first on ``PATH``);
  * the machine's real devices: the suite's 8 virtual CPU devices are taken out of ``XLA_FLAGS``;
    its other flags stay (the suite's compile settings, ``tests/conftest.py``), so that what the
    command compiles is found in, and added to, the suite's persistent compilation cache
    (``JAX_COMPILATION_CACHE_DIR``, inherited);
  * ``changes`` last: a value sets the variable, ``None`` removes it.
  """
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH", "")) if p)
  env["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), env.get("PATH", "")) if p)
  env["XLA_FLAGS"] = _DEVICE_COUNT.sub("", env.get("XLA_FLAGS", "")).strip()
  for name, value in changes.items():
    if value is None:
      env.pop(name, None)
    else:
      env[name] = value
  return env


class Cli:
  """Runs commands in :func:`user_env` (``env`` adds to it), from the repository unless ``cwd`` is given;
  output is captured as text and each run has a timeout (seconds)."""

  def main(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """``python -m jaxlab.main ARGS``."""
    return self.module("jaxlab.main", *args, **kwargs)

  def module(self, name: str, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """``python -m NAME ARGS`` (``jaxlab.report``, ``jaxlab.pde.data``, ...)."""
    return self.run([sys.executable, "-m", name, *args], **kwargs)

  def bash(self, script: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """A shell block (a guide's, as written) run by ``bash -e``."""
    return self.run(["bash", "-e", "-c", script], **kwargs)

  def run(self, command: Sequence[str], *, cwd: Any = REPO, env: dict[str, str | None] | None = None,
          timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess:
    """Any command to its end."""
    return subprocess.run(list(command), cwd=str(cwd), env=user_env(**(env or {})), capture_output=True, text=True,
                          timeout=timeout, check=check)

  def popen(self, command: Sequence[str], *, cwd: Any = REPO, env: dict[str, str | None] | None = None,
            **kwargs: Any) -> subprocess.Popen:
    """Any command started, for a test that signals it or waits for it later (``subprocess.Popen``'s
    other arguments as given)."""
    return subprocess.Popen(list(command), cwd=str(cwd), env=user_env(**(env or {})), text=True, **kwargs)

  @staticmethod
  def env(**changes: str | None) -> dict[str, str]:
    """:func:`user_env`."""
    return user_env(**changes)
