r"""Two contenders of :mod:`jaxlab.rl.priorities` that lost on XLA:CPU (benchmarks/rl_per_speed.py).

``Flat``: priorities as one float32 array, sampled by a cumulative sum over all of it and a
search: O(capacity) per sample, but one vectorised pass.

``SumTree``: a batched binary sum tree. ``nodes`` float32 ``[2 L]`` for ``L`` = the next power of
two >= capacity; node 1 is the root, node ``k`` has children ``2k`` and ``2k + 1``, leaves are
``nodes[L:L + capacity]``. A batch update writes the leaves and recomputes each touched parent
from its two children, level by level, all in one scatter (a gather between per-level scatters
makes XLA:CPU copy the whole tree at every level); a search walks the levels, one gather each.

Both draw i.i.d. in proportion to the priorities and let the last of repeated indices win, as
Dopamine and :mod:`jaxlab.rl.priorities` do, so all three are interchangeable.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


def _last_of_repeats(indices: jax.Array, priorities: jax.Array) -> jax.Array:
  """Each row's value is that of the last row with the same index (sequential-update semantics)."""
  b = indices.shape[0]
  same = indices[:, None] == indices[None, :]
  return priorities.astype(jnp.float32)[jnp.max(jnp.where(same, jnp.arange(b)[None, :], -1), axis=1)]


class Flat(NamedTuple):
  """Priorities float32 [capacity] and the largest recorded."""

  values: jax.Array
  max_priority: jax.Array


def flat_init(capacity: int) -> Flat:
  return Flat(jnp.zeros((capacity,), jnp.float32), jnp.ones((), jnp.float32))


def flat_set(p: Flat, indices: jax.Array, priorities: jax.Array) -> Flat:
  new = _last_of_repeats(indices, priorities)
  return Flat(p.values.at[indices].set(new), jnp.maximum(p.max_priority, jnp.max(new)))


def flat_sample(p: Flat, rng: jax.Array, batch_size: int) -> tuple[jax.Array, jax.Array]:
  cumulative = jnp.cumsum(p.values)
  whole = cumulative[-1]
  target = jax.random.uniform(rng, (batch_size,)) * whole
  found = jnp.searchsorted(cumulative, target, side="right")
  last_positive = p.values.shape[0] - 1 - jnp.argmax(jnp.flip(p.values > 0))
  indices = jnp.minimum(found, last_positive).astype(jnp.int32)  # past the end by rounding
  return indices, p.values[indices] / whole


class SumTree(NamedTuple):
  """The tree's nodes and the largest recorded priority."""

  nodes: jax.Array
  max_priority: jax.Array


def tree_init(capacity: int) -> SumTree:
  leaves = 1 << max(capacity - 1, 0).bit_length()
  return SumTree(jnp.zeros((2 * leaves,), jnp.float32), jnp.ones((), jnp.float32))


def tree_set(tree: SumTree, indices: jax.Array, priorities: jax.Array) -> SumTree:
  old = tree.nodes
  num_leaves = old.shape[0] // 2
  values = _last_of_repeats(indices, priorities)
  top = jnp.max(values)
  node = num_leaves + indices
  writes = [(node, values)]
  for _ in range(num_leaves.bit_length() - 1):
    sibling = node ^ 1
    in_batch = sibling[:, None] == node[None, :]
    sibling_value = jnp.where(in_batch.any(axis=1), values[jnp.argmax(in_batch, axis=1)], old[sibling])
    values = jnp.where(node % 2 == 0, values + sibling_value, sibling_value + values)  # left + right
    node = node // 2
    writes.append((node, values))
  nodes = old.at[jnp.concatenate([n for n, _ in writes])].set(jnp.concatenate([v for _, v in writes]))
  return SumTree(nodes, jnp.maximum(tree.max_priority, top))


def tree_sample(tree: SumTree, rng: jax.Array, batch_size: int) -> tuple[jax.Array, jax.Array]:
  nodes = tree.nodes
  num_leaves = nodes.shape[0] // 2
  target = jax.random.uniform(rng, (batch_size,)) * nodes[1]
  node = jnp.ones((batch_size,), jnp.int32)
  value = target
  for _ in range(num_leaves.bit_length() - 1):
    left, right = nodes[2 * node], nodes[2 * node + 1]
    go_right = (value >= left) & (right > 0)
    value = jnp.where(go_right, value - left, value)
    node = 2 * node + go_right.astype(jnp.int32)
  return node - num_leaves, nodes[node] / nodes[1]


def tree_from_priorities(values: jax.Array) -> SumTree:
  """A tree holding ``values`` (float [capacity]), built bottom-up in O(capacity)."""
  num_leaves = 1 << max(values.shape[0] - 1, 0).bit_length()
  level = jnp.zeros((num_leaves,), jnp.float32).at[:values.shape[0]].set(values.astype(jnp.float32))
  levels = [level]
  while level.shape[0] > 1:
    level = level[0::2] + level[1::2]
    levels.append(level)
  nodes = jnp.concatenate([jnp.zeros((1,), jnp.float32), *reversed(levels)])  # root at 1, leaves at L
  return SumTree(nodes, jnp.maximum(1.0, jnp.max(values)).astype(jnp.float32))
