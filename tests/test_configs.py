"""Every config in configs/ loads by name from any working directory (as notebooks and users load them)."""

import sys

from jaxlab.config_files import available_configs


def test_every_config_loads_by_name_outside_the_repository(cli, tmp_path):
  names = available_configs()
  assert {"quickstart", "dqn_minatar", "dpot_pde", "dpot_moe", "rl_momo_dqn"} <= set(names)
  code = ("from jaxlab.config_files import load_config\n"
          f"for name in {names!r}:\n"
          "  assert load_config(name).to_dict(), name\n")
  run = cli.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": None})  # jaxlab as installed
  assert run.returncode == 0, run.stderr[-2000:]
