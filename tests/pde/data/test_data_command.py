"""`python -m jaxlab.pde.data`: makes exactly the sets a config reads; bad input is one line and makes nothing."""

import os

import pytest

from jaxlab.config_files import load_config
from jaxlab.errors import InputError
from jaxlab.pde.data import load_cached
from jaxlab.pde.data.selection import mixture_specs
from jaxlab.tasks.pde_config import check_config, config_specs

def test_config_data_are_what_training_reads(cli, tmp_path):
  override = "--config.data.resolution=16"  # 16^2 keeps generation to a few seconds
  p = cli.module("jaxlab.pde.data", "--config=dpot_pde:tiny", override, f"--cache_dir={tmp_path}")
  assert p.returncode == 0, p.stderr
  config = load_config("dpot_pde:tiny")
  config.data.resolution = 16
  specs = check_config(config)[0]  # the specs the pde_operator task loads
  assert len(p.stdout.splitlines()) == len(specs) == 1
  for spec in specs:
    assert load_cached(spec, tmp_path) is not None, spec.name
  assert len(os.listdir(tmp_path / "pde_data")) == len(specs)  # nothing else was made


def test_default_mixture_is_the_mixture_config():
  """The command's defaults (200 trajectories, 64^2, each family's frames) are configs/dpot_pde.py:mixture's."""
  config_keys = [s.cache_key() for s in check_config(load_config("dpot_pde:mixture"))[0]]
  assert [s.cache_key() for s in mixture_specs(200, 64, 0, 0)] == config_keys


def test_num_frames_flag_sets_every_family():
  assert {s.num_frames for s in mixture_specs(4, 16, 6, 0)} == {7}  # 6 frames after the initial state


def test_a_config_on_files_has_nothing_to_generate():
  with pytest.raises(InputError, match=r"--config=dpot_files:tiny: reads the field's files \(data.source='files'\)"):
    config_specs(load_config("dpot_files:tiny"), None, "dpot_files:tiny")


@pytest.mark.parametrize("args, message", [
    (("--sets=ns_fno_nu1e-3",), "--sets=ns_fno_nu1e-3: unknown ['ns_fno_nu1e-3']; known: ns_fno_nu1e-03, "),
    (("--config=dpot_pde:tiny", "--resolution=32"), "--resolution does not apply with --config"),
    (("--config=digits_mlp",), "--config=digits_mlp: trains task(s) ['digits_classification'], none is"),
])
def test_bad_input_is_one_line_and_makes_nothing(cli, tmp_path, args, message):
  p = cli.module("jaxlab.pde.data", *args, f"--cache_dir={tmp_path}")
  assert p.returncode == 2, (p.stdout, p.stderr)
  assert p.stderr.startswith("jaxlab.pde.data: error: ") and message in p.stderr, p.stderr
  assert len(p.stderr.strip().splitlines()) == 1, p.stderr
  assert p.stdout == "" and os.listdir(tmp_path) == []
