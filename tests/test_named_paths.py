"""Every repository path that the code, configs, README, docs, notebooks, BUILD_NOTES or the changelog name exists."""

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SCANNED = ("jaxlab/**/*.py", "configs/*.py", "benchmarks/*.py", "scripts/*.py", "colabs/src/*.py",
           "colabs/README.md", "README.md", "BUILD_NOTES.md", "CHANGELOG.md", "docs/**/*.md")  # not tests/: bad-input tests name missing files
# A path into one of our top-level folders (not one inside another repository's tree, such as
# dopamine's labs/moes/configs/...), or a notes file at the top.
PATH = re.compile(r"(?<![\w/.-])((?:benchmarks|configs|scripts|colabs|tests|jaxlab|docs)/[\w/.-]*?\w"
                  r"\.(?:py|md|ipynb|json|npz|png|csv)|NOTES_\w+\.md)\b")


def _is_placeholder(path):
  stem = pathlib.Path(path).stem
  return stem.isupper() or stem in ("x", "my_exp")  # configs/X.py, configs/x.py in usage lines


def _named_paths():
  found = {}
  for pattern in SCANNED:
    for file in sorted(REPO.glob(pattern)):
      for lineno, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        for match in PATH.finditer(line):
          if not _is_placeholder(match.group(1)):
              found.setdefault(match.group(1), f"{file.relative_to(REPO)}:{lineno}")
  return found


def test_the_scan_finds_paths():
  paths = _named_paths()
  assert "benchmarks/rl_study.py" in paths and "configs/dqn_minatar.py" in paths, sorted(paths)[:20]


def test_every_named_path_exists():
  missing = [f"{path} (named at {where})" for path, where in sorted(_named_paths().items())
             if not (REPO / path).exists()]
  assert not missing, "named but missing:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("text, expected", [
    ("see NOTES_moe.md", ["NOTES_moe.md"]),
    ("(benchmarks/pde_data_dt.py).", ["benchmarks/pde_data_dt.py"]),
    ("dopamine's labs/moes/configs/dqn.py", []),
    ("`configs/dpot_pde.py:ns`", ["configs/dpot_pde.py"]),
])
def test_pattern(text, expected):
  assert [m.group(1) for m in PATH.finditer(text)] == expected
