"""Prioritised replay's priorities against a float64 NumPy reference of Dopamine's scheme."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.rl import priorities


def _levels_sum_their_children(p):
  for below, above in zip(p.levels, p.levels[1:]):
    fanout = below.shape[0] // above.shape[0]
    np.testing.assert_allclose(np.asarray(below, np.float64).reshape(-1, fanout).sum(1), above, rtol=1e-6)


@pytest.mark.parametrize("capacity,fanout", [(1, 16), (5, 2), (16, 16), (17, 4), (300, 16), (1000, 3)])
def test_batched_updates_with_repeats_match_sequential_ones(capacity, fanout):
  rng = np.random.default_rng(capacity)
  p = priorities.init(capacity, fanout)
  reference, largest = np.zeros(capacity), 1.0
  update = jax.jit(priorities.set_priorities)
  for _ in range(6):
    idx = rng.integers(0, capacity, size=16)
    values = rng.uniform(0, 3, size=16).astype(np.float32)
    p = update(p, jnp.asarray(idx), jnp.asarray(values))
    for i, v in zip(idx, values):  # Dopamine's sum tree sets them one by one: the last repeat wins
      reference[i] = v
    largest = max(largest, float(values.max()))
  np.testing.assert_array_equal(priorities.get(p, jnp.arange(capacity)), reference.astype(np.float32))
  np.testing.assert_allclose(float(priorities.total(p)), reference.sum(), rtol=1e-5)
  assert float(p.max_priority) == np.float32(largest)
  assert np.all(np.asarray(p.levels[0])[capacity:] == 0)  # padding is never drawn
  _levels_sum_their_children(p)


def test_new_items_enter_at_the_largest_priority_recorded():
  insert, put = jax.jit(priorities.insert), jax.jit(priorities.set_priorities)
  p = insert(priorities.init(10), jnp.arange(2))
  np.testing.assert_array_equal(p.levels[0][:4], [1, 1, 0, 0])  # 1 at first, as Dopamine
  p = put(p, jnp.asarray([0, 1]), jnp.asarray([4.0, 0.5]))
  p = insert(p, jnp.asarray([5, 6]))
  np.testing.assert_array_equal(p.levels[0][5:7], [4.0, 4.0])
  p = put(p, jnp.asarray([0, 5]), jnp.asarray([0.1, 0.2]))  # lowering them keeps the record
  np.testing.assert_array_equal(insert(p, jnp.asarray([7, 8])).levels[0][7:9], [4.0, 4.0])


def test_loss_weights_and_new_priorities_are_dopamines():
  """full_rainbow_agent.py:381-384 and :421 @ 5873f54, in float64."""
  probs = np.array([0.5, 0.125, 0.01, 1e-4, 0.0])
  w = 1.0 / np.sqrt(probs + 1e-10)
  np.testing.assert_allclose(priorities.importance_weights(jnp.asarray(probs, jnp.float32)), w / w.max(),
                             rtol=1e-6)
  losses = np.array([4.0, 0.0, 0.3, 1e-12, 17.5])
  np.testing.assert_allclose(priorities.loss_priorities(jnp.asarray(losses, jnp.float32)),
                             np.sqrt(losses + 1e-10), rtol=1e-6)


def test_update_from_losses_sets_roots_and_keeps_non_finite_rows():
  p = priorities.set_priorities(priorities.init(8), jnp.arange(8), jnp.full((8,), 2.0))
  p = priorities.update_from_losses(p, jnp.asarray([1, 2, 3]), jnp.asarray([9.0, jnp.nan, jnp.inf]))
  np.testing.assert_allclose(priorities.get(p, jnp.arange(4)), [2.0, 3.0, 2.0, 2.0], rtol=1e-6)
  assert float(p.max_priority) == 3.0


@pytest.mark.parametrize("fanout", [4, 16])
def test_draws_follow_the_priorities(fanout):
  """Chi-square over 30 items (some 0) from 32,768 draws; the seed is fixed, so it cannot flake."""
  n = 30
  rng = np.random.default_rng(7)
  values = rng.uniform(0.05, 3.0, n) * (rng.uniform(size=n) > 0.2)
  p = priorities.set_priorities(priorities.init(n, fanout), jnp.arange(n), jnp.asarray(values, jnp.float32))
  keys = jax.random.split(jax.random.key(0), 1024)
  idx, probs = jax.jit(jax.vmap(lambda k: priorities.sample(p, k, 32)))(keys)
  idx, probs = np.asarray(idx).ravel(), np.asarray(probs).ravel()
  want = values.astype(np.float32).astype(np.float64) / values.astype(np.float32).astype(np.float64).sum()
  np.testing.assert_allclose(probs, want[idx], rtol=1e-5)  # P(i) = p_i / sum p, as reported
  assert np.all(values[idx] > 0)  # an item of priority 0 is never drawn
  counts = np.bincount(idx, minlength=n)
  positive = want > 0
  expected = want[positive] * idx.size
  chi2 = float(((counts[positive] - expected) ** 2 / expected).sum())
  assert chi2 < 3 * positive.sum(), chi2  # mean = degrees of freedom (~23); p(chi2 > 70) ~ 1e-6


def test_a_draw_past_the_total_lands_on_the_last_positive_item():
  p = priorities.set_priorities(priorities.init(40, 4), jnp.asarray([3, 17]), jnp.asarray([1.0, 2.0]))
  # uniform draws are < 1, but float rounding of u * total may reach the end: the guard still finds item 17
  idx, _ = jax.jit(priorities.sample, static_argnums=2)(p, jax.random.key(0), 256)
  assert set(np.asarray(idx).tolist()) <= {3, 17}
  from jaxlab.rl.priorities import _first_above
  values = jnp.asarray([[0.0, 1.0, 0.0, 2.0], [0.0, 1.0, 0.0, 2.0]])
  found = jax.jit(_first_above)(jnp.cumsum(values, axis=1), values, jnp.asarray([3.5, -0.1]))
  np.testing.assert_array_equal(found, [3, 1])  # past the end: the last positive; below 0: the first positive
