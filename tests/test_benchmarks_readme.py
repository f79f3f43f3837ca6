"""benchmarks/README.md quotes the committed raw figures of the latest runs, not figures typed by hand.

The tables are what `python benchmarks/bench.py --markdown` and `python benchmarks/science.py
--markdown` render from benchmarks/results/*.json; after a new run, paste their output into the README.
"""

import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
from benchmarks import bench  # noqa: E402
from benchmarks import bench_class  # noqa: E402
from benchmarks import science  # noqa: E402

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


def test_science_json_holds_the_criteria_of_the_code():
    """A full `make science` commits results/science.json: it must judge exactly the criteria the
    experiment modules define now (names, claims, thresholds, controls), Lab 11, Lab 12 and Beyond PPO."""
    import json
    data = json.loads(science.RESULTS.read_text())
    committed = {(c["experiment"], c["name"], c["claim"], c["threshold"], tuple(c["controls"])) for c in data["criteria"]}
    code = {(e.name, c.name, c.claim, c.threshold_text(), tuple(label for label, _ in c.controls))
            for e in science.experiments() for c in e.criteria}
    assert committed == code, (
        "benchmarks/results/science.json was made by other criteria than the code's: run `make science` (a full "
        f"run) and commit it.\n  only in the code: {sorted(code - committed)}\n  only in the JSON: {sorted(committed - code)}")
    assert len(data["seeds"]) == science.SEEDS and data["summary"][0].startswith("claims: ")


@pytest.mark.parametrize("name", list(bench.MEASURED))
def test_committed_bench_figures_measured_the_current_files(name):
    """A committed bench figure is stale once the code it measured changed (its fingerprint, as the
    Beyond PPO cache's): re-run the benchmark and commit its results with the README table."""
    path = bench.RESULTS / name
    if name == "make_test.json" and not path.exists():
        pytest.skip("benchmarks/results/make_test.json not committed yet (python benchmarks/bench.py --make-test)")
    if name == "make_test.json" and os.environ.get(bench.MEASURING_MAKE_TEST) == "1":
        pytest.skip("this suite is the run that `bench.py --make-test` times: its result replaces make_test.json")
    assert path.exists(), f"{path.relative_to(BENCHMARKS.parent)} is missing: run `make bench` and commit it"
    import json

    committed = json.loads(path.read_text()).get("fingerprint")
    assert committed == bench.fingerprint(name), (
        f"{path.relative_to(BENCHMARKS.parent)} measured other files than the current ones "
        f"({', '.join(bench.MEASURED[name])}): its figures are stale. Run `python benchmarks/bench.py"
        f"{' --make-test' if name == 'make_test.json' else ''}` and commit the results and the README table")
