"""The README's Python examples run as written, its links lead somewhere, and the resume guide
names every resume-safe key."""

import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")
TEXT = open(README, encoding="utf-8").read()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
# Where resuming is documented for users (the list of keys a resumed run may change).
RESUME_GUIDE = os.path.join(REPO, "docs", "guides", "checkpoints.md")


def test_readme_has_examples():
  assert BLOCKS


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index):
  namespace: dict = {}
  exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), namespace)


def test_readme_links_point_to_files():
  links = [target for target in re.findall(r"\]\(([^)\s]+)\)", TEXT) if "://" not in target]
  assert any(t.startswith("docs/guides/") for t in links), links  # it links into the guides
  missing = [t for t in links if not os.path.exists(os.path.join(REPO, t.split("#")[0]))]
  assert not missing, f"README links to missing files: {missing}"


def test_resume_guide_lists_every_resume_safe_key():
  from jaxlab.train.checkpoint import RESUME_SAFE_KEYS
  text = open(RESUME_GUIDE, encoding="utf-8").read()
  missing = [k for k in RESUME_SAFE_KEYS if f"`{k}`" not in text]
  assert not missing, f"{os.path.relpath(RESUME_GUIDE, REPO)}'s resuming section lacks {missing}"


def test_getting_started_gives_the_suites_time_as_the_readme_does():
  def make_test_lines(path):
    with open(path, encoding="utf-8") as f:
      return [line.strip() for line in f if line.startswith("make test ")]
  readme = make_test_lines(README)
  assert readme and re.search(r"about \d+ minutes on 2 idle CPU cores", readme[0]), readme
  assert make_test_lines(os.path.join(REPO, "docs", "getting_started.md")) == readme
