"""benchmarks/README.md quotes the committed raw figures of the latest runs, not figures typed by hand.

The tables are what `python benchmarks/bench.py --markdown` and `python benchmarks/science.py
--markdown` render from benchmarks/results/*.json; after a new run, paste their output into the README.
"""

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import bench  # noqa: E402
import bench_class  # noqa: E402
import science  # noqa: E402

README = (BENCHMARKS / "README.md").read_text()


@pytest.mark.parametrize("script, render, results", [
    ("bench.py", bench.markdown, bench.RESULTS / "bench.json"),
    ("science.py", science.markdown, science.RESULTS),
    ("bench_class.py", bench_class.markdown, bench_class.RESULTS),
])
def test_readme_quotes_the_committed_figures(script, render, results):
    assert results.exists(), f"{results.relative_to(BENCHMARKS.parent)} is missing: run benchmarks/{script} and commit it"
    table = render()
    assert table in README, (f"benchmarks/README.md does not quote {results.relative_to(BENCHMARKS.parent)}: paste "
                             f"the output of `python benchmarks/{script} --markdown` into it")
