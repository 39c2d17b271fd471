import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxlab.train.mesh import make_mesh
from jaxlab.train.sharding import (check_batch_divisible, host_to_global, batch_sharding,
                                   tree_shardings)


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
