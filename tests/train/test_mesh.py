import jax
import pytest

from jaxlab.train.mesh import make_mesh, resolve_mesh_shape


def test_minus_one_takes_remaining_devices():
  assert resolve_mesh_shape((("data", -1), ("model", 2)), 8) == (4, 2)
  assert resolve_mesh_shape((("data", -1), ("model", 1)), 1) == (1, 1)


def test_make_mesh_uses_all_devices_by_default():
  mesh = make_mesh((("data", -1), ("model", 1)))
  assert dict(mesh.shape) == {"data": jax.device_count(), "model": 1}


def test_mesh_not_dividing_devices_names_both_numbers():
  with pytest.raises(ValueError, match=r"multiple of 3 devices.*8 devices"):
    resolve_mesh_shape((("data", -1), ("model", 3)), 8)
  with pytest.raises(ValueError, match=r"uses 4 devices.*8 devices"):
    resolve_mesh_shape((("data", 2), ("model", 2)), 8)


def test_bad_axis_sizes_rejected():
  with pytest.raises(ValueError, match="at most one -1"):
    resolve_mesh_shape((("data", -1), ("model", -1)), 8)
  with pytest.raises(ValueError, match="unique"):
    resolve_mesh_shape((("data", 2), ("data", 4)), 8)
