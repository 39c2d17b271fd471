"""The figures the docs quote come from benchmarks/results/, and the results page lists every file there.

docs/_ext/results.py renders ``{result}`FILE.json:key.key;format``` from the file at build time and
generates the results page; these tests call the same functions directly (no Sphinx build): every
reference in the pages resolves, a wrong one is refused naming what is missing, and every
``benchmarks/results/**.json`` has a described section on the page.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(DOCS / "_ext"))

import results  # noqa: E402  (docs/_ext/results.py)
from results_catalog import CATALOG  # noqa: E402


def test_every_result_reference_in_the_docs_resolves():
  problems = results.unresolved(DOCS, RESULTS)
  assert not problems, "references that do not resolve:\n" + "\n".join(problems)


def test_the_method_pages_quote_their_figures_through_the_role():
  pages = sorted((DOCS / "methods").glob("*.md")) + [DOCS / "design.md"]
  counts = {p.name: len(results.references(p.read_text(encoding="utf-8"))) for p in pages}
  assert sum(counts.values()) >= 30, counts
  for name in ("momo.md", "ot_clip.md", "soft_moe_rl.md", "dpot.md", "design.md"):
    assert counts[name] >= 3, counts


@pytest.mark.parametrize("reference, message", [
    ("rl/no_such_file.json:x", "no file benchmarks/results/rl/no_such_file.json"),
    ("rl/throughput.json:heads.no_such_head", "has no key 'no_such_head' under heads"),
    ("rl/throughput.json:heads", "is a dict, not a value"),
    ("rl/throughput.json", "is not 'FILE.json:key.key[;format]'"),
    ("train/step_overhead.json:params_per_run;.2q", "format '.2q' does not apply"),
    ("train/step_overhead.json:results.dispatch_bound_4.8k_params.speedup", "no key 'dispatch_bound_4'"),
])
def test_a_reference_that_does_not_resolve_is_refused_naming_what_is_missing(reference, message):
  with pytest.raises(results.ResultError, match=re.escape(message)):
    results.lookup(RESULTS, reference)


def test_a_broken_reference_in_a_page_is_reported_with_page_and_line(tmp_path):
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "page.md").write_text("fine {result}`a.json:x.0;.1f`\n\nbroken {result}`a.json:y`\n")
  (tmp_path / "r").mkdir()
  (tmp_path / "r" / "a.json").write_text(json.dumps({"x": [1.25]}))
  assert results.lookup(tmp_path / "r", "a.json:x.0;.1f") == "1.2"
  assert results.unresolved(tmp_path / "docs", tmp_path / "r") == [
      "docs/page.md:3: {result}`a.json:y`: benchmarks/results/a.json has no key 'y' under the top level (there: ['x'])"]


def test_values_render_as_the_file_has_them():
  data = json.loads((RESULTS / "train" / "step_overhead.json").read_text())
  assert results.lookup(RESULTS, "train/step_overhead.json:params_per_run;,") == f"{data['params_per_run']:,}"
  ratio = data["results"]["one_run"]["ratio_to_bare"]["no_guard"]
  assert results.lookup(RESULTS, "train/step_overhead.json:results.one_run.ratio_to_bare.no_guard;.2f") == f"{ratio:.2f}"
  seeds = json.loads((RESULTS / "dpot" / "official_protocol" / "study.json").read_text())["a_dpot_nu1e-3"]["final_loss"]
  mean = sum(seeds) / len(seeds)
  std = (sum((x - mean) ** 2 for x in seeds) / len(seeds)) ** 0.5  # numpy's default, ddof 0
  ref = "dpot/official_protocol/study.json:a_dpot_nu1e-3.final_loss."
  assert (results.lookup(RESULTS, ref + "mean;.6f"), results.lookup(RESULTS, ref + "std;.6f")) == (f"{mean:.6f}", f"{std:.6f}")
  assert results.lookup(RESULTS, ref + "max") == f"{max(seeds):.4g}"
  bare = data["results"]["one_run"]["ms"]["bare"]
  assert results.lookup(RESULTS, "train/step_overhead.json:results.one_run.ms.bare;*1e-3:.3f") == f"{bare / 1000:.3f}"
  speedup = data["results"]["dispatch_bound_4.8k_params"]["speedup"]  # a key with a dot, in brackets
  assert results.lookup(RESULTS, "train/step_overhead.json:results.[dispatch_bound_4.8k_params].speedup;.1f") == f"{speedup:.1f}"


def test_every_results_file_is_described_and_on_the_page():
  files = results.results_files(RESULTS)
  assert len(files) >= 30
  assert sorted(CATALOG) == files, ("results files without a catalog entry (docs/_ext/results_catalog.py): "
                                    f"{sorted(set(files) - set(CATALOG))}; entries without a file: "
                                    f"{sorted(set(CATALOG) - set(files))}")
  page = results.results_page_markdown(RESULTS, DOCS)
  for relpath in files:
    assert f"## `{relpath}`" in page
    assert CATALOG[relpath][1] in page  # its command
  assert results.MARKER in (DOCS / "results.md").read_text(encoding="utf-8")


def test_the_catalog_links_pages_that_exist():
  for relpath, (what, command, page) in CATALOG.items():
    assert what and command, relpath
    assert (DOCS / page).is_file(), (relpath, page)
