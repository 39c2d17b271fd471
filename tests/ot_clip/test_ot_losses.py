"""The OT-CLIP loss family: the InfoNCE equivalence, jit/vmap/grad, and sharded-batch invariance."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxlab.ot_clip import contrastive, ot_losses, plans
from jaxlab.ot_clip.registry import LOSSES, get_loss
from jaxlab.ot_clip.similarity import cosine_cost
from tests.support.tolerances import log_domain_atol


def _loss_atol(scale, d, num_iterations=5):
  # Exponents scale * cost (cost = 1 - cos in [0, 2]) come out of a d-term dot product and
  # pass through 2 potential updates per Sinkhorn iteration before the loss's log-sum-exps.
  return log_domain_atol(2 * scale, n=d + 2 * num_iterations + 2)


def test_one_sided_kl_equals_infonce_image_to_text(pair):
  # Sec. 3.1: P = (1/n) softmax_j(S / tau) and KL(I/n | P) = InfoNCE(image -> text).
  x, y = pair
  scale = 1 / 0.07
  logits = scale * (x / jnp.linalg.norm(x, axis=1, keepdims=True)) @ (
      y / jnp.linalg.norm(y, axis=1, keepdims=True)).T
  infonce_i2t = -jnp.mean(jnp.diagonal(jax.nn.log_softmax(logits, axis=1)))
  p = jnp.exp(plans.one_sided_log_plan(cosine_cost(x, y), 1 / scale))
  atol = 2 * _loss_atol(scale, x.shape[1], num_iterations=0)  # two routes, no Sinkhorn iteration
  np.testing.assert_allclose(p, jax.nn.softmax(logits, axis=1) / 16, atol=atol / 16)  # p <= 1/16
  np.testing.assert_allclose(ot_losses.one_sided_ot_loss(x, y, scale, symmetric=False), infonce_i2t, atol=atol)
  np.testing.assert_allclose(ot_losses.one_sided_ot_loss(x, y, scale), contrastive.clip_loss(x, y, scale),
                             atol=atol)


def test_kl_is_zero_only_at_the_identity_coupling():
  n = 4
  exact = jnp.log(jnp.eye(n) / n + 1e-30)
  assert abs(float(ot_losses.kl_from_identity(exact))) < 1e-6
  assert float(ot_losses.kl_from_identity(jnp.full((n, n), -2 * np.log(n)))) > 0.5


def test_unbalanced_with_hard_marginals_is_entropic_ot(pair):
  x, y = pair
  np.testing.assert_allclose(ot_losses.unbalanced_ot_loss(x, y, 10.0, tau_a=1.0, tau_b=1.0),
                             ot_losses.entropic_ot_loss(x, y, 10.0), atol=2 * _loss_atol(10.0, x.shape[1]))


def test_fgw_without_structure_is_entropic_ot(pair):
  x, y = pair
  np.testing.assert_allclose(ot_losses.fgw_loss(x, y, 10.0, alpha=0.0, num_outer=1),
                             ot_losses.entropic_ot_loss(x, y, 10.0), atol=2 * _loss_atol(10.0, x.shape[1]))


def test_ot_losses_prefer_the_true_pairing(pair):
  x, y = pair
  for name in LOSSES.names():
    loss = jax.jit(get_loss(name))
    assert loss(x, y, 10.0, -5.0) < loss(x, y[::-1], 10.0, -5.0), name


@pytest.mark.parametrize("name", ["infonce", "siglip", "one_sided_ot", "entropic_ot", "unbalanced_ot",
                                  "dbot", "fgw", "ufgw"])
def test_jit_vmap_grad(pair, name):
  x, y = pair
  loss = get_loss(name)
  f = jax.jit(jax.value_and_grad(lambda x, y, s: loss(x, y, s, -5.0), argnums=(0, 1, 2)))
  value, grads = f(x, y, 10.0)
  atol = 2 * _loss_atol(10.0, x.shape[1], num_iterations=15)  # jit vs op by op; FG-W: 3 x 5 iterations
  np.testing.assert_allclose(value, loss(x, y, 10.0, -5.0), rtol=0, atol=atol)
  assert all(np.all(np.isfinite(g)) for g in grads) and float(jnp.abs(grads[0]).sum()) > 0
  xs, ys = jnp.stack([x, y]), jnp.stack([y, x])
  batched = jax.jit(jax.vmap(lambda x, y: loss(x, y, 10.0, -5.0)))(xs, ys)
  np.testing.assert_allclose(batched, [loss(x, y, 10.0, -5.0), loss(y, x, 10.0, -5.0)], rtol=0, atol=atol)


def test_implicit_and_unrolled_gradients_agree_at_convergence(pair):
  x, y = pair
  g_imp = jax.jit(jax.grad(lambda x: ot_losses.entropic_ot_loss(x, y, 5.0, implicit=True, threshold=1e-7)))(x)
  g_unr = jax.jit(jax.grad(lambda x: ot_losses.entropic_ot_loss(x, y, 5.0, num_iterations=300)))(x)
  np.testing.assert_allclose(g_imp, g_unr, atol=2e-4)


@pytest.mark.parametrize("name", ["infonce", "entropic_ot", "ufgw"])
def test_sharded_global_batch_matches_single_device(rng, name):
  # The plan couples the whole batch: sharding the embeddings over "data" must not change it.
  assert jax.device_count() == 8
  mesh = jax.make_mesh((8,), ("data",))
  kx, ky = jax.random.split(rng)
  x = jax.random.normal(kx, (64, 16))
  y = x + jax.random.normal(ky, (64, 16))
  loss = jax.jit(get_loss(name))
  expected = loss(x, y, 14.0)
  sharding = NamedSharding(mesh, P("data"))
  xs, ys = jax.device_put(x, sharding), jax.device_put(y, sharding)
  assert len(xs.sharding.device_set) == 8
  atol = 2 * _loss_atol(14.0, 16, num_iterations=15)  # sharded vs one device; FG-W: 3 x 5 iterations
  np.testing.assert_allclose(loss(xs, ys, 14.0), expected, rtol=0, atol=atol)
  g = jax.jit(jax.grad(get_loss(name)))(xs, ys, 14.0)
  g_ref = jax.grad(get_loss(name))(x, y, 14.0)
  np.testing.assert_allclose(g, g_ref, rtol=0, atol=atol * float(jnp.abs(g_ref).max()))


@pytest.mark.parametrize("name", LOSSES.names())
def test_every_loss_rejects_mismatched_batches(name):
  with pytest.raises(ValueError, match=r"\(4, 3\).*\(5, 3\)"):
    get_loss(name)(jnp.ones((4, 3)), jnp.ones((5, 3)), 10.0, 0.0)


@pytest.mark.parametrize("name", [n for n in LOSSES.names()])
def test_every_loss_rejects_non_positive_logit_scale(name):
  with pytest.raises(ValueError, match="logit_scale"):
    get_loss(name)(jnp.ones((4, 3)), jnp.ones((4, 3)), 0.0, 0.0)


LOSS_NAMES = ["infonce", "siglip", "one_sided_ot", "entropic_ot", "unbalanced_ot", "dbot", "fgw", "ufgw"]


def _aligned(n=32, d=16, noise=0.3, seed=0):
  kx, ky = jax.random.split(jax.random.key(seed))
  x = jax.random.normal(kx, (n, d))
  return x, x + noise * jax.random.normal(ky, (n, d))


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_finite_from_scale_1_to_1e4_and_float32_math_for_bf16_and_f16(name):
  # Unbalanced OT (and U-FG) used to be NaN at logit scale 1000 (its plan's masses leave
  # float32's range; its updates now run in the log domain). bf16 used to round the OT losses
  # (differences of O(1/n) log-masses) to exactly 0 and f16 SigLIP overflowed to inf; the math
  # now runs in float32, so the loss of bf16/f16 embeddings is the float32 loss of the same
  # (rounded) values, close to the loss of the unrounded ones.
  x, y = _aligned(noise=1.0)
  f = jax.jit(jax.value_and_grad(lambda x, y, s: get_loss(name)(x, y, s, -10.0), argnums=(0, 1, 2)))
  for scale in (1.0, 100.0, 1000.0, 1e4):
    value, grads = f(x, y, scale)
    assert np.isfinite(float(value)), (name, scale)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in grads), (name, scale)
  ref = float(f(x, y, 100.0)[0])
  for dtype in (jnp.bfloat16, jnp.float16):
    xl, yl = x.astype(dtype), y.astype(dtype)
    value, (gx, _, _) = f(xl, yl, 100.0)
    assert value.dtype == jnp.float32 and gx.dtype == dtype, dtype
    assert bool(jnp.all(jnp.isfinite(gx.astype(jnp.float32))))
    # float32 math on the rounded values: float32 rounding apart, where bf16/f16 math would be
    # ~2**-8 * 200 apart in every exponent.
    np.testing.assert_allclose(value, f(xl.astype(jnp.float32), yl.astype(jnp.float32), 100.0)[0],
                               rtol=0, atol=2 * _loss_atol(100.0, x.shape[1], num_iterations=15))
    np.testing.assert_allclose(value, ref, rtol=0.05, atol=0.02 if dtype == jnp.bfloat16 else 0.005)


@pytest.mark.parametrize("name", ["unbalanced_ot", "ufgw"])
def test_unbalanced_loss_at_scale_1000_matches_float64(name):
  x, y = _aligned(noise=1.0)
  value = float(jax.jit(get_loss(name))(x, y, 1000.0))
  with jax.enable_x64(True):
    ref = float(jax.jit(get_loss(name))(x.astype(jnp.float64), y.astype(jnp.float64), 1000.0))
  np.testing.assert_allclose(value, ref, rtol=0, atol=_loss_atol(1000.0, x.shape[1], num_iterations=15))


def test_max_logit_scale_keeps_the_absorbed_updates_and_nan_when_broken():
  # With a traced scale the unbalanced loss runs in the log domain unless max_logit_scale
  # promises (1 - tau) * 2 * scale <= 30 (the two-tower model clamps its scale at 100).
  x, y = _aligned(noise=1.0)
  log_domain = jax.jit(jax.value_and_grad(lambda x, s: ot_losses.unbalanced_ot_loss(x, y, s)))
  absorbed = jax.jit(jax.value_and_grad(lambda x, s: ot_losses.unbalanced_ot_loss(x, y, s, max_logit_scale=100.0)))
  for scale in (14.0, 100.0):
    (v1, g1), (v2, g2) = log_domain(x, scale), absorbed(x, scale)
    # Two float32 routes to one value: each within the log-domain rounding bound of the exact loss.
    # (It failed at rtol=1e-6 on an AVX-512 Xeon: 0.420733 vs 0.420734, 1.1e-6 apart.)
    atol = 2 * _loss_atol(scale, x.shape[1])
    np.testing.assert_allclose(v2, v1, rtol=0, atol=atol)
    # A gradient entry is a sum of plan entries (relative error <= atol) times bounded factors.
    np.testing.assert_allclose(g2, g1, rtol=0, atol=atol * float(np.abs(g1).max()))
  assert np.isnan(float(absorbed(x, 150.0)[0]))  # the promise is broken: NaN, not a wrong value
  assert np.isfinite(float(log_domain(x, 1000.0)[0]))
