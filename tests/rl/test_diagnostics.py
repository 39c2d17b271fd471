"""Dormant-neuron fractions and srank (jaxlab.rl.diagnostics) against float64 NumPy references,
and a tiny dqn_minatar run that logs them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dqn_minatar
from jaxlab.rl import diagnostics
from jaxlab.rl.networks import QNetwork
from jaxlab.train.metrics_writer import read_metrics
from jaxlab.experiment import train
from tests.support.bad_input import assert_one_clear_line


def _scores_reference(a: np.ndarray) -> np.ndarray:
  """ICML 2023 Def. 3.1 in float64: mean |h_i| over the batch (and positions) over the layer mean."""
  s = np.abs(a.astype(np.float64)).reshape(-1, a.shape[-1]).mean(axis=0)
  return s / (s.mean() + 1e-9)


def _srank_reference(phi: np.ndarray, delta: float) -> int:
  """Kumar et al. 2021: the fewest singular values with (1 - delta) of their sum, in float64."""
  sigma = np.linalg.svd(phi.astype(np.float64), compute_uv=False)
  ratio = np.cumsum(sigma) / sigma.sum()
  return int(np.argmax(ratio >= 1 - delta)) + 1


def _relu_layer(rng, shape, dead):
  """Post-ReLU activations whose first ``dead`` neurons never fire and the next two fire weakly."""
  a = np.maximum(rng.normal(size=shape), 0.0).astype(np.float32)
  a[..., :dead] = 0.0
  a[..., dead:dead + 2] *= 0.05
  return a


def test_neuron_scores_and_dormant_fractions_match_the_float64_reference():
  rng = np.random.default_rng(0)
  conv, dense = _relu_layer(rng, (32, 4, 4, 16), dead=3), _relu_layer(rng, (32, 24), dead=5)
  for a in (conv, dense):
    np.testing.assert_allclose(diagnostics.neuron_scores(a), _scores_reference(a), rtol=1e-5)
  for tau in (0.0, 0.1, 0.5):
    scores = np.concatenate([_scores_reference(conv), _scores_reference(dense)])
    want = np.mean(scores <= tau)
    assert float(diagnostics.dormant_fraction({"conv": conv, "dense": dense}, tau)) == pytest.approx(want)
  # tau = 0: exactly the never-firing neurons; 0.1 adds the two weak ones of each layer
  assert float(diagnostics.dormant_fraction({"conv": conv, "dense": dense}, 0.0)) == pytest.approx(8 / 40)
  assert float(diagnostics.dormant_fraction({"conv": conv, "dense": dense}, 0.1)) == pytest.approx(12 / 40)


# (1, (32, 1600)): a collapsed batch of MinAtar-sized features, which sqrt(eig(Phi Phi^T)) in float32 reads as rank > 1;
# (20, (64, 20)): more rows than features (the other Gram matrix)
@pytest.mark.parametrize("rank,shape", [(1, (32, 20)), (1, (32, 1600)), (5, (32, 64)), (20, (64, 20)), (32, (32, 128))])
def test_srank_matches_the_float64_reference(rank, shape):
  rng = np.random.default_rng(rank)
  n, f = shape
  scales = 2.0 ** -np.arange(rank)  # a spread spectrum, so delta matters
  phi = (rng.normal(size=(n, rank)) * scales) @ rng.normal(size=(rank, f))
  for delta in (0.01, 0.1):
    got = int(diagnostics.srank(jnp.asarray(phi, jnp.float32), delta))
    assert got == _srank_reference(phi, delta)
    assert 1 <= got <= rank
  assert int(diagnostics.srank(jnp.zeros((8, 4)))) == 0


def test_network_diagnostics_of_a_dense_q_network():
  obs = jax.random.bernoulli(jax.random.key(1), 0.3, (32, 10, 10, 4))
  net = QNetwork(num_actions=3, head="dense", width=32, diagnostics=True)
  params = net.init(jax.random.key(0), obs)["params"]
  metrics = jax.jit(lambda p: diagnostics.replay_diagnostics(lambda q, o: net.apply({"params": q}, o), p, obs))(params)
  assert set(metrics) == {"diag/feature_rank", "diag/dead_fraction", "diag/dormant_fraction",
                          "diag/dormant_fraction/encoder", "diag/dormant_fraction/penultimate"}
  _, stats = net.apply({"params": params}, obs)
  feats = np.asarray(stats["activations/features"])
  assert float(metrics["diag/feature_rank"]) == _srank_reference(feats, 0.01)
  layers = [np.asarray(stats["activations/encoder"]), feats]  # the dense head's features are its ReLU layer
  scores = np.concatenate([_scores_reference(a) for a in layers])
  assert float(metrics["diag/dormant_fraction"]) == pytest.approx(np.mean(scores <= 0.1))
  assert float(metrics["diag/dead_fraction"]) == pytest.approx(np.mean(scores <= 0.0))


@pytest.mark.parametrize("call,fragment", [
    (lambda: diagnostics.dormant_fraction({"x": jnp.ones((2, 3))}, -0.1), "dormant tau=-0.1; must be"),
    (lambda: diagnostics.srank(jnp.ones((2, 3)), 1.0), "srank delta=1.0; must be"),
    (lambda: diagnostics.srank(jnp.ones((3,))), "features of shape (3,); need [n, F]"),
    (lambda: diagnostics.network_diagnostics({"dispatch_entropy": jnp.ones(())}),
     "the network returned no activations; build it with diagnostics=True (config key network.diagnostics)"),
], ids=["tau", "delta", "rank-1 features", "no activations"])
def test_bad_diagnostics_input_is_one_clear_line(call, fragment):
  assert_one_clear_line("diagnostics", fragment, call, fragment)


def test_dqn_minatar_with_diagnostics_logs_finite_diag_metrics(tmp_path):
  c = dqn_minatar.get_config("tiny")
  c.network.diagnostics, c.network.head = True, "token_mlp"
  c.dqn.eval_steps, c.num_steps = 0, 10
  train(c, str(tmp_path), devices=jax.devices()[:1], progress=False)
  logged = [m for m in read_metrics(str(tmp_path)) if "diag/feature_rank" in m]
  assert logged
  for m in logged:
    diag = {k: v for k, v in m.items() if k.startswith("diag/")}
    assert set(diag) >= {"diag/feature_rank", "diag/dormant_fraction", "diag/dead_fraction",
                         "diag/dormant_fraction/encoder", "diag/dormant_fraction/penultimate"}
    assert all(np.isfinite(v) for v in diag.values())
    assert 1 <= diag["diag/feature_rank"] <= c.batch_size  # srank of the 32-row replay batch
    assert 0 <= diag["diag/dormant_fraction"] <= 1
  assert not any(k.startswith(("moe/activations", "activations")) for m in logged for k in m)
