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
