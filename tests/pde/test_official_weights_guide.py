"""The DPOT guide's table of the official pre-trained weights: each file's preset has the widths,
depths and parameter count the table gives (those of the official configs and README)."""

import os
import re

import pytest

from jaxlab.pde import OFFICIAL_PARAM_COUNTS, abstract_params, count_params, make_dpot

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROW = re.compile(r"^\| `model_(\w+)\.pth` \| (\w+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| "
                 r"`make_dpot\(\"(\w+)\", num_classes=12\)` \| ([\d,]+) \|$", re.M)
# What the official README and configs/pretrain_*.yaml give (thu-ml/DPOT at dcd2f9a): width, layers, heads, MLP ratio.
OFFICIAL = {"Ti": (512, 4, 4, 1), "S": (1024, 6, 8, 1), "M": (1024, 12, 8, 4), "L": (1536, 24, 16, 4),
            "H": (2048, 27, 8, 4)}


def _rows():
  with open(os.path.join(REPO, "docs", "guides", "dpot.md"), encoding="utf-8") as f:
    return ROW.findall(f.read())


def test_the_table_lists_every_official_file_once():
  assert [r[0] for r in _rows()] == list(OFFICIAL)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r[0])
def test_each_file_matches_its_preset(row):
  file_size, _, width, depth, blocks, ratio, preset, count = row
  assert preset == file_size  # model_<size>.pth is make_dpot("<size>")
  assert tuple(map(int, (width, depth, blocks, ratio))) == OFFICIAL[preset]
  model = make_dpot(preset, num_classes=12)
  assert (model.embed_dim, model.depth, model.n_blocks, model.mlp_ratio) == OFFICIAL[preset]
  assert int(count.replace(",", "")) == OFFICIAL_PARAM_COUNTS[preset]
  assert count_params(abstract_params(model)) == OFFICIAL_PARAM_COUNTS[preset]  # shapes only: nothing allocated
