"""A sweep of bad inputs over the OT-CLIP API: each raises InputError with one line naming the value.

Every case is (id, call, pattern): ``call()`` must raise ``jaxlab.errors.InputError`` whose message
matches ``pattern`` (the argument's name and the bad value, or both shapes) and is one line.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.errors import InputError
from jaxlab.ot_clip import digits_pairs, gromov, inference, ot_losses, plans, selective
from jaxlab.ot_clip.contrastive import clip_loss, siglip_loss
from jaxlab.ot_clip.registry import get_loss
from jaxlab.ot_clip.train_loss import make_two_tower_loss
from jaxlab.ot_clip.two_tower import ImageEncoder, TwoTower

NAN, INF = float("nan"), float("inf")
X = jnp.ones((4, 3)) + jnp.eye(4, 3)       # 4 paired embeddings
T = jnp.eye(3)                             # 3 class embeddings
COST = jnp.ones((4, 3)) - jnp.eye(4, 3)
IMAGES, TOKENS = jnp.ones((3, 64)), jnp.array([[1, 2, 0], [3, 0, 0], [4, 5, 6]])


def loss(name, *args, scale=10.0, bias=-5.0, **kwargs):
  return lambda: get_loss(name, **kwargs)(*(args or (X, X)), scale, bias)


def ot(*args, **kwargs):
  return lambda: inference.ot_zero_shot(*(args or (X, T)), **({"epsilon": 0.1} | kwargs))


def tower(**kwargs):
  return lambda: TwoTower(**({"vocab_size": 12, "hidden": 8, "embed_dim": 4} | kwargs))


def tower_init(images, tokens):
  model = TwoTower(vocab_size=12, hidden=8, embed_dim=4)
  return lambda: model.init(jax.random.key(0), images, tokens)


def two_tower_loss_call(batch):
  model = TwoTower(vocab_size=12, hidden=8, embed_dim=4)
  params = model.init(jax.random.key(0), IMAGES, TOKENS)["params"]
  return make_two_tower_loss(model, "infonce")(params, batch, None, ())


CASES = [
    # --- losses by name: unknown names and hyper-parameters, checked when the loss is built
    ("unknown loss", lambda: get_loss("sinkhorn"), r"unknown OT-CLIP loss 'sinkhorn'"),
    ("unknown hparam", lambda: get_loss("infonce", num_iterations=5), r"'infonce' has no hyper-parameter 'num_iterations'"),
    ("tau on balanced", lambda: get_loss("entropic_ot", tau_a=0.5), r"'entropic_ot' has no hyper-parameter 'tau_a'"),
    ("tau_a > 1", lambda: get_loss("unbalanced_ot", tau_a=1.5), r"tau_a must be in \(0, 1\], got 1.5"),
    ("tau_a = 0", lambda: get_loss("unbalanced_ot", tau_a=0.0), r"tau_a must be in \(0, 1\], got 0.0"),
    ("tau_b < 0", lambda: get_loss("unbalanced_ot", tau_b=-0.2), r"tau_b must be in \(0, 1\], got -0.2"),
    ("tau_b nan", lambda: get_loss("unbalanced_ot", tau_b=NAN), r"tau_b must be in \(0, 1\], got nan"),
    ("ufgw tau_a", lambda: get_loss("ufgw", tau_a=2.0), r"tau_a must be in \(0, 1\], got 2.0"),
    ("fgw alpha nan", lambda: get_loss("fgw", alpha=NAN), r"alpha must be in \[0, 1\], got nan"),
    ("fgw alpha > 1", lambda: get_loss("fgw", alpha=1.5), r"alpha must be in \[0, 1\], got 1.5"),
    ("fgw alpha < 0", lambda: get_loss("fgw", alpha=-0.1), r"alpha must be in \[0, 1\], got -0.1"),
    ("fgw num_outer 0", lambda: get_loss("fgw", num_outer=0), r"num_outer must be an integer >= 1, got 0"),
    ("num_iterations 0", lambda: get_loss("entropic_ot", num_iterations=0), r"num_iterations must be an integer >= 1, got 0"),
    ("num_iterations float", lambda: get_loss("unbalanced_ot", num_iterations=2.5), r"num_iterations must be an integer >= 1, got 2.5"),
    ("num_iterations bool", lambda: get_loss("dbot", num_iterations=True), r"num_iterations must be an integer >= 1, got True"),
    ("dbot lower 0", lambda: get_loss("dbot", lower=0.0), r"DBOT lower must be in \(0, 1\].*got 0.0"),
    ("dbot lower > 1", lambda: get_loss("dbot", lower=1.2), r"DBOT lower must be in \(0, 1\].*got 1.2"),
    ("dbot upper < 1", lambda: get_loss("dbot", upper=0.5), r"DBOT upper must be in \[1, inf\].*got 0.5"),
    ("dbot upper nan", lambda: get_loss("dbot", upper=NAN), r"DBOT upper must be in \[1, inf\].*got nan"),
    ("dbot array bound", lambda: get_loss("dbot", lower=np.full(4, 0.5)), r"hyper-parameter lower must be a scalar, got shape \(4,\)"),
    ("max_logit_scale", lambda: get_loss("unbalanced_ot", max_logit_scale=0.0), r"max_logit_scale must be a finite number > 0, got 0.0"),
    ("threshold 0", lambda: get_loss("entropic_ot", implicit=True, threshold=0.0), r"threshold must be a finite number > 0, got 0.0"),
    ("max_iterations 0", lambda: get_loss("entropic_ot", implicit=True, max_iterations=0), r"max_iterations must be an integer >= 1, got 0"),
    ("implicit not bool", lambda: get_loss("entropic_ot", implicit="yes"), r"implicit must be True or False, got 'yes'"),
    ("symmetric not bool", lambda: get_loss("one_sided_ot", symmetric=1), r"symmetric must be True or False, got 1"),
    # --- loss calls: embeddings
    ("empty batch", loss("entropic_ot", jnp.ones((0, 3)), jnp.ones((0, 3))), r"\(0, 3\).*\(0, 3\).*empty input"),
    ("empty dim", loss("infonce", jnp.ones((4, 0)), jnp.ones((4, 0))), r"\(4, 0\).*\(4, 0\).*empty input"),
    ("batch mismatch", loss("unbalanced_ot", jnp.ones((4, 3)), jnp.ones((5, 3))), r"\(4, 3\).*\(5, 3\).*different batch sizes"),
    ("dim mismatch", loss("fgw", jnp.ones((4, 3)), jnp.ones((4, 2))), r"\(4, 3\).*\(4, 2\).*different dimensions"),
    ("rank 1", loss("dbot", jnp.ones(4), jnp.ones(4)), r"\(4,\).*\(4,\) must both be 2-D"),
    ("rank 3", loss("siglip", jnp.ones((2, 4, 3)), jnp.ones((2, 4, 3))), r"\(2, 4, 3\).*must both be 2-D"),
    ("int embeddings", loss("entropic_ot", jnp.ones((4, 3), jnp.int32), X), r"image embeddings must have a floating dtype.*int32"),
    ("bool embeddings", loss("infonce", X, jnp.ones((4, 3), bool)), r"text embeddings must have a floating dtype.*bool"),
    ("complex embeddings", loss("one_sided_ot", X.astype(jnp.complex64), X), r"image embeddings must have a floating dtype.*complex64"),
    ("logit_scale 0", loss("entropic_ot", scale=0.0), r"logit_scale must be a finite number > 0, got 0.0"),
    ("logit_scale < 0", loss("infonce", scale=-1.0), r"logit_scale must be a finite number > 0, got -1.0"),
    ("logit_scale nan", loss("unbalanced_ot", scale=NAN), r"logit_scale must be a finite number > 0, got nan"),
    ("logit_scale inf", loss("dbot", scale=INF), r"logit_scale must be a finite number > 0, got inf"),
    ("logit_scale vector", loss("fgw", scale=jnp.array([10.0, 10.0])), r"logit_scale must be a scalar, got shape \(2,\)"),
    ("siglip bias None", lambda: siglip_loss(X, X, 10.0, None), r"siglip needs logit_bias"),
    ("siglip bias nan", loss("siglip", bias=NAN), r"logit_bias must be a finite number, got nan"),
    ("direct tau", lambda: ot_losses.unbalanced_ot_loss(X, X, 10.0, tau_b=1.5), r"tau_b must be in \(0, 1\], got 1.5"),
    ("direct unknown option", lambda: ot_losses.entropic_ot_loss(X, X, 10.0, tau=0.5), r"entropic_ot_loss got unknown option 'tau'"),
    ("direct clip scale", lambda: clip_loss(X, X, 0.0), r"logit_scale must be a finite number > 0, got 0.0"),
    ("kl non-square", lambda: ot_losses.kl_from_identity(jnp.zeros((4, 3))), r"square \[n, n\] plan, got shape \(4, 3\)"),
    # --- plans
    ("cost rank 1", lambda: plans.sinkhorn_log_plan(jnp.ones(4), 0.1), r"cost must be a non-empty 2-D.*shape \(4,\)"),
    ("cost empty", lambda: plans.dbot_log_plan(jnp.ones((0, 3)), 0.1), r"cost must be a non-empty 2-D.*shape \(0, 3\)"),
    ("cost int", lambda: plans.one_sided_log_plan(jnp.ones((4, 3), jnp.int32), 0.1), r"cost must have a floating dtype.*int32"),
    ("epsilon inf", lambda: plans.sinkhorn_log_plan(COST, INF), r"epsilon must be a finite number > 0, got inf"),
    ("marginal shape", lambda: plans.sinkhorn_log_plan(COST, 0.1, a=jnp.ones(3) / 3), r"a has shape \(3,\), expected \(4,\)"),
    ("marginal negative", lambda: plans.sinkhorn_log_plan(COST, 0.1, b=jnp.array([0.5, 0.6, -0.1]), implicit=True),
     r"b must be finite and non-negative, got -0.1 at index 2"),
    ("unrolled zero mass", lambda: plans.sinkhorn_log_plan(COST, 0.1, a=jnp.array([0.5, 0.5, 0.0, 0.0])),
     r"a must be finite and positive .*got 0 at index 2"),
    ("one-sided axis", lambda: plans.one_sided_log_plan(COST, 0.1, axis=2), r"axis must be 0 or 1, got 2"),
    ("gromov features", lambda: gromov.fgw_log_plan(COST, jnp.ones((4, 2)), jnp.ones((2, 2)), 0.1),
     r"features \(4, 2\) and \(2, 2\) do not fit cost \(4, 3\)"),
    ("plan iterations", lambda: plans.sinkhorn_log_plan(COST, 0.1, num_iterations=-1), r"num_iterations must be an integer >= 1, got -1"),
    # --- inference: temperature
    ("epsilon is a scale", ot(epsilon=14.3), r"epsilon must be in \(0, 1\], got 14.3; .*pass logit_scale=14.3"),
    ("positional scale", lambda: inference.ot_zero_shot(X, T, 100.0), r"epsilon must be in \(0, 1\], got 100.0; .*logit_scale=100"),
    ("scale is an epsilon", lambda: inference.ot_zero_shot(X, T, logit_scale=0.05), r"logit_scale must be in \[1, inf\), got 0.05; .*pass epsilon=0.05"),
    ("both temperatures", ot(logit_scale=10.0), r"exactly one of epsilon= .* or logit_scale=.*got epsilon=0.1, logit_scale=10.0"),
    ("no temperature", lambda: inference.ot_zero_shot(X, T), r"exactly one of epsilon=.*got epsilon=None, logit_scale=None"),
    ("epsilon nan", ot(epsilon=NAN), r"epsilon must be in \(0, 1\], got nan"),
    ("epsilon 0", ot(epsilon=0.0), r"epsilon must be in \(0, 1\], got 0.0"),
    ("epsilon < 0", lambda: inference.fgw_zero_shot(X, T, -0.1), r"epsilon must be in \(0, 1\], got -0.1"),
    ("inference scale inf", lambda: inference.ot_zero_shot_plan(X, T, logit_scale=INF), r"logit_scale must be in \[1, inf\), got inf"),
    ("epsilon vector", ot(epsilon=jnp.array([0.1, 0.1])), r"epsilon must be a scalar, got shape \(2,\)"),
    # --- inference: embeddings and prior
    ("no images", ot(jnp.ones((0, 3)), T), r"image embeddings \(0, 3\) and class embeddings \(3, 3\).*empty"),
    ("no classes", ot(X, jnp.ones((0, 3))), r"image embeddings \(4, 3\) and class embeddings \(0, 3\).*empty"),
    ("inference dims", lambda: inference.zero_shot_predict(jnp.ones((4, 3)), jnp.ones((3, 2))), r"\(4, 3\).*\(3, 2\).*different dimensions"),
    ("inference rank", lambda: inference.zero_shot_predict(jnp.ones(3), T), r"\(3,\).*must both be 2-D"),
    ("inference int", ot(jnp.ones((4, 3), jnp.int32), T), r"image embeddings must have a floating dtype.*int32"),
    ("class row nan", ot(X, T.at[1, 0].set(NAN)), r"class embeddings must be finite.*class row 1"),
    ("prior negative", ot(class_prior=[1.2, -0.1, -0.1]), r"class_prior must be non-negative.*-0.1 at index 1"),
    ("prior nan", ot(class_prior=[0.5, NAN, 0.5]), r"class_prior must be finite, got nan at index 1"),
    ("prior length", ot(class_prior=[0.5, 0.5]), r"class_prior has shape \(2,\), expected \(3,\)"),
    ("prior sum", ot(class_prior=[0.5, 0.3, 0.1]), r"class_prior must .*sum to 1, got sum 0.9"),
    ("prior 2-D", ot(class_prior=np.full((1, 3), 1 / 3)), r"class_prior has shape \(1, 3\), expected \(3,\)"),
    ("fgw alpha", lambda: inference.fgw_zero_shot(X, T, 0.1, alpha=NAN), r"alpha must be in \[0, 1\], got nan"),
    ("fgw num_outer", lambda: inference.fgw_zero_shot(X, T, 0.1, num_outer=0), r"num_outer must be an integer >= 1, got 0"),
    ("unknown solver option", ot(tau_a=0.5), r"ot_zero_shot got unknown option 'tau_a'"),
    ("max_iterations", ot(max_iterations=0), r"max_iterations must be an integer >= 1, got 0"),
    # --- selective classification
    ("coverage 0", lambda: selective.partial_ot_confidence(X, T, 0.1, 0.0), r"coverage must be in \(0, 1\], got 0.0"),
    ("coverage > 1", lambda: selective.partial_ot_confidence(X, T, 0.1, 1.5), r"coverage must be in \(0, 1\], got 1.5"),
    ("coverage nan", lambda: selective.partial_ot_confidence(X, T, 0.1, NAN), r"coverage must be in \(0, 1\], got nan"),
    ("coverage missing", lambda: selective.partial_ot_confidence(X, T, 0.1), r"needs coverage"),
    ("partial scale", lambda: selective.partial_ot_confidence(X, T, 14.3, 0.5), r"epsilon must be in \(0, 1\], got 14.3"),
    ("risk coverage", lambda: selective.selective_risk(jnp.ones(3), jnp.ones(3, bool), -0.5), r"coverage must be in \(0, 1\], got -0.5"),
    ("risk lengths", lambda: selective.risk_coverage_curve(jnp.ones(3), jnp.ones(4, bool)), r"confidence \(3,\) and correct \(4,\)"),
    ("aurc empty", lambda: selective.aurc(jnp.ones(0), jnp.ones(0, bool)), r"confidence \(0,\) and correct \(0,\) must be non-empty"),
    ("confidence int", lambda: selective.aurc(jnp.ones(3, jnp.int32), jnp.ones(3, bool)), r"confidence must have a floating dtype.*int32"),
    ("plan rank", lambda: selective.plan_confidence(jnp.zeros(3)), r"log_plan must be a non-empty 2-D.*shape \(3,\)"),
    # --- the two-tower model and its loss
    ("embed_dim 0", tower(embed_dim=0), r"TwoTower.embed_dim must be an integer >= 1, got 0"),
    ("hidden < 0", tower(hidden=-1), r"TwoTower.hidden must be an integer >= 1, got -1"),
    ("vocab_size 1", tower(vocab_size=1), r"TwoTower.vocab_size must be an integer >= 2, got 1"),
    ("vocab_size float", tower(vocab_size=10.5), r"TwoTower.vocab_size must be an integer >= 2, got 10.5"),
    ("init scale nan", tower(init_log_logit_scale=NAN), r"TwoTower.init_log_logit_scale must be a finite number, got nan"),
    ("encoder width", lambda: ImageEncoder(embed_dim=0), r"ImageEncoder.embed_dim must be an integer >= 1, got 0"),
    ("token out of range", tower_init(IMAGES, TOKENS.at[0, 0].set(99)), r"token id 99 is outside \[0, vocab_size=12\)"),
    ("token negative", tower_init(IMAGES, TOKENS.at[0, 0].set(-3)), r"token id -3 is outside \[0, vocab_size=12\)"),
    ("token float", tower_init(IMAGES, TOKENS.astype(jnp.float32)), r"tokens must be integer ids, got dtype float32"),
    ("tower batch", tower_init(IMAGES, TOKENS[:2]), r"images \(3, 64\) and tokens \(2, 3\)"),
    ("loss name", lambda: make_two_tower_loss(TwoTower(vocab_size=12), "clip"), r"unknown OT-CLIP loss 'clip'"),
    ("loss hparam", lambda: make_two_tower_loss(TwoTower(vocab_size=12), "unbalanced_ot", tau_a=2.0), r"tau_a must be in \(0, 1\], got 2.0"),
    ("batch keys", lambda: two_tower_loss_call({"image": IMAGES}), r"needs keys 'image' and 'tokens', missing \['tokens'\]"),
    # --- digits caption pairs
    ("swap p", lambda: digits_pairs.swap_captions(np.zeros((5, 2)), 1.5, np.random.default_rng(0)), r"p must be in \[0, 1\], got 1.5"),
    ("imbalance", lambda: digits_pairs.long_tailed_indices(np.arange(20) % 10, 0.5, np.random.default_rng(0)), r"imbalance must be in \[1, inf\), got 0.5"),
    ("unknown word", lambda: digits_pairs.tokenize("a banana", digits_pairs.build_vocab()), r"word 'banana'"),
]


def test_the_sweep_is_large_and_ids_are_unique():
  assert len(CASES) >= 50
  assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("call, pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_one_line_naming_the_value(call, pattern):
  with pytest.raises(InputError, match=pattern) as e:
    call()
  assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["infonce", "entropic_ot", "unbalanced_ot", "fgw"])
def test_a_traced_bad_logit_scale_gives_nan_not_a_finite_loss(name):
  x = jax.random.normal(jax.random.key(0), (6, 4))
  f = jax.jit(get_loss(name))
  assert math.isfinite(float(f(x, x, 10.0)))
  for scale in (0.0, -3.0, NAN):
    assert math.isnan(float(f(x, x, scale))), scale
