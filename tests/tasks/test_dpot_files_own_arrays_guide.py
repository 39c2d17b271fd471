"""The DPOT guide's "Your own PDE data", run as written: a NumPy array to files and a table, then pre-training
and fine-tuning on it through the command line.

Both blocks are read from docs/guides/dpot.md and run in an empty folder, the Python one with this
interpreter and the bash one with ``python`` on PATH, so the documented commands are the tested ones.
"""

import json
import math
import os
import re
import sys

import h5py
import pytest

from jaxlab.errors import InputError
from jaxlab.pde.data.files import load_master, open_set

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(REPO, "docs", "guides", "dpot.md")


def guide_blocks() -> tuple[str, str]:
  """The section's Python block (array -> files and table) and bash block (the two runs)."""
  text = open(GUIDE, encoding="utf-8").read()
  section = text[text.index("### Your own PDE data"):text.index("## Measured results")]
  python = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
  bash = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)
  assert len(python) == 1 and len(bash) == 1, (len(python), len(bash))
  return python[0], bash[0]


def test_the_guides_own_array_pretrains_and_fine_tunes(cli, tmp_path):
  python, bash = guide_blocks()
  env = {"JAXLAB_PDE_MASTER": None}
  made = cli.run([sys.executable, "-c", python], cwd=tmp_path, env=env, timeout=120)
  assert made.returncode == 0, made.stderr[-3000:]
  with h5py.File(tmp_path / "my_pde_train.hdf5") as f:
    assert f["data"].shape == (20, 32, 32, 10, 1)                     # DPOT's (N, X, Y, T, C)
  # the fine-tuning finds the programs it shares with pre-training in the suite's compilation cache
  p = cli.bash(bash, cwd=tmp_path, env=env)
  assert p.returncode == 0, p.stderr[-3000:]
  assert "fine-tuning from runs/my_pre (step 20)" in p.stderr, p.stderr[-3000:]
  for run in ("my_pre", "my_ft"):
    last = [json.loads(line) for line in open(tmp_path / "runs" / run / "metrics.jsonl")][-1]
    assert math.isfinite(last["l2re_1step/my_pde"]) and math.isfinite(last["l2re_rollout/my_pde"]), (run, last)


def test_the_guides_array_in_another_axis_order_is_refused(tmp_path, monkeypatch):
  """The guide's promise: its array written (N, T, X, Y, C) with a table that gives no in_size (nor t_total) is
  refused when the set is opened, not trained as a 10x32 grid of 32 frames; written as the guide says, the same
  table opens."""
  python, _ = guide_blocks()
  swapped = python.replace("data=part)", "data=np.moveaxis(part, 3, 1))").replace('"in_size": [32, 32], ', "")
  assert swapped.count("np.moveaxis(part, 3, 1)") == 1 and '"in_size"' not in swapped, "the guide's block changed"
  monkeypatch.chdir(tmp_path)
  exec(compile(swapped, "guide", "exec"), {})
  entry = load_master(str(tmp_path / "my_master.json"))["my_pde"]
  with pytest.raises(InputError, match=r"my_pde_train.hdf5:'data' has shape \(20, 10, 32, 32, 1\), which the layout "
                     r"\(N, X, Y, T\[, C\]\) reads as a 10x32 grid of T=32 frames; a grid that is not square"):
    open_set(entry, str(tmp_path))
  exec(compile(python.replace('"in_size": [32, 32], ', ""), "guide", "exec"), {})
  assert open_set(load_master("my_master.json")["my_pde"], str(tmp_path)).trajectories.shape == (24, 10, 32, 32, 1)
