"""What the README, the TA guide and Lab 12 say a run takes is the committed benchmark figure, not a
number typed by hand.

Each quote below is rendered from benchmarks/results/*.json (what `make bench`, `bench.py --make-test`
and `make bench-class` commit, with the fingerprint of what they measured) and must stand in its file
word for word (whitespace collapsed). After a new benchmark run, a sentence that still quotes the old
run fails here: update it with the new figure.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def _results(name):
    return json.loads((RESULTS / name).read_text())


def _row(data, what):
    """The median of the row whose description starts with ``what``."""
    rows = [r for r in data["rows"] if r["what"].startswith(what)]
    assert len(rows) == 1, f"{len(rows)} rows of benchmarks/results start with {what!r}"
    return rows[0]["median"]


def _minutes(minutes):
    whole = int(minutes)
    return f"{whole} min {round((minutes - whole) * 60)} s"


def _make_test():
    data = _results("make_test.json")
    passed = re.search(r"(\d+) passed", data["rows"][0]["note"]).group(1)
    return [f"`make test` took {_minutes(_row(data, '`make test`'))} on a fresh clone", f"{passed} passed"]


def _ta_guide():
    bench, cls = _results("bench.json"), _results("bench_class.json")
    cpu = sorted(run["cpu"] for run in cls["runs"].values())
    return [f"Lab 12 in about {_row(bench, 'Run All lab12 (fresh kernel)'):.0f} s of CPU",
            f"{_row(bench, 'autograde lab11'):.1f} s and {_row(bench, 'autograde lab12'):.1f} s with nbgrader's start-up",
            f"{cpu[0]:.0f}-{cpu[-1]:.0f} CPU seconds for the {cls['size']} in {len(cpu)} runs"]


def _lab12():
    bench = _results("bench.json")
    return [f"*Run All* takes about {_row(bench, 'Run All lab12 (fresh kernel)'):.0f} s of CPU on the course's 2-core "
            "test machine",
            f"Every run below takes about {_row(bench, 'one PPO run'):.1f} s of CPU on the course's 2-core test machine"]


QUOTES = {"README.md": _make_test, "docs/ta_guide.md": _ta_guide, "source/lab12/lab12.ipynb": _lab12}


def _text(rel):
    path = REPO / rel
    if path.suffix == ".ipynb":
        return "\n".join(cell.source for cell in nbformat.read(str(path), as_version=4).cells)
    return path.read_text()


@pytest.mark.parametrize("rel", list(QUOTES))
def test_the_docs_quote_the_committed_figures(rel):
    text = " ".join(_text(rel).split())
    missing = [quote for quote in QUOTES[rel]() if " ".join(quote.split()) not in text]
    assert not missing, (f"{rel} does not quote the committed benchmark figures (benchmarks/results/*.json); "
                         f"expected these words in it: {missing}. After a new benchmark run, update the sentence "
                         f"with the new figure.")
