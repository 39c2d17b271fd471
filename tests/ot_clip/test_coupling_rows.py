"""The coupling split by rows (over 1, 2, 4, 8 devices) or chunked equals the dense definition, in value and gradient.

Tolerance (float32, derived from the computation; the same for every form and device count):
the forms compute the same exponents log K_ij = -(1 - S_ij) * scale (+ potentials) and differ only
in how sums are ordered:

* S_ij is a d-term dot product: each route rounds it within gamma(d) (unit vectors), so an
  exponent differs by <= 2 * scale * gamma(d) (``log_domain_atol(2 * scale, d)``); FGW's cost adds
  alpha * L(P), whose [d, d] moments sum B plan entries of mass <= 1 (gamma(2B + 2d) more);
* each Sinkhorn half-step is a log-sum-exp of B terms summed in another order (by blocks, then
  over devices): its result moves by gamma(B) (the log of a sum with relative error gamma(B)),
  and the potentials carry every earlier half-step's error (no contraction assumed): ``updates``
  half-steps plus the loss's own row/column LSE;
* the loss is a mean of log P_ii: the absolute bound of its terms.

So |loss - dense| <= safety * [gamma(n_exp + updates) * 2 * scale + (updates + 1) * gamma(B)],
safety 2 (XLA's exp/log are within ~2 ulps). SigLIP sums B^2 terms: gamma(B^2) * sum|terms| / B.
A gradient entry is a sum of plan entries (relative error <= the bound above, accumulated again
by the backward pass through every half-step) times bounded factors: (updates + 2) times the bound,
relative to the largest entry (random pairs: no cancellation at this scale).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from jaxlab.errors import InputError
from jaxlab.ot_clip import get_loss
from jaxlab.ot_clip.coupling import i2t_accuracy
from jaxlab.ot_clip.registry import LOSSES
from jaxlab.ot_clip.blocked import ROW_BLOCKED
from tests.support.tolerances import assert_close_to_scale, gamma

B, D, SCALE, BIAS = 64, 16, 10.0, -5.0
ALL = ["infonce", "siglip", "one_sided_ot", "entropic_ot", "unbalanced_ot", "dbot", "fgw", "ufgw"]
# Sinkhorn half-steps before the loss (5 iterations; FG-W: 3 outer steps of 5).
UPDATES = {"entropic_ot": 10, "unbalanced_ot": 10, "dbot": 11, "fgw": 30, "ufgw": 30}


def _value_atol(name: str, x: np.ndarray, y: np.ndarray) -> float:
  n, d = x.shape
  if name == "siglip":
    s = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ (y / np.linalg.norm(y, axis=1, keepdims=True)).T
    logits = SCALE * s + BIAS
    terms = np.logaddexp(0.0, logits)  # |log sigmoid(-l)|
    return 2 * (gamma(n * n) * (terms.sum() + np.abs(np.diag(logits)).sum()) / n + gamma(d) * 2 * SCALE)
  updates = UPDATES.get(name, 0)
  n_exp = d + (2 * n + 2 * d if name in ("fgw", "ufgw") else 0)
  return 2 * (gamma(n_exp + updates) * 2 * SCALE + (updates + 1) * gamma(n))


def _grad_tol(name: str, x, y) -> float:
  return (UPDATES.get(name, 0) + 2) * _value_atol(name, x, y)


def _pair(n: int = B, d: int = D, seed: int = 0) -> tuple[jax.Array, jax.Array]:
  kx, ky = jax.random.split(jax.random.key(seed))
  x = jax.random.normal(kx, (n, d))
  return x, x + jax.random.normal(ky, (n, d))


def _value_and_grads(loss, x, y):
  return jax.jit(jax.value_and_grad(lambda x, y, s: loss(x, y, s, BIAS), argnums=(0, 1, 2)))(x, y, SCALE)


def _check(name, got, want, x, y):
  atol = _value_atol(name, np.asarray(x), np.asarray(y))
  np.testing.assert_allclose(got[0], want[0], rtol=0, atol=atol, err_msg=name)
  assert_close_to_scale(got[1], want[1], _grad_tol(name, np.asarray(x), np.asarray(y)), err_msg=name)


@functools.lru_cache(maxsize=None)
def _dense(name: str):
  """The dense definition's value and gradients on ``_pair()`` (one compile per loss for the module)."""
  x, y = _pair()
  return jax.device_get(_value_and_grads(get_loss(name), x, y))


