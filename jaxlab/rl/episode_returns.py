"""Episode returns of a DQN agent on the device: a ring of the last completed episodes' returns.

Both DQN tasks log ``episode_return``, the mean return of the last :data:`RETURN_WINDOW` episodes
completed by any environment (Dopamine's per-iteration average, kept as a running window so
that a jitted step can report it every log step).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

#: Episodes in the ring: ``episode_return`` is the mean over the last 100 completed episodes (all envs).
RETURN_WINDOW = 100


def push_returns(returns: jax.Array, episodes: jax.Array, done: jax.Array, last_return: jax.Array
                 ) -> tuple[jax.Array, jax.Array]:
  """The ring and the episode count after the episodes that ended in one step of every environment.

  Args:
    returns: float32 ``[RETURN_WINDOW]``, the ring.
    episodes: int32 ``[]``, episodes completed so far (the ring's write position).
    done: bool ``[num_envs]``, which environments ended an episode in this step.
    last_return: float32 ``[num_envs]``, the return of the episode each environment ended.

  Returns:
    ``(returns, episodes)`` with the ended episodes' returns written, in environment order.
  """
  slot = (episodes + jnp.cumsum(done) - 1) % RETURN_WINDOW
  returns = returns.at[jnp.where(done, slot, RETURN_WINDOW)].set(last_return, mode="drop")
  return returns, episodes + jnp.sum(done, dtype=jnp.int32)


def recent_return(returns: jax.Array, episodes: jax.Array) -> jax.Array:
  """The mean return of the last ``min(episodes, RETURN_WINDOW)`` completed episodes (NaN before the first).

  Args:
    returns: float32 ``[RETURN_WINDOW]``, the ring of :func:`push_returns`.
    episodes: int32 ``[]``, episodes completed so far.

  Returns:
    A float32 scalar.
  """
  n = jnp.minimum(episodes, RETURN_WINDOW)
  valid = jnp.arange(RETURN_WINDOW) < n
  return jnp.where(n > 0, jnp.sum(jnp.where(valid, returns, 0.0)) / jnp.maximum(n, 1), jnp.nan)
