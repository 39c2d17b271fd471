"""Your own task and optimizer from a config file, through the command line (one load of the file)."""

import json
import os
import textwrap

import pytest

from jaxlab.config_files import load_config
from jaxlab.errors import InputError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join("configs", "examples", "robust_regression.py")


def test_the_example_config_registers_its_task_and_optimizer_and_trains(cli, tmp_path):
  p = cli.main(f"--config={EXAMPLE}:tiny", f"--workdir={tmp_path}", "--config.optimizer.momentum=0.8")
  assert p.returncode == 0, p.stderr
  assert "Huber regression" in p.stdout and "sign_momentum" in p.stdout and "weight_error" in p.stdout
  rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
  assert rows[-1]["step"] == 20 and "mae" in rows[-1] and "weight_error" in rows[-1]


def test_the_tasks_guide_shows_the_example_file_as_shipped():
  text = open(os.path.join(REPO, "docs", "guides", "tasks.md"), encoding="utf-8").read()
  assert f"```python\n{open(os.path.join(REPO, EXAMPLE)).read()}```" in text


def test_a_config_registering_a_built_in_name_is_one_line(cli, tmp_path):
  path = tmp_path / "taken.py"
  path.write_text(textwrap.dedent("""
      import optax
      from jaxlab.optim.registry import OPTIMIZERS

      @OPTIMIZERS.register("sgd")
      def my_sgd(learning_rate):
        return optax.sgd(learning_rate)

      def get_config(arg=None):
        raise AssertionError("not reached")
  """))
  p = cli.main(f"--config={path}", f"--workdir={tmp_path / 'run'}")
  assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
  assert p.stderr.strip().splitlines() == [
      "jaxlab: error: config taken.py: optimizer 'sgd' is already registered (to optax._src.alias:sgd); "
      "register jaxlab_config_taken:my_sgd under another name"]


def test_loading_a_registering_config_again_is_fine_and_its_classes_find_their_module(tmp_path):
  path = tmp_path / "own_cls.py"
  path.write_text(textwrap.dedent("""
      from __future__ import annotations  # dataclasses then look their module up in sys.modules
      import dataclasses
      import ml_collections
      from jaxlab.train import TASKS

      @dataclasses.dataclass
      class Settings:
        width: int = 3

      @TASKS.register("own_cls_task")
      def own_cls_task(config, ctx):
        raise AssertionError("not built here")

      def get_config(arg=None):
        return ml_collections.ConfigDict({"task": "own_cls_task", "width": Settings().width,
                                          "optimizer": {"name": "sgd"}})
  """))
  first = load_config(str(path))
  again = load_config(str(path))  # a re-run notebook cell: the same definitions, registered again
  assert first.width == again.width == 3
  assert again.optimizer.freeze == () and again.init_from.reinit == ()  # every config takes the fine-tuning keys

  other = tmp_path / "own_cls_2.py"  # another file under the taken name: refused, naming the file
  other.write_text(path.read_text().replace("raise AssertionError", "return None  #"))
  with pytest.raises(InputError, match=r"config own_cls_2.py: task 'own_cls_task' is already registered"):
    load_config(str(other))