def test_every_loss_has_a_row_blocked_form():
  assert sorted(ROW_BLOCKED.names()) == sorted(LOSSES.names())


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "ufgw" else n for n in ALL])
def test_chunked_equals_dense(name):
  """ufgw is slow here (fgw's blocks with tau < 1: ``test_chunked_equals_dense[fgw]`` and the 8-device ufgw case)."""
  x, y = _pair()
  _check(name, _value_and_grads(get_loss(name, chunk_size=16), x, y), _dense(name), x, y)  # four blocks
  if name == "infonce":  # one block, recomputed in the backward pass rather than kept
    _check(name, _value_and_grads(get_loss(name, chunk_size=B), x, y), _dense(name), x, y)


def _split(name: str, devices: int, chunk_size: int | None = None):
  # jax.make_mesh's axes are Explicit: the rows' sharding is in their type, so get_loss(name) splits
  # the coupling by rows with no argument.
  x, y = _pair()
  mesh = jax.make_mesh((devices,), ("data",), devices=jax.devices()[:devices], axis_types=(AxisType.Explicit,))
  with jax.set_mesh(mesh):
    xs, ys = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (x, y))
    got = _value_and_grads(get_loss(name, chunk_size=chunk_size), xs, ys)
  _check(name, got, _dense(name), x, y)


@pytest.mark.parametrize("name", ALL)
def test_rows_split_over_8_devices_equal_one_device(name):
  _split(name, 8)


SOME = ("infonce", "siglip", "entropic_ot", "dbot")


@pytest.mark.parametrize("devices", [1, 2, 4])
@pytest.mark.parametrize("name", [n if n in SOME else pytest.param(n, marks=pytest.mark.slow) for n in ALL])
def test_rows_split_over_1_2_4_devices_equal_one_device(name, devices):
  """The other losses are slow here: ``test_rows_split_over_8_devices_equal_one_device`` covers each."""
  _split(name, devices)


@pytest.mark.parametrize("name", ["infonce", "unbalanced_ot"])
def test_rows_split_and_chunked_equal_one_device(name):
  _split(name, 2, chunk_size=8)  # 32 rows per device, in 4 blocks


@pytest.mark.parametrize("name", ["infonce", "dbot"])
def test_auto_axes_need_axis_name_and_then_split_the_rows(name):
  # Auto axes carry no sharding in the type: axis_name="data" under jax.set_mesh names the split.
  x, y = _pair()
  want = _dense(name)
  mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
  xs, ys = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (x, y))
  with jax.set_mesh(mesh):
    got = _value_and_grads(get_loss(name, axis_name="data"), xs, ys)
    text = jax.jit(lambda x, y: get_loss(name, axis_name="data")(x, y, SCALE, BIAS)).lower(xs, ys).as_text()
  _check(name, got, want, x, y)
  assert "all_gather" in text or "all-gather" in text  # the texts are gathered: the rows stayed split
  # Or with the mesh passed, outside set_mesh:
  _check(name, _value_and_grads(get_loss(name, axis_name="data", mesh=mesh), xs, ys), want, x, y)


@pytest.mark.parametrize("name", ["siglip", "ufgw"])
def test_inside_shard_map_axis_name_gives_the_global_loss(name):
  # Per-device code (open_clip's gather_with_grad, generalised): each device passes its rows.
  x, y = _pair()
  want = _dense(name)
  mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
  loss = get_loss(name, axis_name="data")
  per_device = jax.shard_map(lambda x, y, s: loss(x, y, s, BIAS), mesh=mesh,
                             in_specs=(P("data"), P("data"), P()), out_specs=P())
  xs, ys = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (x, y))
  got = jax.jit(jax.value_and_grad(per_device, argnums=(0, 1, 2)))(xs, ys, jnp.float32(SCALE))
  _check(name, got, want, x, y)


@pytest.mark.parametrize("name", ["infonce", "unbalanced_ot"])
def test_inside_pmap_axis_name_gives_the_global_loss_and_gradient(name):
  # Legacy per-device code: a projection replicated over the devices, each device's rows; pmap's
  # psum transposes to psum, so each device's gradient is n x its share and their pmean is the
  # global batch's (infonce: the column LSE's own VJP; unbalanced_ot: the solver's and its mass's).
  x, y = _pair()
  proj = jnp.eye(D) + 0.1 * jax.random.normal(jax.random.key(5), (D, D))
  dense = jax.value_and_grad(lambda w: get_loss(name)(x @ w, y, SCALE))(proj)
  loss = get_loss(name, axis_name="data")

  def per_device(w, a, b):
    value, grad = jax.value_and_grad(lambda w: loss(a @ w, b, SCALE))(w)
    return value, jax.lax.pmean(grad, "data")

  value, grad = jax.pmap(per_device, axis_name="data", in_axes=(None, 0, 0))(proj, x.reshape(8, 8, D),
                                                                             y.reshape(8, 8, D))
  atol = _value_atol(name, np.asarray(x), np.asarray(y))
  np.testing.assert_allclose(value, np.full(8, dense[0]), rtol=0, atol=atol)
  # The projection adds a D-term dot forwards, a B-term sum backwards and the pmean's 8 terms.
  tol = _grad_tol(name, np.asarray(x), np.asarray(y)) + 2 * gamma(D + B + 8)
  for g in grad:  # the same on every device
    assert_close_to_scale(g, dense[1], tol, err_msg=name)


