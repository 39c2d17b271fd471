"""The README's Python examples run as written."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
BLOCKS = re.findall(r"```python\n(.*?)```", open(README).read(), flags=re.S)


def test_readme_has_examples():
  assert BLOCKS


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index):
  namespace: dict = {}
  exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), namespace)


def test_readme_lists_every_resume_safe_key():
  from jaxlab.train.checkpoint import RESUME_SAFE_KEYS
  text = open(README).read()
  missing = [k for k in RESUME_SAFE_KEYS if f"`{k}`" not in text]
  assert not missing, f"README's resuming paragraph lacks {missing}"
