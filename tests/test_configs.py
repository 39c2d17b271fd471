"""Every config in configs/ loads by name from any working directory (as notebooks and users load them)."""

import os
import subprocess
import sys

from jaxlab.config_files import available_configs


def test_every_config_loads_by_name_outside_the_repository(tmp_path):
  names = available_configs()
  assert {"quickstart", "dqn_minatar", "dpot_pde", "dpot_moe", "rl_momo_dqn"} <= set(names)
  code = ("from jaxlab.config_files import load_config\n"
          f"for name in {names!r}:\n"
          "  assert load_config(name).to_dict(), name\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  assert run.returncode == 0, run.stderr[-2000:]
