"""Every config key whose default is None can be set from the command line.

A plain ``None`` in a ConfigDict cannot be overridden by a flag (ml_collections: "NoneType ... not supported
for overriding"), so such keys are typed placeholders (``ml_collections.config_dict.placeholder``). The
first test walks every shipped config; the others set each such key of the DQN configs through
``python -m jaxlab.main`` as written, with a value the task then refuses, which shows that the value
arrived (the refusal names it) without training anything.
"""

from __future__ import annotations

import sys

import ml_collections
import pytest
from absl import flags
from ml_collections import config_flags

from jaxlab.config_files import available_configs, load_config, resolve_config_path

#: A value of each placeholder's type, to set from a flag.
VALUES = {float: "0.25", int: "7"}


def _none_keys(c: ml_collections.ConfigDict, prefix: str = "") -> list[tuple[str, object]]:
  """``(key, field)`` of every leaf whose value is None (``field``: the ConfigDict's stored field)."""
  out = []
  for k in c.keys():
    v = c[k]
    if isinstance(v, ml_collections.ConfigDict):
      out += _none_keys(v, f"{prefix}{k}.")
    elif v is None:
      out.append((f"{prefix}{k}", c._fields[k]))
  return out


CASES = [(name, key, field) for name in available_configs() for key, field in _none_keys(load_config(name))]


def test_the_shipped_configs_have_none_defaults_to_check():
  assert {(n, k) for n, k, _ in CASES} >= {("dqn_minatar", "dqn.vmin"), ("dqn_minatar", "env.sticky_action_prob"),
                                           ("dqn_minatar", "env.max_episode_steps"), ("dqn_atari", "dqn.vmin")}


@pytest.mark.parametrize("name,key,field", CASES, ids=[f"{n}:{k}" for n, k, _ in CASES])
def test_every_none_default_is_a_typed_placeholder_a_flag_sets(name, key, field, monkeypatch):
  assert isinstance(field, ml_collections.FieldReference) and field.get_type() in VALUES, (
      f"{name}: {key} defaults to a plain None, which no --config.{key}=... can override; use "
      "ml_collections.config_dict.placeholder(<type>)")
  if not all(part.isidentifier() for part in key.split(".")):
    pytest.skip(f"{key}: ml_collections parses an override's path as Python, so no flag reaches this key "
                "whatever its default (configs/dpot_study.py's cell names hold '-')")
  path, arg = resolve_config_path(name)
  argv = ["prog", f"--config={path}" + (f":{arg}" if arg else ""), f"--config.{key}={VALUES[field.get_type()]}"]
  monkeypatch.setattr(sys, "argv", argv)  # config_flags reads the overrides from sys.argv
  fv = flags.FlagValues()
  config_flags.DEFINE_config_file("config", flag_values=fv, lock_config=True)
  fv(argv)
  value = fv.config
  for part in key.split("."):
    value = value[part]
  assert value == field.get_type()(VALUES[field.get_type()])


@pytest.mark.parametrize("config,args,message", [
    ("dqn_minatar:tiny", ["--config.dqn.vmin=20"],
     "dqn.vmin=20.0; must be None (= -dqn.vmax) or a finite number below dqn.vmax=10.0"),
    ("dqn_minatar:tiny", ["--config.env.sticky_action_prob=1"], "env.sticky_action_prob=1.0; must be a number in [0, 1)"),
    ("dqn_minatar:tiny", ["--config.env.max_episode_steps=2", "--config.dqn.update_horizon=3"],
     "dqn.update_horizon=3 with env.max_episode_steps=2: every episode is truncated within 3 steps"),
    ("dqn_atari:tiny", ["--config.dqn.vmin=20"],
     "dqn.vmin=20.0; must be None (= -dqn.vmax) or a finite number below dqn.vmax=10.0"),
])
def test_none_default_keys_are_set_from_the_command_line(cli, tmp_path, config, args, message):
  p = cli.main(f"--config={config}", f"--workdir={tmp_path / 'run'}", *args, env={"JAX_PLATFORMS": "cpu"}, timeout=120)
  assert p.returncode == 2, p.stderr[-2000:]
  assert message in p.stderr and "Traceback" not in p.stderr and "not supported for overriding" not in p.stderr
