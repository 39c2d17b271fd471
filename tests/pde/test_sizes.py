"""The paper's DPOT sizes have exactly the official parameter counts (abstract shapes, nothing allocated)."""

import pytest

from jaxlab.errors import InputError
from jaxlab.pde.dpot import abstract_params, count_params
from jaxlab.pde.sizes import DPOT_SIZES, OFFICIAL_PARAM_COUNTS, make_dpot, dpot_config


@pytest.mark.parametrize("size", sorted(OFFICIAL_PARAM_COUNTS))
def test_paper_sizes_match_official_parameter_counts(size):
  # the official count includes the (weight-0) 12-way dataset-classification head
  assert count_params(abstract_params(make_dpot(size, num_classes=12))) == OFFICIAL_PARAM_COUNTS[size]


def test_class_head_is_the_only_difference_without_classes():
  d = DPOT_SIZES["Ti"]["embed_dim"]
  head = 2 * (d * d + d) + d * 12 + 12
  assert count_params(abstract_params(make_dpot("Ti"))) == OFFICIAL_PARAM_COUNTS["Ti"] - head


@pytest.mark.parametrize("size, low, high", [("tiny", 1e4, 1e5), ("cpu_small", 1e5, 1e6)])
def test_small_sizes(size, low, high):
  assert low <= count_params(abstract_params(make_dpot(size))) <= high


def test_unknown_size_and_overrides():
  assert dpot_config("S", remat=True)["remat"] is True
  with pytest.raises(InputError, match="unknown DPOT size 'XL'"):
    make_dpot("XL")