def test_i2t_accuracy_split_and_chunked_equals_dense():
  x, _ = _pair()
  y = x + 2.0 * jax.random.normal(jax.random.key(3), x.shape)
  want = float(i2t_accuracy(x, y))
  assert 0.2 < want < 1.0  # some rows hit, some miss: the comparison can fail
  mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
  xs, ys = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (x, y))
  assert float(jax.jit(lambda x, y: i2t_accuracy(x, y, axis_name=("data",)))(xs, ys)) == want
  assert float(i2t_accuracy(x, y, chunk_size=16)) == want


def test_bad_chunk_size_and_axis_name_are_one_line():
  x, y = _pair()
  with pytest.raises(InputError, match=r"chunk_size=24 must divide the batch's 64 rows.*e\.g\. 16"):
    get_loss("infonce", chunk_size=24)(x, y, SCALE)
  with pytest.raises(InputError, match="chunk_size must be an integer >= 1"):
    get_loss("infonce", chunk_size=0)
  with pytest.raises(InputError, match="implicit=True solves with ott on the whole"):
    get_loss("entropic_ot", implicit=True, chunk_size=16)
  with pytest.raises(InputError, match="axis_name must be a mesh axis name"):
    get_loss("infonce", axis_name=3)
  with pytest.raises(InputError, match="mesh= says where axis_name is"):
    get_loss("infonce", mesh=jax.make_mesh((8,), ("data",)))
  with pytest.raises(InputError, match=r"axis_name='batch' names no axis of the mesh in use"):
    jax.jit(lambda x, y: get_loss("infonce", axis_name="batch")(x, y, SCALE))(x, y)
  with pytest.raises(InputError, match="logit_scale must be a finite number > 0"):
    get_loss("entropic_ot", chunk_size=16)(x, y, 0.0)


def _temp_blocks(loss, batch: int, dim: int, mesh) -> float:
  """Per-device temporaries of value-and-gradient (embeddings and scale), compile only, in B x B / n float32 blocks."""
  sharding = None if mesh is None else NamedSharding(mesh, P("data"))
  spec = jax.ShapeDtypeStruct((batch, dim), jnp.float32, sharding=sharding)
  scale = jax.ShapeDtypeStruct((), jnp.float32)
  fn = jax.jit(jax.value_and_grad(lambda x, y, s: loss(x, y, s, BIAS), argnums=(0, 1, 2)))
  if mesh is None:
    compiled = fn.lower(spec, spec, scale).compile()
  else:
    with jax.set_mesh(mesh):
      compiled = fn.lower(spec, spec, scale).compile()
  devices = 1 if mesh is None else mesh.size
  return compiled.memory_analysis().temp_size_in_bytes / (4 * batch * batch / devices)


# The goal: <= 4 blocks of the coupling's rows per device (FGW/U-FG: split by rows, more blocks for
# its structure term). The texts gathered as [B, d] add d / (B / n) blocks: small at these sizes.
GOAL_BLOCKS = {"fgw": 16.0, "ufgw": 16.0}


@pytest.mark.parametrize("name", ALL)
def test_split_rows_hold_at_most_4_blocks_per_device(name):
  mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
  blocks = _temp_blocks(get_loss(name), 2048, 32, mesh)
  assert blocks <= GOAL_BLOCKS.get(name, 4.0), (name, blocks)


@pytest.mark.slow
def test_memory_goals_at_clip_scale():
  """Slow (compile only, ~1 min): ``test_split_rows_hold_at_most_4_blocks_per_device`` checks the split at B = 2048.

  B = 8192 on 8 devices: <= 4 blocks of B^2/8 float32 for every loss but FGW; B = 65,536, D = 512
  on one device with chunk_size 1024: within 2 GiB (benchmarks/ot_clip_coupling_scale.py measures both).
  """
  mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
  for name in ("infonce", "siglip", "one_sided_ot", "entropic_ot", "unbalanced_ot", "dbot"):
    assert _temp_blocks(get_loss(name), 8192, 256, mesh) <= 4.0, name
  for name in ("infonce", "siglip", "entropic_ot", "unbalanced_ot", "dbot"):
    gib = _temp_blocks(get_loss(name, chunk_size=1024), 65536, 512, None) * 4 * 65536 ** 2 / 2 ** 30
    assert gib <= 2.0, (name, gib)
