"""The layers run one way: the import contract of setup.cfg holds, and breaks on an upward import.

``lint-imports`` (import-linter) checks the contract: entry -> config layer -> train -> methods ->
moe -> base, and no ``ml_collections`` below the config layer. The design page shows the same
contract, and ``scripts/layer_graph.py`` draws every top-level module on a floor of it.
"""

from __future__ import annotations

import configparser
import contextlib
import io
import pathlib
import re
import shutil
import sys

from importlinter.cli import lint_imports

REPO = pathlib.Path(__file__).resolve().parents[1]
SETUP_CFG = REPO / "setup.cfg"


def _contract_text() -> str:
  """The ``[importlinter...]`` sections of setup.cfg, as written (the contract is the file's last part)."""
  text = SETUP_CFG.read_text()
  return text[text.index("[importlinter]"):].strip()


def test_the_contract_is_kept():
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    status = lint_imports(config_filename=str(SETUP_CFG), no_cache=True)
  assert status == 0, out.getvalue()
  assert "Contracts: 2 kept, 0 broken." in out.getvalue()


def test_an_upward_import_and_a_config_in_a_method_package_break_it(tmp_path, cli):
  """A copy of jaxlab with a method importing the trainer, and a method importing ml_collections."""
  shutil.copytree(REPO / "jaxlab", tmp_path / "jaxlab", ignore=shutil.ignore_patterns("__pycache__"))
  for module, line in (("rl/dqn.py", "import jaxlab.train.loop  # upward: a method package imports the loop"),
                       ("moe/experts.py", "import ml_collections  # a config below the config layer")):
    path = tmp_path / "jaxlab" / module
    path.write_text(path.read_text() + f"\n{line}\n")
  code = ("import sys; from importlinter.cli import lint_imports; "
          f"sys.exit(lint_imports(config_filename={str(SETUP_CFG)!r}, no_cache=True))")
  out = cli.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, timeout=120)
  assert out.returncode == 1, out.stdout + out.stderr
  assert "Contracts: 0 kept, 2 broken." in out.stdout, out.stdout
  assert "jaxlab.rl.dqn -> jaxlab.train.loop" in out.stdout and "jaxlab.moe.experts -> ml_collections" in out.stdout


def test_the_design_page_shows_the_contract():
  page = (REPO / "docs" / "design.md").read_text()
  blocks = re.findall(r"```ini\n(.*?)```", page, flags=re.S)
  assert [b.strip() for b in blocks] == [_contract_text()], "docs/design.md's contract block differs from setup.cfg's"


def test_every_top_level_module_is_on_a_floor_and_no_import_goes_up_undeclared():
  sys.path.insert(0, str(REPO / "scripts"))
  try:
    import layer_graph  # noqa: PLC0415 - the script, as a module
  finally:
    sys.path.pop(0)
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    layer_graph.main([f"--config={SETUP_CFG}"])
  text = out.getvalue()
  assert re.search(r"^not in the contract: *$", text, flags=re.M), text  # every module is on a floor
  flagged = [line for line in text.splitlines() if re.search(r" (UP|SIDEWAYS|\?)(\W|$)", line)]
  assert all(re.search(r"\b(UP|SIDEWAYS) \(declared\)", line) for line in flagged), flagged
  cfg = configparser.ConfigParser()
  cfg.read(SETUP_CFG)
  declared = [line for line in cfg["importlinter:contract:layers"]["ignore_imports"].splitlines()
              if line.strip() and not line.strip().startswith("#")]
  assert len(declared) == 3  # the PDE data command and the two deprecated import paths, nothing else
