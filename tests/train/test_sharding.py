import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxlab.train.mesh import make_mesh
from jaxlab.errors import InputError
from jaxlab.sharding import (batch_sharding, check_batch_divisible, check_rules_match, host_to_global,
                                   sharding_report, tree_shardings)


@pytest.fixture
def mesh():
  return make_mesh((("data", 4), ("model", 2)))


def test_rules_match_params_and_their_optimizer_moments(mesh):
  tree = {"params": {"Dense_0": {"kernel": jnp.zeros((8, 6)), "bias": jnp.zeros(6)}},
          "opt_state": {"mu": {"Dense_0": {"kernel": jnp.zeros((8, 6))}}, "count": jnp.zeros(())}}
  s = tree_shardings(tree, mesh, ((r"kernel$", (None, "model")),))
  assert s["params"]["Dense_0"]["kernel"].spec == P(None, "model")
  assert s["opt_state"]["mu"]["Dense_0"]["kernel"].spec == P(None, "model")
  assert s["params"]["Dense_0"]["bias"].spec == P()
  assert s["opt_state"]["count"].spec == P()


def test_rule_that_does_not_divide_names_shape_and_axis(mesh):
  with pytest.raises(ValueError, match=r"params/w.*\(8, 5\).*dimension 5.*mesh size 2"):
    tree_shardings({"params": {"w": jnp.zeros((8, 5))}}, mesh, ((r"w$", (None, "model")),))


def test_rule_naming_unknown_axis(mesh):
  with pytest.raises(ValueError, match="'tensor'"):
    tree_shardings({"w": jnp.zeros((8, 4))}, mesh, ((r"w", (None, "tensor")),))


def test_batch_divisibility_error_names_both_numbers(mesh):
  check_batch_divisible(8, mesh)
  with pytest.raises(ValueError, match=r"batch size 10 .* axis size 4"):
    check_batch_divisible(10, mesh)


def test_host_to_global_shards_rows_over_data(mesh):
  x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
  g = host_to_global({"x": x}, batch_sharding(mesh))["x"]
  assert g.sharding.spec == P("data")
  assert len({s.data.shape for s in g.addressable_shards}) == 1
  assert g.addressable_shards[0].data.shape == (4, 3)
  np.testing.assert_array_equal(np.asarray(g), x)


def test_fsdp_shards_large_unmatched_leaves_along_their_largest_divisible_dim(mesh):
  tree = {"params": {"big": jnp.zeros((6, 1024)), "odd": jnp.zeros((3, 999)), "small": jnp.zeros((4, 4)),
                     "ruled": jnp.zeros((8, 512))}}
  s = tree_shardings(tree, mesh, ((r"ruled", (None, "model")),), fsdp_axis="data", fsdp_min_size=1000)
  assert s["params"]["big"].spec == P(None, "data")     # 1024 is the largest dim divisible by 4
  assert s["params"]["odd"].spec == P()                 # nothing divisible by 4: replicated
  assert s["params"]["small"].spec == P()               # under min size
  assert s["params"]["ruled"].spec == P(None, "model")  # rules win over the strategy


def test_report_names_unmatched_rules_and_replicated_bytes(mesh):
  tree = {"params": {"w": jnp.zeros((8, 64)), "b": jnp.zeros(64)}}
  rules = ((r"w$", (None, "model")), (r"Dense_9", (None, "model")))
  report = sharding_report(tree, tree_shardings(tree, mesh, rules), rules)
  assert report.unmatched_rules == ["Dense_9"]
  assert report.total_bytes == (8 * 64 + 64) * 4 and report.replicated_bytes == 64 * 4
  assert report.per_device_bytes == (8 * 32 + 64) * 4
  assert "Dense_9" in report.summary()


def test_a_rule_matching_nothing_is_an_error_naming_it():
  tree = {"params": {"Dense_0": {"kernel": jnp.zeros((4, 4))}}}
  with pytest.raises(InputError, match=r"rule 'dense_0/kernel' matches no leaf.*params/Dense_0/kernel"):
    check_rules_match(tree, ((r"dense_0/kernel", (None, "model")),))


@pytest.mark.parametrize("rules,match", [
    (((r"w(", (None, "model")),), r"rule 0 has an invalid regex 'w\('"),
    (((r"w", "model"),), r"rule 0 \('w'\) needs a tuple of mesh axes"),
    ((("w",),), r"rule 0 must be \(regex, \(mesh axes...\)\)"),
])
def test_malformed_rules_name_the_rule(mesh, rules, match):
  with pytest.raises(InputError, match=match):
    tree_shardings({"w": jnp.zeros((8, 4))}, mesh, rules)


def test_run_axis_prefixes_every_spec(mesh):
  tree = {"params": {"w": jnp.zeros((4, 8, 6))}, "step": jnp.zeros((4,), jnp.int32)}
  s = tree_shardings(tree, mesh, ((r"w$", (None, "model")),), run_axis="data")
  assert s["params"]["w"].spec == P("data", None, "model")
  assert s["step"].spec == P("data")
